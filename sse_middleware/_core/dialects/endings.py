"""How each format says "stopped by a content filter", so that its own clients know without new code.

An :class:`Ending` per guarded stream watches the events that go by for what its last frame needs (the
chunk id and model, the open content blocks, the response object) and builds that frame on a trip:

* OpenAI chat: a chunk with ``finish_reason: "content_filter"`` for every choice, then ``[DONE]``;
* OpenAI Responses: ``response.incomplete`` with ``incomplete_details.reason: "content_filter"``;
* Anthropic: the open blocks closed, ``message_delta`` with ``stop_reason: "refusal"``, ``message_stop``;
* the AI SDK's UI message stream: open parts ended, ``finish`` with ``finishReason: "content-filter"``;
* generic SSE, text in SSE and JSON relays: ``event: error`` with ``type: "content_filter"``;
* text/plain and NDJSON: nothing (the response is cut without its terminating chunk).

The guard's message, code and the error id ride along where the format lets an extra field through.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable
from typing import Any, Final

from ..errors import ErrorInfo
from ..sse import Event, encode
from ..wire import dumps, simple
from .base import Dialect, sse_error

CONTENT_FILTER: Final = "content_filter"
_SEQUENCE: Final = re.compile(rb'"sequence_number":\s*(\d+)')


def _detail(info: ErrorInfo) -> dict[str, Any]:
    return {"type": CONTENT_FILTER, "code": info.code, "message": info.message, "id": info.id}


class Ending:
    """Generic SSE: an error event of type ``content_filter``. ``dialect``: the stream's, whose parse of
    an event is shared with what the ending reads of it (each event is parsed once)."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect

    def see(self, raw: bytes) -> None:
        """An event that went into the gate (cheap byte checks: called for every event)."""

    def frame(self, info: ErrorInfo, keys: Iterable[Hashable]) -> bytes | None:
        return sse_error(info)


class NoEnding(Ending):
    def frame(self, info: ErrorInfo, keys: Iterable[Hashable]) -> bytes | None:
        return None


class ChatEnding(Ending):
    def __init__(self, dialect: Dialect) -> None:
        super().__init__(dialect)
        self._head: dict[str, Any] | None = None

    def see(self, raw: bytes) -> None:
        if self._head is None and b'"id"' in raw:
            obj = self._dialect.data_object(raw)
            if obj is not None and isinstance(obj.get("id"), str):
                self._head = {k: obj[k] for k in ("id", "created", "model", "system_fingerprint") if k in obj}

    def frame(self, info: ErrorInfo, keys: Iterable[Hashable]) -> bytes | None:
        # A chat delta's key is (chunk id, choice index, role, kind, ...).
        found = {
            key[1] for key in keys if isinstance(key, tuple) and len(key) > 1 and isinstance(key[1], int)
        }
        choices = sorted(found) or [0]
        head = self._head or {"id": f"chatcmpl-{info.id}", "model": ""}
        chunk = {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": i, "delta": {}, "finish_reason": CONTENT_FILTER} for i in choices],
            # Not "error": the openai SDK raises on a chunk that has one. The SDKs let this through.
            CONTENT_FILTER: _detail(info),
        }
        return encode(Event(dumps(chunk))) + b"data: [DONE]\n\n"


class AnthropicEnding(Ending):
    def __init__(self, dialect: Dialect) -> None:
        super().__init__(dialect)
        self._open: set[int] = set()

    def see(self, raw: bytes) -> None:
        if b"content_block_st" not in raw:
            return
        for name, opens in ((b"content_block_start", True), (b"content_block_stop", False)):
            obj = self._dialect.data_object(raw, name)
            if obj is not None and isinstance(obj.get("index"), int):
                (self._open.add if opens else self._open.discard)(obj["index"])

    def frame(self, info: ErrorInfo, keys: Iterable[Hashable]) -> bytes | None:
        out = [
            encode(Event(dumps({"type": "content_block_stop", "index": i}), "content_block_stop"))
            for i in sorted(self._open)
        ]
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": "refusal", "stop_sequence": None},
            "usage": {"output_tokens": 0},
            CONTENT_FILTER: _detail(info),
        }
        out.append(encode(Event(dumps(delta), "message_delta")))
        out.append(encode(Event(dumps({"type": "message_stop"}), "message_stop")))
        return b"".join(out)


class ResponsesEnding(Ending):
    def __init__(self, dialect: Dialect) -> None:
        super().__init__(dialect)
        self._response: dict[str, Any] | None = None
        self._sequence = 0

    def see(self, raw: bytes) -> None:
        found = _SEQUENCE.search(raw)
        if found is not None:
            self._sequence = max(self._sequence, int(found.group(1)))
        if self._response is None and b"response.created" in raw:
            event = simple(raw)
            obj = self._dialect.data_object(raw, event[0]) if event is not None else None
            if obj is not None and isinstance(obj.get("response"), dict):
                self._response = obj["response"]

    def frame(self, info: ErrorInfo, keys: Iterable[Hashable]) -> bytes | None:
        response = dict(self._response or {"id": f"resp_{info.id}", "object": "response"})
        response.update(status="incomplete", incomplete_details={"reason": CONTENT_FILTER})
        # Not the created event's (empty) output: without one, the openai SDK's stream helper fills in
        # the items it accumulated, which is what the client was sent.
        response.pop("output", None)
        response[CONTENT_FILTER] = _detail(info)
        body = {"type": "response.incomplete", "sequence_number": self._sequence + 1, "response": response}
        return encode(Event(dumps(body), "response.incomplete"))


class UIMessageEnding(Ending):
    """The open text and reasoning parts ended, the open step finished, then the ``finish`` part with
    the schema's own ``finishReason: "content-filter"`` (its chunk objects are loose: the detail rides
    along), and ``[DONE]``."""

    def __init__(self, dialect: Dialect) -> None:
        super().__init__(dialect)
        self._open: dict[str, str] = {}  # id -> the part's end type, for parts started and not ended
        self._step = False

    def see(self, raw: bytes) -> None:
        if b"-start" not in raw and b"-end" not in raw and b"-step" not in raw:
            return
        obj = self._dialect.data_object(raw)
        kind = obj.get("type") if obj is not None else None
        if obj is None or not isinstance(kind, str):
            return
        if kind in ("start-step", "finish-step"):
            self._step = kind == "start-step"
            return
        ident = obj.get("id")
        if kind in ("text-start", "reasoning-start") and isinstance(ident, str):
            self._open[ident] = kind[: -len("start")] + "end"
        elif kind in ("text-end", "reasoning-end") and isinstance(ident, str):
            self._open.pop(ident, None)

    def frame(self, info: ErrorInfo, keys: Iterable[Hashable]) -> bytes | None:
        parts: list[dict[str, Any]] = [{"type": end, "id": ident} for ident, end in self._open.items()]
        if self._step:
            parts.append({"type": "finish-step"})
        parts.append({"type": "finish", "finishReason": "content-filter", CONTENT_FILTER: _detail(info)})
        return b"".join(encode(Event(dumps(part))) for part in parts) + b"data: [DONE]\n\n"


_BY_NAME: Final[dict[str, type[Ending]]] = {
    "openai": ChatEnding,
    "anthropic": AnthropicEnding,
    "openai-responses": ResponsesEnding,
    "ai-sdk": UIMessageEnding,
    "plain": NoEnding,
    "bytes": NoEnding,
}


def ending_for(dialect: Dialect) -> Ending:
    """A fresh ending for ``dialect`` (by name: subclasses such as spaced OpenAI chunks share it)."""
    if dialect.error_event(ErrorInfo(CONTENT_FILTER, "", "")) is None:
        return NoEnding(dialect)
    return _BY_NAME.get(dialect.name, Ending)(dialect)
