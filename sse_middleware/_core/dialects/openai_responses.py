"""OpenAI Responses API events: output text, reasoning text and summaries, function-call arguments.

Merged: ``response.output_text.delta``, ``response.reasoning_text.delta``,
``response.reasoning_summary_text.delta`` and ``response.function_call_arguments.delta`` events, each
keyed by its event name and the indexes that place it (item, output index, content or summary index),
when they hold no logprobs and no field this reader does not know. The first event's
``sequence_number`` stays with the merged text.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Final

from ..errors import ErrorInfo
from ..wire import (
    REASONING,
    TEXT,
    Delta,
    Part,
    loads,
    simple,
    splice,
    string_field,
    token_counts,
    with_id,
)
from .base import Dialect, data_error

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


class OpenAIResponses(Dialect):
    """Responses API events; see the module's docstring for what merges."""

    name = "openai-responses"
    provider = "openai"
    operation = "responses"
    merges = True

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
