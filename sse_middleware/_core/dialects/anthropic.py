"""Anthropic Messages events: ``content_block_delta`` text, thinking and tool-input JSON, per block.

Merged: a ``content_block_delta`` whose delta is exactly ``{"type", <its one string field>}`` of type
``text_delta``, ``thinking_delta`` or ``input_json_delta``, keyed by (block index, delta type); the
``event:`` line is kept. A ``signature_delta``, a citation or anything else goes out as it is. Text a
delta that does not merge carries, and text a ``content_block_start`` already holds, are read for guards
and the output check as the block's (:meth:`Anthropic.texts`).

Recognized by a first event named ``message_start``, ``content_block_*`` or ``ping``; it ends with
``event: message_stop``. A guard's trip closes the open blocks, then ``message_delta`` with
``stop_reason: "refusal"`` (in the SDK's ``StopReason``) and ``message_stop``.
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
    name_and_data,
    splice,
    string_field,
    with_id,
)
from .base import Dialect, First, Spliced, matched
from .endings import CONTENT_FILTER, Ending, Reads, data_error, detail
from .recovery.anthropic import AnthropicTranscript

_FAST: Final = re.compile(
    rb'event: ?content_block_delta\ndata: ?\{"type":"content_block_delta","index":(\d+),'
    rb'"delta":\{"type":"(text|thinking)_delta","\2":"((?:[^"\\\r\n]|\\.)*)"\}\}\n\n'
)
_FIELDS: Final = {
    "text_delta": ("text", string_field(b"text")),
    "thinking_delta": ("thinking", string_field(b"thinking")),
    "input_json_delta": ("partial_json", string_field(b"partial_json")),
}
_PARTS: Final = {"text_delta": TEXT, "thinking_delta": REASONING}
_ERRORS: Final = {
    "internal_error": "api_error",
    "timeout": "timeout_error",
    "server_shutdown": "overloaded_error",
}

_TEXT_EVENTS: Final = ("content_block_start", "content_block_delta")
_FIRST: Final = frozenset(("message_start", "content_block_start", "content_block_delta", "ping"))


class AnthropicEnding(Ending):
    """The open content blocks closed, then ``message_delta`` with ``stop_reason: "refusal"`` and
    ``message_stop``."""

    def __init__(self, dialect: Reads) -> None:
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
            CONTENT_FILTER: detail(info),
        }
        out.append(encode(Event(dumps(delta), "message_delta")))
        out.append(encode(Event(dumps({"type": "message_stop"}), "message_stop")))
        return b"".join(out)


class Anthropic(Spliced):
    """Messages API events; see the module's docstring for what merges."""

    name = "anthropic"
    provider = "anthropic"
    operation = "chat"
    ending = AnthropicEnding
    end_marker = "event: message_stop"
    recovery = AnthropicTranscript

    @classmethod
    def detect(cls, first: First) -> Dialect | None:
        return cls() if first.name in _FIRST else None

    @classmethod
    def is_end(cls, raw: bytes) -> bool:
        return name_and_data(raw)[0] == "message_stop"

    def __init__(self) -> None:
        super().__init__()
        self._names: dict[int, str] = {}  # block index -> the tool a tool_use block calls

    def part(self, key: Hashable) -> Part:
        if isinstance(key, tuple) and key[1] == "input_json_delta":
            return Part("tool_arguments", self._names.get(key[0]))
        return _PARTS.get(key[1], TEXT) if isinstance(key, tuple) else TEXT

    def see(self, raw: bytes) -> None:
        obj = self.data_object(raw, b"content_block_start")
        block = obj.get("content_block") if obj is not None else None
        if obj is not None and isinstance(block, dict) and isinstance(obj.get("index"), int):
            name = block.get("name")
            if isinstance(name, str):
                self._names[obj["index"]] = name

    def texts(self, raw: bytes) -> list[tuple[Hashable, str]]:
        name, data = name_and_data(raw)
        obj = self.parse(raw, data) if name in _TEXT_EVENTS and data[:1] == b"{" else None
        index = obj.get("index") if isinstance(obj, dict) else None
        if not isinstance(obj, dict) or not isinstance(index, int):
            return []
        if name == "content_block_start":
            block = obj.get("content_block")
            kind = f"{block.get('type')}_delta" if isinstance(block, dict) else None
        else:
            block = obj.get("delta")
            kind = block.get("type") if isinstance(block, dict) else None
        field = _FIELDS[kind][0] if isinstance(kind, str) and kind in _FIELDS else None
        text = block.get(field) if isinstance(block, dict) and field is not None else None
        return [((index, kind), text)] if isinstance(text, str) and text else []

    def read(self, raw: bytes) -> Delta | None:
        fast = _FAST.fullmatch(raw)
        if fast is not None:
            found = matched(fast, (int(fast.group(1)), fast.group(2).decode() + "_delta"))
            if found is not None:
                return found
        obj = self.data_object(raw, b"content_block_delta")
        delta = obj.get("delta") if obj is not None else None
        if obj is None or not isinstance(delta, dict) or len(delta) != 2:
            return None
        kind, index = delta.get("type"), obj.get("index")
        if not isinstance(kind, str) or kind not in _FIELDS or not isinstance(index, int):
            return None
        field, pattern = _FIELDS[kind]
        text = delta.get(field)
        envelope = splice(pattern, raw) if isinstance(text, str) else None
        if envelope is None or not isinstance(text, str):
            return None
        return Delta((index, kind), envelope, text)

    def content(self, raw: bytes) -> bool:
        return raw.startswith(b"event: content_block_delta")

    def info(self, raw: bytes) -> dict[str, Any] | None:
        obj = self.event_json(raw, objects_only=False)
        if not isinstance(obj, dict):
            return None
        out: dict[str, Any] = {}
        message = obj.get("message")
        if isinstance(message, dict):
            out.update(model=message.get("model"), response_id=message.get("id"))
            usage = message.get("usage") or {}
            out["input_tokens"] = usage.get("input_tokens")
        delta = obj.get("delta")
        if isinstance(delta, dict) and delta.get("stop_reason"):
            out["finish_reason"] = delta["stop_reason"]
        usage = obj.get("usage")
        if isinstance(usage, dict) and usage.get("output_tokens") is not None:
            out["output_tokens"] = usage["output_tokens"]
        return out or None

    def wants_info(self, raw: bytes) -> bool:
        return raw.startswith((b"event: message_start", b"event: message_delta"))

    def error_event(self, info: ErrorInfo) -> bytes:
        error: dict[str, Any] = {"type": _ERRORS.get(info.type, info.type), "message": with_id(info)}
        if info.code is not None:
            error["code"] = info.code  # an extra field the SDK keeps on the error's body
        return data_error(info, {"type": "error", "error": error}, "error")
