"""AG-UI streams for tests, written and read by the protocol's own Python SDK (``ag_ui.core``,
``ag_ui.encoder``): the events a run sends, their wire bytes as ``EventEncoder`` writes them, and a reader
that validates every event against the SDK's pydantic models and the official client's verifier rules
(``@ag-ui/client`` ``verifyEvents``: the first event starts the run; a message or tool call is started
once and closed once; nothing follows ``RUN_ERROR``; ``RUN_FINISHED`` only with nothing open)."""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import (
    BaseEvent,
    Event,
    EventType,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from pydantic import TypeAdapter

from sse_middleware._core.sse import parse

EVENT: TypeAdapter[Any] = TypeAdapter(Event)
_ENCODER = EventEncoder()
# type -> the field that says which text it adds to
_TEXT_ID = {
    "TEXT_MESSAGE_CONTENT": "message_id",
    "TEXT_MESSAGE_CHUNK": "message_id",
    "REASONING_MESSAGE_CONTENT": "message_id",
    "REASONING_MESSAGE_CHUNK": "message_id",
    "TOOL_CALL_ARGS": "tool_call_id",
    "TOOL_CALL_CHUNK": "tool_call_id",
}
_GROUP = {"TEXT": "text", "REASONING": "reasoning", "TOOL": "args"}


def encode(events: list[BaseEvent]) -> list[bytes]:
    """Each event as its own SSE frame, exactly as ``EventEncoder`` writes it."""
    return [_ENCODER.encode(event).encode() for event in events]


def run(
    text: list[str],
    *,
    args: list[str] = (),  # type: ignore[assignment]
    reasoning: list[str] = (),  # type: ignore[assignment]
    tool: str = "get_weather",
    timestamps: bool = True,
    finish: bool = True,
) -> list[BaseEvent]:
    """A run as pydantic-ai's ``AGUIAdapter`` streams it: reasoning, a text message, a tool call with
    streamed arguments, each delta its own event (with a millisecond timestamp, as the adapter sets)."""
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000, 7))

    def at() -> int | None:
        return next(clock) if timestamps else None

    out: list[BaseEvent] = [
        RunStartedEvent(thread_id="t1", run_id="r1", timestamp=at(), protocol_version="1.0")
    ]
    if reasoning:
        out += [
            ReasoningStartEvent(message_id="think1", timestamp=at()),
            ReasoningMessageStartEvent(message_id="think1", role="reasoning", timestamp=at()),
        ]
        out += [ReasoningMessageContentEvent(message_id="think1", delta=d, timestamp=at()) for d in reasoning]
        out += [
            ReasoningMessageEndEvent(message_id="think1", timestamp=at()),
            ReasoningEndEvent(message_id="think1", timestamp=at()),
        ]
    out.append(TextMessageStartEvent(message_id="msg1", role="assistant", timestamp=at()))
    out += [TextMessageContentEvent(message_id="msg1", delta=d, timestamp=at()) for d in text]
    out.append(TextMessageEndEvent(message_id="msg1", timestamp=at()))
    if args:
        out.append(
            ToolCallStartEvent(
                tool_call_id="call1", tool_call_name=tool, parent_message_id="msg1", timestamp=at()
            )
        )
        out += [ToolCallArgsEvent(tool_call_id="call1", delta=d, timestamp=at()) for d in args]
        out.append(ToolCallEndEvent(tool_call_id="call1", timestamp=at()))
    if finish:
        out.append(RunFinishedEvent(thread_id="t1", run_id="r1", timestamp=at()))
    return out


def chunks(text: list[str], args: list[str]) -> list[BaseEvent]:
    """The ``*_CHUNK`` forms: the first chunk of each names its message or call, the rest continue it."""
    out: list[BaseEvent] = [RunStartedEvent(thread_id="t1", run_id="r1")]
    for i, d in enumerate(text):
        out.append(
            TextMessageChunkEvent(message_id="msg1", role="assistant", delta=d)
            if i == 0
            else TextMessageChunkEvent(message_id="msg1", delta=d)
            if i % 2
            else TextMessageChunkEvent(delta=d)
        )
    for i, d in enumerate(args):
        out.append(
            ToolCallChunkEvent(tool_call_id="call1", tool_call_name="get_weather", delta=d)
            if i == 0
            else ToolCallChunkEvent(delta=d)
        )
    out.append(RunFinishedEvent(thread_id="t1", run_id="r1"))
    return out


class Verifier:
    """The official client's event rules (``verifyEvents``), for the events we send: raises
    ``AssertionError`` on the first event that client would reject."""

    def __init__(self) -> None:
        self.messages: set[str] = set()
        self.calls: set[str] = set()
        self.first = True
        self.errored = self.finished = False

    def feed(self, event: BaseEvent) -> None:
        kind = event.type
        assert not self.errored or kind == EventType.RUN_STARTED, f"{kind} after RUN_ERROR"
        assert not self.finished or kind in (EventType.RUN_ERROR, EventType.RUN_STARTED), (
            f"{kind} after finish"
        )
        if self.first:
            assert kind in (EventType.RUN_STARTED, EventType.RUN_ERROR), "first event must be RUN_STARTED"
            self.first = False
        if kind == EventType.RUN_STARTED:
            self.errored = self.finished = False
        opens = {EventType.TEXT_MESSAGE_START: self.messages, EventType.TOOL_CALL_START: self.calls}
        uses = {EventType.TEXT_MESSAGE_CONTENT: self.messages, EventType.TOOL_CALL_ARGS: self.calls}
        closes = {EventType.TEXT_MESSAGE_END: self.messages, EventType.TOOL_CALL_END: self.calls}
        ident = getattr(event, "message_id", None) or getattr(event, "tool_call_id", None)
        if kind in opens:
            assert ident not in opens[kind], f"{kind} {ident} twice"
            opens[kind].add(ident)
        elif kind in uses:
            assert ident in uses[kind], f"{kind} for {ident}, not started"
        elif kind in closes:
            assert ident in closes[kind], f"{kind} for {ident}, not started"
            closes[kind].discard(ident)
        elif kind == EventType.RUN_FINISHED:
            assert not self.messages and not self.calls, "RUN_FINISHED with messages or calls open"
            self.finished = True
        elif kind == EventType.RUN_ERROR:
            self.errored = True


def read(body: bytes, *, verify: bool = True) -> list[BaseEvent]:
    """Every event of an AG-UI response body, each validated by the SDK's models and (``verify``) by the
    verifier's rules, in order. Raises on an event that is not an AG-UI event, or one the client would
    reject."""
    out = []
    verifier = Verifier()
    for event in parse(body):
        assert event.event is None, "AG-UI events are unnamed"
        model = EVENT.validate_json(event.data)
        if verify:
            verifier.feed(model)
        out.append(model)
    return out


def texts(events: list[BaseEvent]) -> dict[tuple[str, str | None], str]:
    """The text each message and tool call accumulates ((group, id) -> text), id-less chunks continuing
    the last chunk's id of their group, as the client builds them."""
    out: dict[tuple[str, str | None], str] = {}
    open_ids: dict[str, str | None] = {}
    for event in events:
        field = _TEXT_ID.get(event.type.value)
        if field is None:
            continue
        group = _GROUP[event.type.value.split("_")[0]]
        ident = getattr(event, field, None)
        if ident is None:
            ident = open_ids.get(group)
        open_ids[group] = ident
        out[(group, ident)] = out.get((group, ident), "") + (getattr(event, "delta", None) or "")
    return out


def others(events: list[BaseEvent]) -> list[str]:
    """Every event that adds no text, in order, as JSON."""
    return [
        json.dumps(e.model_dump(by_alias=True), sort_keys=True)
        for e in events
        if e.type.value not in _TEXT_ID or not getattr(e, "delta", None)
    ]


def deltas(events: list[BaseEvent]) -> int:
    return sum(1 for e in events if e.type.value in _TEXT_ID and getattr(e, "delta", None))
