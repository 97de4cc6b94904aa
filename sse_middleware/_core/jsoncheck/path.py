"""JSONPath-like names for a place in a document, as messages show them: ``$``, ``$.days``, ``$.items[2]``,
``$["a key"]``."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Final

_PLAIN_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SHOWN: Final = 64  # characters of a long key shown


def format_path(parts: Sequence[str | int]) -> str:
    pieces = ["$"]
    for part in parts:
        if isinstance(part, int):
            pieces.append(f"[{part}]")
        elif _PLAIN_KEY.match(part):
            pieces.append(f".{part}")
        else:
            shown = part if len(part) <= _SHOWN else part[:_SHOWN] + "…"
            pieces.append(f"[{json.dumps(shown, ensure_ascii=False)}]")
    return "".join(pieces)
