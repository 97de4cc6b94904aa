"""A response's phases and the only moves between them, as data in one place."""

from __future__ import annotations

import enum
from typing import Final

from .._exceptions import SSEMiddlewareError


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
