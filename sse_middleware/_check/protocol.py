"""What the check knows of stream formats: which events carry content, which end a stream cleanly, which
report an error.

Everything here is asked of the middleware's dialect classes (``dialects.FORMATS``): a format's end
marker, the events that show a stream owes it, and the shape of its own error event are class attributes
and class methods beside its reader, so a new format is known here without a line of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from .._core.dialects import END_MARKERS, FORMATS, detect
from .._core.sse import Event, encode

__all__ = ["END_MARKERS", "content_reader", "error_message", "is_end", "is_heartbeat", "protocol"]

_OWING: Final = tuple(cls for cls in FORMATS if cls.end_marker is not None)


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


def protocol(dialect: str, event: Event) -> str | None:
    """The protocol whose end marker this stream owes, once an event shows it; None for generic SSE."""
    if dialect in END_MARKERS:
        return dialect
    raw = encode(event)
    return next((cls.name for cls in _OWING if cls.owed_end(raw)), None)


def is_end(event: Event) -> bool:
    raw = encode(event)
    return any(cls.is_end(raw) for cls in _OWING)


def is_heartbeat(event: Event) -> bool:
    """An event that only keeps the connection alive (Anthropic's ``event: ping``); comments are too."""
    return event.event == "ping"


def error_message(event: Event) -> str | None:
    """The message of an error event in any of the formats' own shapes; None otherwise."""
    raw = encode(event)
    for cls in FORMATS:
        found = cls.reported_error(raw)
        if found is not None:
            return found
    return None
