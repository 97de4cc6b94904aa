"""A response's phases and the only moves between them, as data in one place; and how a response's task
ends (exceptions that only mean the client left, single-exception groups)."""

from __future__ import annotations

import enum
import sys
from typing import Any, Final, NoReturn

from .._exceptions import SSEMiddlewareError

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup


class Phase(enum.Enum):
    WAITING = "waiting"  # no http.response.start yet
    PASSING = "passing"  # not a stream: every message goes through untouched
    STREAMING = "streaming"  # a stream the middleware looks after
    CLOSING = "closing"  # the app's final body is on its way (a client that stopped reading may hold it)
    ENDING = "ending"  # the middleware is ending it (error, stall, shutdown, a disconnect the app can't see)
    ENDED = "ended"  # the final body was sent, or the client is gone: the app's time is its own again


_MOVES: Final[dict[Phase, frozenset[Phase]]] = {
    Phase.WAITING: frozenset({Phase.PASSING, Phase.STREAMING}),
    Phase.PASSING: frozenset(),
    Phase.STREAMING: frozenset({Phase.CLOSING, Phase.ENDING, Phase.ENDED}),
    Phase.CLOSING: frozenset({Phase.ENDED}),
    Phase.ENDING: frozenset({Phase.ENDED}),
    Phase.ENDED: frozenset(),
}


class LifecycleError(SSEMiddlewareError):
    """An illegal phase change: a bug in the middleware, never the app's fault."""


def move(current: Phase, new: Phase) -> Phase:
    if new not in _MOVES[current]:
        raise LifecycleError(f"a stream cannot go from {current.value} to {new.value}")
    return new


def raise_collapsed(group: BaseExceptionGroup[Any]) -> NoReturn:
    """Re-raise a single-exception group as its exception, keeping its own cause and context."""
    if len(group.exceptions) != 1:
        raise group
    exc = group.exceptions[0]
    cause, context = exc.__cause__, exc.__context__
    try:
        raise exc
    finally:
        exc.__cause__, exc.__context__ = cause, context
