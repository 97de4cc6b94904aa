"""The Vercel AI SDK's UI message stream, protocol v1: what a backend for ``useChat`` sends.

Each part is one ``data:`` event holding a JSON object with a ``type``; the stream ends with
``data: [DONE]``. Merged: ``text-delta`` and ``reasoning-delta`` parts per ``id``, and ``tool-input-delta``
parts per ``toolCallId``, when the part has exactly its type, its id and its text (a part with
``providerMetadata`` goes out as it is, its text still read for guards and the output check). A failure
is the protocol's own error part, ``{"type": "error", "errorText": ...}``, which the SDK's reader hands
to ``onError``.

Recognized by the header its ``createUIMessageStreamResponse`` sets (``x-vercel-ai-ui-message-stream:
v1``) or by a first event that is exactly the ``start`` part; it ends with a ``finish`` part (then
``[DONE]``). A guard's trip ends the open parts and the step, then ``finish`` with ``finishReason:
"content-filter"``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any, Final

from ..errors import ErrorInfo
from ..sse import Event, encode
from ..wire import (
    REASONING,
    TEXT,
    Delta,
    Part,
    data_object,
    dumps,
    is_done,
    splice,
    string_field,
    with_id,
)
from .base import Dialect, First, Spliced
from .endings import CONTENT_FILTER, Ending, Reads, data_error, detail
from .recovery.ai_sdk import UITranscript

_PARTS: Final = {
    "text-delta": ("id", "delta"),
    "reasoning-delta": ("id", "delta"),
    "tool-input-delta": ("toolCallId", "inputTextDelta"),
}
_FIELDS: Final = {"delta": string_field(b"delta"), "inputTextDelta": string_field(b"inputTextDelta")}
_START_KEYS: Final = frozenset(("type", "messageId", "messageMetadata"))
# The opening parts: a stream that shows one owes its finish part.
_OPENING: Final = frozenset(
    ("start", "start-step", "text-start", "text-delta", "reasoning-start", "reasoning-delta")
)


def is_start(obj: dict[str, Any]) -> bool:
    """Whether a stream's first JSON object is this protocol's ``start`` part, and nothing else."""
    return obj.get("type") == "start" and obj.keys() <= _START_KEYS


class UIMessageEnding(Ending):
    """The open text and reasoning parts ended, the open step finished, then the ``finish`` part with
    the schema's own ``finishReason: "content-filter"`` (its chunk objects are loose: the detail rides
    along), and ``[DONE]``."""

    def __init__(self, dialect: Reads) -> None:
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
        parts.append({"type": "finish", "finishReason": "content-filter", CONTENT_FILTER: detail(info)})
        return b"".join(encode(Event(dumps(part))) for part in parts) + b"data: [DONE]\n\n"


class AISDK(Spliced):
    """UI message stream parts; see the module's docstring for what merges."""

    name = "ai-sdk"
    provider = "ai-sdk"
    operation = "chat"
    ending = UIMessageEnding
    end_marker = 'a {"type":"finish"} part'
    recovery = UITranscript
    chat_resume = True
    hint = (b"x-vercel-ai-ui-message-stream", b"v1")

    @classmethod
    def detect(cls, first: First) -> Dialect | None:
        obj = first.obj if first.name is None else None
        return cls() if isinstance(obj, dict) and is_start(obj) else None

    @classmethod
    def is_end(cls, raw: bytes) -> bool:
        if is_done(raw):
            return True
        obj = data_object(raw) if b'"finish"' in raw else None
        return obj is not None and obj.get("type") == "finish"

    @classmethod
    def owed_end(cls, raw: bytes) -> bool:
        obj = data_object(raw)
        return obj is not None and obj.get("type") in _OPENING

    @classmethod
    def reported_error(cls, raw: bytes) -> str | None:
        obj = data_object(raw) if b"errorText" in raw else None
        if obj is not None and obj.get("type") == "error" and isinstance(obj.get("errorText"), str):
            return str(obj["errorText"])
        return None

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

    def texts(self, raw: bytes) -> list[tuple[Hashable, str]]:
        obj = self.event_json(raw)
        kind = obj.get("type") if isinstance(obj, dict) else None
        spec = _PARTS.get(kind) if isinstance(kind, str) else None
        if not isinstance(obj, dict) or spec is None:
            return []
        ident, text = obj.get(spec[0]), obj.get(spec[1])
        if not isinstance(text, str) or not text:
            return []
        return [((kind, ident if isinstance(ident, str) else None), text)]

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
