"""The two bytes an event stream's lines end at, as ints: ``CR in raw`` and ``raw[-1] == CR`` are a
memchr and an int compare, where a one-byte bytes needle is a slower substring search."""

from __future__ import annotations

from typing import Final

CR: Final = 0x0D
LF: Final = 0x0A
