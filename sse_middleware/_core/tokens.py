"""A token count for output whose real count never arrived: the one estimate the package makes."""

from __future__ import annotations

import math


def estimate_tokens(chars: int) -> int:
    """About four characters a token (what BPE tokenizers average on English text; fewer characters a
    token on code and most other languages, so this errs low there). Used for a failed attempt's billed
    output and for the usage of a stream that ended before its upstream reported any."""
    return math.ceil(chars / 4)
