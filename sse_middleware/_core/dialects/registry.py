"""The formats, once: every table of formats is derived from this tuple of dialect classes.

Like httpx's ``SUPPORTED_DECODERS``: the ``dialect`` setting's accepted names, the readers it picks by
name, the order detection asks the formats in, the response headers that name a format, and the check's
end markers all come from the classes' own attributes (see :class:`~.base.Dialect`). A new format is one
class (its module, beside the others) and one entry here; nothing else lists formats.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final, Literal

from .ai_sdk import AISDK
from .anthropic import Anthropic
from .base import Dialect, Generic
from .openai_chat import OpenAIChat
from .openai_responses import OpenAIResponses
from .relay import JsonRelay
from .text import Text

FORMATS: Final[tuple[type[Dialect], ...]] = (
    JsonRelay,
    Generic,
    OpenAIChat,
    OpenAIResponses,
    Anthropic,
    Text,
    AISDK,
)
"""The formats a stream may be named or detected as (a class whose ``detect`` answers nothing, such as
:class:`Text`, is only ever named)."""

DETECTION: Final[tuple[type[Dialect], ...]] = tuple(sorted(FORMATS, key=lambda cls: cls.rank))
"""The order detection asks the formats in: each format's own proof first, the catch-alls (a relay
watched on a guess, then generic SSE) last."""

NAMES: Final[tuple[str, ...]] = ("auto", *(cls.name for cls in FORMATS))
"""What the ``dialect`` setting accepts: ``auto`` (detected) and each format's name."""

if TYPE_CHECKING:
    DialectName = str
else:  # the settings' validator reads the accepted values from the Literal
    DialectName = Literal[NAMES]

BY_NAME: Final[dict[str, type[Dialect]]] = {cls.name: cls for cls in FORMATS}
END_MARKERS: Final[dict[str, str]] = {cls.name: cls.end_marker for cls in FORMATS if cls.end_marker}
"""Each format's clean end, as a report names it (a format without one owes none)."""
HINTS: Final[tuple[type[Dialect], ...]] = tuple(cls for cls in FORMATS if cls.hint is not None)


def hinted(headers: Iterable[tuple[bytes, bytes]]) -> type[Dialect] | None:
    """The format a response's headers name (e.g. ``x-vercel-ai-ui-message-stream: v1``), if any."""
    for name, value in headers:
        lowered = name.lower()
        for cls in HINTS:
            hint = cls.hint
            if hint is not None and lowered == hint[0] and value.strip().lower() == hint[1]:
                return cls
    return None
