"""What an app is told on a re-run: the :class:`Recovery` value, kept in the re-run's scope.

A first run finds nothing there (``recovery()`` is None), so an app that never asks is unchanged; a re-run
finds what failed and what the client already has, which is enough to switch provider or to ask the
upstream for a continuation of exactly that text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from ..dialects.recovery.common import Reason

SCOPE_KEY: Final = "sse_middleware.recovery"
"""Where a re-run's scope holds its :class:`Recovery` (namespaced like every key of ours)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Recovery:
    """A re-run's view of the stream it continues."""

    attempt: int
    """1 for the first re-run, 2 for the next."""
    reason: Reason
    text: str
    """The answer's text the client already has (every text part, in order)."""
    reasoning: str
    """The reasoning (thinking) text the client already has."""
    dialect: str
    """The stream's format: ``openai``, ``anthropic``, ``openai-responses`` or ``ai-sdk``."""


def recovery(request_or_scope: Any) -> Recovery | None:
    """The :class:`Recovery` of this run, or None on a first run.

    Takes an ASGI scope, or anything with a ``scope`` mapping (Starlette's and FastAPI's ``Request``).
    """
    scope = getattr(request_or_scope, "scope", request_or_scope)
    if not isinstance(scope, Mapping):
        raise TypeError(f"recovery() takes a request or an ASGI scope, not {type(request_or_scope).__name__}")
    found = scope.get(SCOPE_KEY)
    return found if isinstance(found, Recovery) else None
