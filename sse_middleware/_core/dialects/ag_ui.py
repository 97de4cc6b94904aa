"""AG-UI, the Agent-User Interaction protocol (1.0): what pydantic-ai's ``AGUIAdapter``, LangGraph, CrewAI,
Mastra and CopilotKit's backends stream to ``@ag-ui/client``.

Each event is one unnamed ``data:`` event holding a JSON object with an uppercase ``type`` (as
``ag_ui.encoder.EventEncoder`` writes it). Recognized by a first event that is ``RUN_STARTED`` with string
``threadId`` and ``runId``, or ``RUN_ERROR`` with a string ``message``: the official client's verifier
rejects a stream that starts any other way, and no other event type alone proves the protocol.

Merged, per key (event type, id, subagent): ``TEXT_MESSAGE_CONTENT`` by ``messageId`` (text),
``REASONING_MESSAGE_CONTENT`` by ``messageId`` (reasoning), ``TOOL_CALL_ARGS`` by ``toolCallId`` (tool
arguments, named by the call's ``TOOL_CALL_START``), and their ``*_CHUNK`` forms (an id-less chunk
continues the one its type last named). Such an event merges when it holds only its type, its id, its
``delta`` string, and optionally ``timestamp`` and ``subagentRunId``:

* ``timestamp``: the merged event keeps the first's (when its text began); the others' are dropped.
* ``rawEvent`` or ``metadata``: the event is never merged (they describe that one event).

An event of these types that does not merge (an opening chunk, which names its message's role or its
call's tool, or one with ``rawEvent``) still adds its ``delta`` to its message or call: guards and the
output check read it there (:meth:`AGUI.texts`), whichever of the two forms carried the text.

It ends with ``RUN_FINISHED``. A failure after the start is ``RUN_ERROR`` with ``message`` (our error id
in it) and ``code``: the verifier accepts ``RUN_ERROR`` at any point of a run, with messages and tool
calls still open, and nothing after it. AG-UI 1.0 has no filtered-run ending (a ``cancelled`` outcome
carries no reason, and a client that does not know it reads a success), so a guard's trip is
``RUN_ERROR`` with ``code: "content_filter"``. Ours follows whatever the app sent: an app that sent its
own ``RUN_ERROR`` and then raised gets a second one, which the verifier rejects ("already errored"), so
its client still fails the run. Only the shell knows which events reached the client (a guard in hold
mode drops the held ones on a failure), so only it could leave ours out.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable
from typing import Any, Final

from ..errors import ErrorInfo
from ..wire import (
    REASONING,
    TEXT,
    Delta,
    Part,
    data_object,
    splice,
    string_field,
    unescape,
    with_id,
)
from .base import Dialect, First, Spliced
from .endings import CONTENT_FILTER, Ending, data_error

# type -> (its id field, the part its text is, whether the id may be absent: a chunk continues one)
_MERGED: Final[dict[str, tuple[str, Part, bool]]] = {
    "TEXT_MESSAGE_CONTENT": ("messageId", TEXT, False),
    "TEXT_MESSAGE_CHUNK": ("messageId", TEXT, True),
    "REASONING_MESSAGE_CONTENT": ("messageId", REASONING, False),
    "REASONING_MESSAGE_CHUNK": ("messageId", REASONING, True),
    "TOOL_CALL_ARGS": ("toolCallId", Part("tool_arguments"), False),
    "TOOL_CALL_CHUNK": ("toolCallId", Part("tool_arguments"), True),
}
_OPTIONAL: Final = ("timestamp", "subagentRunId")
# The fields a mergeable event of each type may hold: anything else describes that one event.
_ALLOWED: Final = {
    kind: frozenset(("type", "delta", field, *_OPTIONAL)) for kind, (field, _, _) in _MERGED.items()
}
_DELTA: Final = string_field(b"delta")
# EventEncoder's own shape of the three delta events, read without a parse (per token). It matches only
# what the full read also merges, with the same key (the id field is checked against the type).
_FAST: Final = re.compile(
    rb'data: ?\{"type":"(TEXT_MESSAGE_CONTENT|REASONING_MESSAGE_CONTENT|TOOL_CALL_ARGS)"'
    rb'(?:,"timestamp":-?\d+)?,"(messageId|toolCallId)":"([^"\\\r\n]*)","delta":"((?:[^"\\\r\n]|\\.)*)"\}\n\n'
)
_ID_FIELD: Final = {b"TEXT_MESSAGE_CONTENT": b"messageId", b"REASONING_MESSAGE_CONTENT": b"messageId"}
_TOOL_STARTS: Final = ("TOOL_CALL_START", "TOOL_CALL_CHUNK")
_RUN: Final = b'"RUN_'


def _is_run_start(obj: dict[str, Any]) -> bool:
    if obj.get("type") == "RUN_STARTED":
        return isinstance(obj.get("threadId"), str) and isinstance(obj.get("runId"), str)
    return obj.get("type") == "RUN_ERROR" and isinstance(obj.get("message"), str)


def _event(raw: bytes) -> tuple[str, dict[str, Any]] | None:
    """(type, object) of an unnamed AG-UI event, read apart from any stream (for the check)."""
    obj = data_object(raw) if b'"type"' in raw else None
    kind = obj.get("type") if obj is not None else None
    return (kind, obj) if obj is not None and isinstance(kind, str) else None


class RunErrorEnding(Ending):
    """``RUN_ERROR`` with ``code: "content_filter"`` and the guard's message (with the error id)."""

    def frame(self, info: ErrorInfo, keys: Iterable[Hashable]) -> bytes | None:
        return run_error(info, CONTENT_FILTER)


def run_error(info: ErrorInfo, code: str) -> bytes:
    return data_error(info, {"type": "RUN_ERROR", "message": with_id(info), "code": code})


class AGUI(Spliced):
    """AG-UI events; see the module's docstring for what merges."""

    name = "ag-ui"
    provider = "ag-ui"
    operation = "chat"
    ending = RunErrorEnding
    end_marker = "a RUN_FINISHED event"
    recovery = None
    """Not built: a re-run would have to carry the run's and its messages' ids, and its snapshots, onto
    the client's."""

    def __init__(self) -> None:
        super().__init__()
        self._names: dict[str, str] = {}  # toolCallId -> the tool's name (TOOL_CALL_START, a chunk)
        self._open: dict[str, str] = {}  # chunk type -> the id its last chunk with one named

    @classmethod
    def detect(cls, first: First) -> Dialect | None:
        obj = first.obj if first.name is None and b'"RUN_' in first.data else None
        return cls() if isinstance(obj, dict) and _is_run_start(obj) else None

    @classmethod
    def is_end(cls, raw: bytes) -> bool:
        found = _event(raw) if b"RUN_FINISHED" in raw else None
        return found is not None and found[0] == "RUN_FINISHED"

    @classmethod
    def owed_end(cls, raw: bytes) -> bool:
        found = _event(raw) if _RUN in raw else None
        return found is not None and _is_run_start(found[1]) and found[0] == "RUN_STARTED"

    @classmethod
    def reported_error(cls, raw: bytes) -> str | None:
        found = _event(raw) if b"RUN_ERROR" in raw else None
        if found is None or found[0] != "RUN_ERROR" or not isinstance(found[1].get("message"), str):
            return None
        return str(found[1]["message"])

    def part(self, key: Hashable) -> Part:
        if not isinstance(key, tuple):
            return TEXT
        part = _MERGED[key[0]][1]
        if part.kind == "tool_arguments":
            return Part("tool_arguments", self._names.get(key[1]) if isinstance(key[1], str) else None)
        return part

    def see(self, raw: bytes) -> None:
        obj = self.data_object(raw) if b"TOOL_CALL_" in raw else None
        if obj is not None and obj.get("type") in _TOOL_STARTS:
            self._learn_name(obj)

    def _learn_name(self, obj: dict[str, Any]) -> None:
        ident, name = obj.get("toolCallId"), obj.get("toolCallName")
        if isinstance(ident, str) and isinstance(name, str):
            self._names[ident] = name

    def read(self, raw: bytes) -> Delta | None:
        fast = _FAST.fullmatch(raw)
        if fast is not None and _ID_FIELD.get(fast.group(1), b"toolCallId") == fast.group(2):
            text = unescape(fast.group(4))
            if text:
                return Delta((fast.group(1).decode(), fast.group(3).decode(), None), _around(fast), text)
        return self.full_read(raw)

    def full_read(self, raw: bytes) -> Delta | None:
        """:meth:`read` by a parse of the event (what the fast pattern must agree with)."""
        obj = self.data_object(raw)
        kind = obj.get("type") if obj is not None else None
        spec = _MERGED.get(kind) if isinstance(kind, str) else None
        if obj is None or spec is None or not isinstance(kind, str):
            return None
        field, _part, optional = spec
        ident = obj.get(field)
        if kind == "TOOL_CALL_CHUNK":
            self._learn_name(obj)  # an opening chunk names its call, and goes out as it is
        if optional and isinstance(ident, str):
            self._continued(kind, ident)
        text, subagent = obj.get("delta"), obj.get("subagentRunId")
        if not isinstance(text, str) or not obj.keys() <= _ALLOWED[kind]:
            return None  # rawEvent, metadata, a name or role, or a field this reader does not know
        if not (isinstance(ident, str) or (ident is None and optional)) or not _scalar(subagent):
            return None
        if ident is None:
            ident = self._open.get(kind)
        envelope = splice(_DELTA, raw)
        return None if envelope is None else Delta((kind, ident, subagent), envelope, text)

    def _continued(self, kind: str, ident: str) -> None:
        """``ident`` is the chunk an id-less one of type ``kind`` continues from now on."""
        if self._open.get(kind) != ident:
            self._open[kind] = ident
            self._last = None  # an id-less chunk's envelope names no id: it must not answer for this one

    def part_key(self, key: Hashable) -> Hashable:
        # The client adds a chunk's text and a CONTENT event's to the same message, by its id.
        return (_MERGED[key[0]][1].kind, key[1]) if isinstance(key, tuple) else key

    def texts(self, raw: bytes) -> list[tuple[Hashable, str]]:
        obj = self.event_json(raw) if b'"delta"' in raw else None
        kind = obj.get("type") if isinstance(obj, dict) else None
        spec = _MERGED.get(kind) if isinstance(kind, str) else None
        if not isinstance(obj, dict) or spec is None or not isinstance(kind, str):
            return []
        if kind == "TOOL_CALL_CHUNK":
            self._learn_name(obj)
        ident, text = obj.get(spec[0]), obj.get("delta")
        if isinstance(ident, str) and spec[2]:
            self._continued(kind, ident)
        elif not isinstance(ident, str):
            ident = self._open.get(kind) if spec[2] else None
        if not isinstance(text, str) or not text:
            return []
        subagent = obj.get("subagentRunId")
        return [((kind, ident, subagent if _scalar(subagent) else None), text)]

    def content(self, raw: bytes) -> bool:
        # A text, reasoning or arguments delta that is not empty (STATE_DELTA's is a JSON Patch list).
        at = raw.find(b'"delta":"')
        return at >= 0 and raw[at + 9 : at + 10] != b'"' and raw.find(b'"type":"STATE_', 0, 64) < 0

    def info(self, raw: bytes) -> dict[str, Any] | None:
        obj = self.event_json(raw)
        kind = obj.get("type") if isinstance(obj, dict) else None
        if not isinstance(obj, dict) or kind not in ("RUN_STARTED", "RUN_FINISHED", "RUN_ERROR"):
            return None
        if kind == "RUN_STARTED":
            run = obj.get("runId")
            return {"response_id": run} if isinstance(run, str) else None
        if kind == "RUN_ERROR":
            code = obj.get("code")
            return {"finish_reason": "error", "error_type": code if isinstance(code, str) else "run_error"}
        outcome = obj.get("outcome")
        reason = outcome.get("type") if isinstance(outcome, dict) else None
        return {"finish_reason": reason if isinstance(reason, str) else "success", **_usage(obj.get("usage"))}

    def wants_info(self, raw: bytes) -> bool:
        return raw.find(_RUN, 0, 64) >= 0

    def error_event(self, info: ErrorInfo) -> bytes:
        return run_error(info, info.code or info.type)


def _around(match: re.Match[bytes]) -> tuple[bytes, bytes]:
    raw = match.string
    return raw[: match.start(4)], raw[match.end(4) :]


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, str)


def _usage(usage: object) -> dict[str, Any]:
    """Input and output tokens summed over a run's usage entries (one per provider and model), and the
    model when the run used one."""
    entries = [u for u in usage if isinstance(u, dict)] if isinstance(usage, list) else []
    if not entries:
        return {}
    out: dict[str, Any] = {}
    for key, name in (("inputTokens", "input_tokens"), ("outputTokens", "output_tokens")):
        counts = [u[key] for u in entries if isinstance(u.get(key), int)]
        if counts:
            out[name] = sum(counts)
    models = {u.get("model") for u in entries}
    if len(models) == 1 and isinstance(next(iter(models)), str):
        out["model"] = next(iter(models))
    return out
