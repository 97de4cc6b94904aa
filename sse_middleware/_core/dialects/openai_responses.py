"""OpenAI Responses API events: output text, reasoning text and summaries, function-call arguments.

Merged: ``response.output_text.delta``, ``response.reasoning_text.delta``,
``response.reasoning_summary_text.delta`` and ``response.function_call_arguments.delta`` events, each
keyed by its event name and the indexes that place it (item, output index, content or summary index),
when they hold no logprobs and no field this reader does not know. The first event's
``sequence_number`` stays with the merged text. A delta event that does not merge still adds its text to
its part for guards and the output check (:meth:`OpenAIResponses.texts`). The ``done`` events and
``response.completed`` repeat the text the deltas streamed: they are not read as text again.

Recognized by a first event named ``response.*``; it ends with ``response.completed`` (or
``response.incomplete``). A guard's trip sends ``response.incomplete`` with ``incomplete_details.reason:
"content_filter"``.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable
from typing import Any, Final

from ..errors import ErrorInfo
from ..sse import Event, encode
from ..wire import (
    REASONING,
    TEXT,
    Delta,
    Part,
    dumps,
    loads,
    name_and_data,
    simple,
    splice,
    string_field,
    token_counts,
    with_id,
)
from .base import Dialect, First, named_error
from .endings import CONTENT_FILTER, Ending, Reads, data_error, detail
from .recovery.openai_responses import ResponsesTranscript

_PLACES: Final = {
    b"response.output_text.delta": ("item_id", "output_index", "content_index"),
    b"response.reasoning_text.delta": ("item_id", "output_index", "content_index"),
    b"response.reasoning_summary_text.delta": ("item_id", "output_index", "summary_index"),
    b"response.function_call_arguments.delta": ("item_id", "output_index"),
}
_KINDS: Final = {
    b"response.output_text.delta": TEXT,
    b"response.reasoning_text.delta": REASONING,
    b"response.reasoning_summary_text.delta": REASONING,
}
_COMMON: Final = frozenset(("type", "delta", "sequence_number", "logprobs", "obfuscation"))
_DELTA: Final = string_field(b"delta")
_ENDS: Final = (
    b"event: response.created",
    b"event: response.completed",
    b"event: response.incomplete",
    b"event: response.failed",
)

_SEQUENCE: Final = re.compile(rb'"sequence_number":\s*(\d+)')
_CLEAN_ENDS: Final = frozenset(("response.completed", "response.incomplete"))


class ResponsesEnding(Ending):
    """``response.incomplete`` with ``incomplete_details.reason: "content_filter"``, numbered after the
    last event's ``sequence_number``, in the response object the stream created."""

    def __init__(self, dialect: Reads) -> None:
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
        response[CONTENT_FILTER] = detail(info)
        body = {"type": "response.incomplete", "sequence_number": self._sequence + 1, "response": response}
        return encode(Event(dumps(body), "response.incomplete"))


class OpenAIResponses(Dialect):
    """Responses API events; see the module's docstring for what merges."""

    name = "openai-responses"
    provider = "openai"
    operation = "responses"
    merges = True
    ending = ResponsesEnding
    end_marker = "event: response.completed"
    recovery = ResponsesTranscript

    @classmethod
    def detect(cls, first: First) -> Dialect | None:
        name = first.name
        return cls() if name is not None and name.startswith("response.") else None

    @classmethod
    def is_end(cls, raw: bytes) -> bool:
        return name_and_data(raw)[0] in _CLEAN_ENDS

    @classmethod
    def reported_error(cls, raw: bytes) -> str | None:
        return named_error(raw, "response.failed")

    def __init__(self) -> None:
        super().__init__()
        self._names: dict[object, str] = {}  # function_call item id -> the function's name

    def part(self, key: Hashable) -> Part:
        if not isinstance(key, tuple):
            return TEXT
        if key[0] == b"response.function_call_arguments.delta":
            return Part("tool_arguments", self._names.get(key[1]))
        return _KINDS.get(key[0], TEXT)

    def see(self, raw: bytes) -> None:
        event = simple(raw)
        if event is None or event[0] not in (b"response.output_item.added", b"response.output_item.done"):
            return
        obj = self.parse(raw, event[1])
        item = obj.get("item") if isinstance(obj, dict) else None
        if (
            isinstance(item, dict)
            and item.get("type") == "function_call"
            and isinstance(item.get("name"), str)
        ):
            self._names[item.get("id")] = item["name"]

    def part_key(self, key: Hashable) -> Hashable:
        # The SDK places a delta by its output index (and content or summary index), not its item id.
        if isinstance(key, tuple) and len(key) > 2 and key[2] is not None:
            return (key[0], *key[2:])
        return key

    def texts(self, raw: bytes) -> list[tuple[Hashable, str]]:
        name, data = name_and_data(raw)
        places = _PLACES.get(name.encode()) if name is not None else None
        obj = self.parse(raw, data) if places is not None else None
        if places is None or not isinstance(obj, dict) or not isinstance(obj.get("delta"), str):
            return []
        where = [v if isinstance(v, (str, int)) else None for v in (obj.get(p) for p in places)]
        return [((name.encode(), *where), obj["delta"])] if obj["delta"] and name is not None else []

    def delta(self, raw: bytes) -> Delta | None:
        event = simple(raw)
        places = _PLACES.get(event[0]) if event is not None and event[0] is not None else None
        if places is None or event is None:
            return None
        # Per token, and nothing asks about a delta event after this: only a parse made before (the first
        # event's info) is looked for, and nothing is kept.
        obj = self._parsed if raw is self._parsed_raw else loads(event[1])
        if not isinstance(obj, dict) or not isinstance(obj.get("delta"), str) or obj.get("logprobs"):
            return None
        if not obj.keys() <= _COMMON.union(places):
            return None
        where = [obj.get(name) for name in places]
        if not all(v is None or isinstance(v, (str, int)) for v in where):
            return None
        key = (event[0], *where)
        envelope = splice(_DELTA, raw)
        return None if envelope is None else Delta(key, envelope, obj["delta"])

    def content(self, raw: bytes) -> bool:
        return b".delta" in raw[:80]

    def info(self, raw: bytes) -> dict[str, Any] | None:
        obj = self.event_json(raw, objects_only=False)
        response = obj.get("response") if isinstance(obj, dict) else None
        if not isinstance(response, dict):
            return None
        out: dict[str, Any] = {"model": response.get("model"), "response_id": response.get("id")}
        if response.get("status") in ("completed", "incomplete", "failed"):
            out["finish_reason"] = response["status"]
        out.update(token_counts(response.get("usage"), "input_tokens", "output_tokens"))
        return out

    def wants_info(self, raw: bytes) -> bool:
        return raw.startswith(_ENDS)

    def error_event(self, info: ErrorInfo) -> bytes:
        body = {
            "type": "error",
            "code": info.code or info.type,
            "message": with_id(info),
            "param": None,
            "sequence_number": 0,
        }
        return data_error(info, body, "error")
