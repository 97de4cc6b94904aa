"""Which dialect reads a stream: named by the settings, hinted by a response header, or detected from the
stream's first event with data. The rules are the README's table of formats; in short:

1. ``dialect`` set to anything but ``auto`` wins. text/plain is :class:`PlainText`; NDJSON and streams the
   app compressed are :class:`Opaque`.
2. A response header a format names as its own (``Dialect.hint``: ``x-vercel-ai-ui-message-stream: v1``
   is the AI SDK's UI message stream) decides.
3. Otherwise the first event with data decides (comments and ``retry`` lines decide nothing): each format
   of :data:`~.registry.DETECTION`, in order, is asked whether the event proves it (``Dialect.detect``;
   each format's module says what it looks for); generic SSE, forwarded byte for byte, answers last.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import headers
from ..config import CoreConfig
from ..wire import loads, name_and_data
from .base import Dialect, First, Generic, Opaque, Undetected
from .registry import BY_NAME, DETECTION, DialectName, hinted
from .relay import RouteRelay
from .text import PlainText

__all__ = ["BY_NAME", "DialectName", "detect", "initial"]


def initial(kind: str, config: CoreConfig, response_headers: Iterable[tuple[bytes, bytes]] = ()) -> Dialect:
    """The dialect a stream starts with: final, or :class:`Undetected` until its first event with data."""
    if kind == headers.TEXT:
        return PlainText()
    if kind != headers.SSE:
        return Opaque()
    name = config.dialect
    if name != "auto":
        return BY_NAME[name].named(config.json_text_field)
    hint = hinted(response_headers)
    return hint() if hint is not None else Undetected()


def _parse(data: bytes) -> Any:
    return loads(data)  # looked up here at each call: detection's parses are this module's


def detect(raw: bytes, route: RouteRelay | None = None) -> Dialect | None:
    """The dialect of a stream from one raw event, its first with data; None for an event without data.
    ``route``: the route's relay memory, when a relay may be learned or merged (coalescing on)."""
    name, data = name_and_data(raw)
    if not data and name is None:
        return None
    first = First(raw, name, data, _parse, route)
    found: Dialect = Generic()
    for cls in DETECTION:
        answer = cls.detect(first)
        if answer is not None:
            found = answer
            break
    if first.parsed and not isinstance(found, Generic):  # generic SSE keeps nothing for the stream's life
        found.keep(raw, first.obj)  # the dialect reads this event next (its info, its delta): one parse
    return found
