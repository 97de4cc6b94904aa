"""Which dialect reads a stream: named by the settings, hinted by a response header, or detected from the
stream's first event with data. The rules are the README's table of formats; in short:

1. ``dialect`` set to anything but ``auto`` wins. text/plain is :class:`PlainText`; NDJSON and streams the
   app compressed are :class:`Opaque`.
2. A response header ``x-vercel-ai-ui-message-stream: v1`` is the AI SDK's UI message stream.
3. Otherwise the first event with data decides (comments and ``retry`` lines decide nothing):
   named ``response.*``: OpenAI Responses; named ``message_start``, ``content_block_*`` or ``ping``:
   Anthropic; any other name: generic. Unnamed, with data that is a JSON object: ``"object":
   "chat.completion.chunk"``, or ``choices`` a non-empty list of objects that each hold a ``delta``
   object: OpenAI chat; exactly ``{"type": "start"}`` (optionally ``messageId``, ``messageMetadata``): the
   AI SDK; one string field among the relay candidates: a JSON relay, merged only on a route already
   proven (see :mod:`.relay`). Anything else is generic SSE, forwarded byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal

from .. import headers
from ..config import CoreConfig
from ..wire import loads, name_and_data
from .ai_sdk import AISDK, is_start
from .anthropic import Anthropic
from .base import Dialect, Generic, Opaque, PlainText, Text, Undetected
from .openai_chat import OpenAIChat, for_chunk
from .openai_responses import OpenAIResponses
from .relay import JsonRelay, RouteRelay, first_event

DialectName = Literal["auto", "json", "sse", "openai", "openai-responses", "anthropic", "text", "ai-sdk"]
"""What the ``dialect`` setting accepts: ``auto`` (detected), ``json`` (a relay whose text field is named by
``json_text_field``) and each key of :data:`BY_NAME`. A test holds the two together."""

BY_NAME: Final[dict[DialectName, type[Dialect]]] = {
    "sse": Generic,
    "openai": OpenAIChat,
    "openai-responses": OpenAIResponses,
    "anthropic": Anthropic,
    "text": Text,
    "ai-sdk": AISDK,
}
_ANTHROPIC_EVENTS: Final = frozenset(("message_start", "content_block_start", "content_block_delta", "ping"))


def initial(
    kind: str, config: CoreConfig, response_headers: Iterable[tuple[bytes, bytes]] = ()
) -> Dialect:
    """The dialect a stream starts with: final, or :class:`Undetected` until its first event with data."""
    if kind == headers.TEXT:
        return PlainText()
    if kind != headers.SSE:
        return Opaque()
    name = config.dialect
    if name == "json":
        return JsonRelay(config.json_text_field)
    if name != "auto":
        return BY_NAME[name]()
    hint = headers.dialect_hint(response_headers)
    return BY_NAME[hint]() if hint is not None else Undetected()


def detect(raw: bytes, route: RouteRelay | None = None) -> Dialect | None:
    """The dialect of a stream from one raw event, its first with data; None for an event without data.
    ``route``: the route's relay memory, when a relay may be learned or merged (coalescing on)."""
    name, data = name_and_data(raw)
    if not data and name is None:
        return None
    if name is not None:
        if name.startswith("response."):
            return OpenAIResponses()
        return Anthropic() if name in _ANTHROPIC_EVENTS else Generic()
    if b'"chat.completion.chunk"' in data[:400]:
        return for_chunk(data)
    if data[:1] != b"{":
        if route is not None:
            route.forget()
        return Generic()
    obj = loads(data)
    found = _by_object(raw, data, obj, route)
    if not isinstance(found, Generic):  # generic SSE parses nothing: keep nothing for the stream's life
        found.keep(raw, obj)  # the dialect reads this event next (its info, its delta): one parse for all
    return found


def _by_object(raw: bytes, data: bytes, obj: object, route: RouteRelay | None) -> Dialect:
    """The dialect of a stream whose first event ``raw`` holds ``data``, that parses to ``obj``."""
    if isinstance(obj, dict):
        choices = obj.get("choices")
        if isinstance(choices, list) and choices and all(_has_delta(c) for c in choices):
            return for_chunk(data)
        if is_start(obj):
            return AISDK()
        if route is not None:
            return first_event(raw, obj, route) or Generic()
    if route is not None:
        route.forget()
    return Generic()


def _has_delta(choice: object) -> bool:
    return isinstance(choice, dict) and isinstance(choice.get("delta"), dict)
