"""Stream formats: what merges in each, what telemetry reads, how each ends, one class per format.

:mod:`.base` holds the interface (an incremental reader of whole raw events), :mod:`.registry` the one
tuple of formats every table is derived from, :mod:`.detect` the rules that pick a dialect for a
stream; one module per format.
"""

from .ai_sdk import AISDK
from .anthropic import Anthropic
from .base import Delta, Dialect, Generic, Opaque, Undetected
from .detect import BY_NAME, detect, initial
from .openai_chat import OpenAIChat
from .openai_responses import OpenAIResponses
from .registry import END_MARKERS, FORMATS, NAMES, DialectName
from .relay import JsonRelay, RelayMemory, RelayProbe, RouteRelay
from .text import PlainText, Text

__all__ = [
    "AISDK",
    "BY_NAME",
    "END_MARKERS",
    "FORMATS",
    "NAMES",
    "Anthropic",
    "Delta",
    "Dialect",
    "DialectName",
    "Generic",
    "JsonRelay",
    "Opaque",
    "OpenAIChat",
    "OpenAIResponses",
    "PlainText",
    "RelayMemory",
    "RelayProbe",
    "RouteRelay",
    "Text",
    "Undetected",
    "detect",
    "initial",
]
