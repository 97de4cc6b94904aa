"""What the check knows of stream formats: which events carry content, which end a stream cleanly, which
report an error.

:func:`content_reader` is the only code here that touches the middleware's dialects (today
``dialects.detect`` and ``Dialect.content``); when their API changes, it is the one function to adapt.
The end markers and error shapes are the protocols' own wire facts; the middleware never needs them, so
they live here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from .._core.dialects import detect
from .._core.sse import Event, encode

# Each protocol's clean end, as the report names it. A generic SSE stream has none, so none is expected.
END_MARKERS: Final = {
    "openai": "data: [DONE]",
    "anthropic": "event: message_stop",
    "openai-responses": "event: response.completed",
    "ai-sdk": 'a {"type":"finish"} part',
}
# The Vercel AI SDK UI message stream's opening parts: seeing one means its finish part is due.
_AI_SDK_PARTS: Final = frozenset(
    ("start", "start-step", "text-start", "text-delta", "reasoning-start", "reasoning-delta")
)
_ENDING_EVENTS: Final = frozenset(("message_stop", "response.completed", "response.incomplete"))


def content_reader() -> Callable[[Event], tuple[str, bool]]:
    """A per-stream function: event -> (the middleware's dialect name, whether the event carries output).

    The dialect is detected from the first event with data and kept, as the middleware does.
    """
    dialect: Any = None

    def read(event: Event) -> tuple[str, bool]:
        nonlocal dialect
        raw = encode(event)
        if dialect is None:
            dialect = detect(raw)
            if dialect is None:
                return "", False
        return str(dialect.name), bool(dialect.content(raw))

    return read


def _json(data: str) -> Any:
    if not data.startswith("{"):
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def protocol(dialect: str, event: Event) -> str | None:
    """The protocol whose end marker this stream owes, once an event shows it; None for generic SSE."""
    if dialect in END_MARKERS:
        return dialect
    obj = _json(event.data) if event.event is None else None
    if isinstance(obj, dict) and obj.get("type") in _AI_SDK_PARTS:
        return "ai-sdk"
    return None


def is_end(event: Event) -> bool:
    if event.event in _ENDING_EVENTS or (event.event is None and event.data == "[DONE]"):
        return True
    obj = _json(event.data) if event.event is None else None
    return isinstance(obj, dict) and obj.get("type") == "finish"


def is_heartbeat(event: Event) -> bool:
    """An event that only keeps the connection alive (Anthropic's ``event: ping``); comments are too."""
    return event.event == "ping"


def error_message(event: Event) -> str | None:
    """The message of an error event in any of the formats' shapes (see DESIGN.md); None otherwise."""
    obj = _json(event.data)
    if event.event in ("error", "response.failed"):
        return _message(obj) or event.data[:200] or event.event
    if event.event is None and isinstance(obj, dict):
        if obj.get("type") == "error" and isinstance(obj.get("errorText"), str):  # the AI SDK's part
            return str(obj["errorText"])
        if isinstance(obj.get("error"), (dict, str)):  # OpenAI chat
            return _message(obj) or event.data[:200]
    return None


def _message(obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return None
    response = obj.get("response")  # the Responses API's response.failed
    for holder in (obj.get("error"), response.get("error") if isinstance(response, dict) else None, obj):
        if isinstance(holder, str):
            return holder
        if isinstance(holder, dict) and isinstance(holder.get("message"), str):
            return str(holder["message"])
    return None
