"""A response's lifecycle: its phases, the only moves between them as data in one place, and the one
object that makes them (h11's ``_state.py`` rule: one writer).

:class:`Lifecycle` is the only code that assigns a phase (the quality test checks it). Everything else
asks it (``phase``, ``ours``) or calls one of its named transitions, each of which does the move and its
bookkeeping: cancelling the app, and *releasing* the stream (the middleware forgets it for shutdown
drains and its watcher stops) once its time is the app's own again. An illegal move raises
:class:`LifecycleError`: a bug of ours, never the app's fault.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Final

from .._exceptions import SSEMiddlewareError


class Phase(enum.Enum):
    WAITING = "waiting"  # no http.response.start yet
    PASSING = "passing"  # not a stream: every message goes through untouched
    STREAMING = "streaming"  # a stream the middleware looks after
    CLOSING = "closing"  # the app's final body is on its way (a client that stopped reading may hold it)
    ENDING = "ending"  # the middleware is ending it (error, stall, shutdown, a disconnect the app can't see)
    ENDED = "ended"  # the final body was sent, or the client is gone: the app's time is its own again

    # Enum's own __hash__ is Python code (hash of the name), run at each move's look-up in MOVES and each
    # test against LIVE; members are singletons compared by identity, so the identity hash is the same key.
    __hash__ = object.__hash__


MOVES: Final[dict[Phase, frozenset[Phase]]] = {
    Phase.WAITING: frozenset({Phase.PASSING, Phase.STREAMING}),
    Phase.PASSING: frozenset(),
    Phase.STREAMING: frozenset({Phase.CLOSING, Phase.ENDING, Phase.ENDED}),
    Phase.CLOSING: frozenset({Phase.ENDED}),
    Phase.ENDING: frozenset({Phase.ENDED}),
    Phase.ENDED: frozenset(),
}
LIVE: Final = frozenset({Phase.STREAMING, Phase.ENDING})
"""The phases in which the middleware still owes the stream its end (the host's teardown sends it)."""


class LifecycleError(SSEMiddlewareError):
    """An illegal phase change: a bug in the middleware, never the app's fault."""


def _nothing() -> None:
    return None


class Lifecycle:
    """One response's phase, and whether the middleware ended it (``ours``: the app was cancelled by us,
    so its later writes go nowhere). ``cancel_app`` ends the app's run; ``release`` (given when the
    response turns out to be a stream) forgets the stream and stops its helpers, once."""

    __slots__ = ("_cancel_app", "_release", "ours", "phase")

    def __init__(self, cancel_app: Callable[[], object]) -> None:
        self.phase = Phase.WAITING
        self.ours = False
        self._cancel_app = cancel_app
        self._release: Callable[[], object] = _nothing

    def _move(self, new: Phase) -> None:
        if new not in MOVES[self.phase]:
            raise LifecycleError(f"a stream cannot go from {self.phase.value} to {new.value}")
        self.phase = new

    # -- the start ------------------------------------------------------------------------------------

    def pass_through(self) -> None:
        """Not a stream (or HEAD): every message goes through untouched from now on."""
        self._move(Phase.PASSING)

    def stream(self, release: Callable[[], object]) -> None:
        """A stream the middleware looks after; ``release`` is called once, when it no longer does."""
        self._move(Phase.STREAMING)
        self._release = release

    # -- the app ends it ------------------------------------------------------------------------------

    def closing(self) -> None:
        """The app's final body is on its way (ours while written: a shutdown's hard stop may cut it)."""
        self._move(Phase.CLOSING)

    def closed(self) -> None:
        """The app's final body went out, or its write failed where the app hears it: the app's time is
        its own again."""
        if self.phase is Phase.CLOSING:
            self._move(Phase.ENDED)
            self.release()

    def client_gone(self) -> None:
        """The client left and the app can know it (it heard the disconnect, or will at its next send):
        what it does next is its own business."""
        self._move(Phase.ENDED)
        self.release()

    # -- the middleware ends it -----------------------------------------------------------------------

    def end(self) -> None:
        """The middleware ends a live stream: the app is cancelled; the host's teardown says why."""
        if self.phase is Phase.STREAMING:
            self._move(Phase.ENDING)
            self.ours = True
            self._cancel_app()

    def finished(self) -> None:
        """The middleware writes the stream's last frame: from now on the app's writes go nowhere."""
        self._move(Phase.ENDED)
        self.ours = True

    def hard_stop(self) -> None:
        """Past a shutdown's grace and the bounded cleanup: cancel whatever the response still does, so a
        client that stopped reading cannot hold a deploy. The phase stays as it is."""
        self._cancel_app()

    def release(self) -> None:
        """Forget the stream (idempotent): called by the transitions above and by the host's teardown."""
        release, self._release = self._release, _nothing
        release()
