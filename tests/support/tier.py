"""Which tier runs. The fast tier (``python -m pytest tests/unit -m "not slow"``) runs each hypothesis
property with a fifth of its examples (20 for those at hypothesis' default), so that the inner loop stays
in seconds; the full run (the README's test command, CI) runs them all. Set by ``tests/conftest.py``
before collection."""

from __future__ import annotations

FAST = False


def examples(n: int) -> int:
    """``max_examples``: ``n`` in the full run, a fifth of it (at least 20) in the fast tier."""
    return max(20, n // 5) if FAST else n
