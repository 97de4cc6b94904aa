"""The Vercel AI SDK's UI message stream, protocol v1: what a backend for ``useChat`` sends.

Each part is one ``data:`` event holding a JSON object with a ``type``; the stream ends with
``data: [DONE]``. Merged: ``text-delta`` and ``reasoning-delta`` parts per ``id``, and ``tool-input-delta``
parts per ``toolCallId``, when the part has exactly its type, its id and its text (a part with
``providerMetadata`` goes out as it is). A failure is the protocol's own error part,
``{"type": "error", "errorText": ...}``, which the SDK's reader hands to ``onError``.
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
    splice,
    string_field,
    with_id,
)
from .base import Spliced, data_error

_PARTS: Final = {
    "text-delta": ("id", "delta"),
    "reasoning-delta": ("id", "delta"),
    "tool-input-delta": ("toolCallId", "inputTextDelta"),
}
_FIELDS: Final = {"delta": string_field(b"delta"), "inputTextDelta": string_field(b"inputTextDelta")}
_START_KEYS: Final = frozenset(("type", "messageId", "messageMetadata"))


def is_start(obj: dict[str, Any]) -> bool:
    """Whether a stream's first JSON object is this protocol's ``start`` part, and nothing else."""
    return obj.get("type") == "start" and obj.keys() <= _START_KEYS


class AISDK(Spliced):
    """UI message stream parts; see the module's docstring for what merges."""

    name = "ai-sdk"
    provider = "ai-sdk"
    operation = "chat"

    def __init__(self) -> None:
        super().__init__()
        self._names: dict[str, str] = {}  # toolCallId -> toolName

    def part(self, key: Hashable) -> Part:
        if not isinstance(key, tuple):
            return TEXT
        if key[0] == "tool-input-delta":
            return Part("tool_arguments", self._names.get(key[1]))
        return REASONING if key[0] == "reasoning-delta" else TEXT

    def see(self, raw: bytes) -> None:
        obj = self.data_object(raw)
        if obj is not None and obj.get("type") == "tool-input-start":
            ident, name = obj.get("toolCallId"), obj.get("toolName")
            if isinstance(ident, str) and isinstance(name, str):
                self._names[ident] = name

    def read(self, raw: bytes) -> Delta | None:
        obj = self.data_object(raw)
        kind = obj.get("type") if obj is not None else None
        spec = _PARTS.get(kind) if isinstance(kind, str) else None
        if obj is None or spec is None or len(obj) != 3:
            return None
        ident, text = obj.get(spec[0]), obj.get(spec[1])
        envelope = splice(_FIELDS[spec[1]], raw) if isinstance(text, str) else None
        if envelope is None or not isinstance(ident, str) or not isinstance(text, str):
            return None
        return Delta((kind, ident), envelope, text)

    def content(self, raw: bytes) -> bool:
        return raw.find(b'-delta"') >= 0

    def info(self, raw: bytes) -> dict[str, Any] | None:
        obj = self.event_json(raw)
        if not isinstance(obj, dict):
            return None
        if obj.get("type") == "start" and isinstance(obj.get("messageId"), str):
            return {"response_id": obj["messageId"]}
        if obj.get("type") == "finish" and isinstance(obj.get("finishReason"), str):
            return {"finish_reason": obj["finishReason"]}
        return None

    def wants_info(self, raw: bytes) -> bool:
        return raw.find(b'"start"') >= 0 or raw.find(b'"finish"') >= 0

    def error_event(self, info: ErrorInfo) -> bytes:
        return data_error(info, {"type": "error", "errorText": with_id(info)})
