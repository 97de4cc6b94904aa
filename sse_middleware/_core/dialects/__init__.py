"""Stream formats: what merges in each, what telemetry reads, each format's error event.

:mod:`.base` holds the interface (an incremental reader of whole raw events), :mod:`.detect` the rules
that pick a dialect for a stream; one module per format.
"""

from .ai_sdk import AISDK
from .anthropic import Anthropic
from .base import Delta, Dialect, Generic, Opaque, PlainText, Text, Undetected
from .detect import BY_NAME, detect, initial
from .openai_chat import OpenAIChat
from .openai_responses import OpenAIResponses
from .relay import JsonRelay, RelayMemory, RelayProbe, RouteRelay

__all__ = [
    "AISDK",
    "BY_NAME",
    "Anthropic",
    "Delta",
    "Dialect",
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
