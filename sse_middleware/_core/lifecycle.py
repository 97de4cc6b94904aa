"""A response's lifecycle: its phases and its client's state, the only moves between them as data in one
place, and the one object that makes them (h11's ``_state.py`` rule: one writer).

:class:`Lifecycle` is the only code that assigns a phase, the client's state, or why the middleware ended
the stream (the quality test checks it). Everything else asks it (``phase``, ``ours``, ``client``,
``ending``, ...) or calls one of its named transitions, each of which does the move and its bookkeeping:
cancelling the app, and *letting go* of the stream (the middleware forgets it for shutdown drains and
its watcher stops) once its time is the app's own again. An illegal move raises :class:`LifecycleError`:
a bug of ours, never the app's fault. The few transitions that may be asked for twice say so in their
name's docstring ("idempotent") and do nothing the second time.

Two tables, because they move independently: the *phase* is about the app's run (has it started a
stream, ended it, or has the middleware ended it), the *client* is about the other end (reading, gone,
or replaced by the resume log). A re-run of the app on the same client would keep the client's state.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import ClassVar, Final

from .._exceptions import SSEMiddlewareError
from .errors import ErrorInfo


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


class Client(enum.Enum):
    CONNECTED = "connected"  # frames go to the client
    GONE = "gone"  # it left, or stopped reading (a write took over send_timeout): nothing more is written
    DETACHED = "detached"  # resumable and its client gone: frames go to the log only, the app goes on

    __hash__ = object.__hash__


MOVES: Final[dict[Phase, frozenset[Phase]]] = {
    Phase.WAITING: frozenset({Phase.PASSING, Phase.STREAMING}),
    Phase.PASSING: frozenset(),
    Phase.STREAMING: frozenset({Phase.CLOSING, Phase.ENDING, Phase.ENDED}),
    Phase.CLOSING: frozenset({Phase.ENDED}),
    Phase.ENDING: frozenset({Phase.ENDED}),
    Phase.ENDED: frozenset(),
}
CLIENT_MOVES: Final[dict[Client, frozenset[Client]]] = {
    Client.CONNECTED: frozenset({Client.GONE, Client.DETACHED}),
    # A resumable stream whose client was given up as a write was cut still hands its log over.
    Client.GONE: frozenset({Client.DETACHED}),
    Client.DETACHED: frozenset(),
}
LIVE: Final = frozenset({Phase.STREAMING, Phase.ENDING})
"""The phases in which the middleware still owes the stream its end (the host's teardown sends it)."""


class LifecycleError(SSEMiddlewareError):
    """An illegal phase change: a bug in the middleware, never the app's fault."""

    hint: ClassVar[str] = "lifecycle_error"


class Lifecycle:
    """One response's phase, and whether the middleware ended it (``ours``: the app was cancelled by us,
    so its later writes go nowhere). The client's state (``client``), and why the middleware ends the
    stream: ``ending`` (what it tells the client; None: nothing), ``abandoned`` (ended with no word to
    anyone: its log is not complete), ``write_failure`` (a write of ours the server refused).

    ``cancel_app`` ends the app's run; ``let_go`` (given when the response turns out to be a stream)
    forgets the stream and stops its helpers, once."""

    __slots__ = (
        "_cancel_app",
        "_let_go",
        "abandoned",
        "client",
        "connected",
        "ending",
        "ours",
        "phase",
        "write_failure",
    )

    def __init__(self, cancel_app: Callable[[], object]) -> None:
        self.phase = Phase.WAITING
        self.ours = False
        self.client = Client.CONNECTED
        self.connected = True  # client is CONNECTED: frames still go to the client (read per write)
        self.ending: ErrorInfo | None = None
        self.abandoned = False
        self.write_failure: Exception | None = None
        self._cancel_app = cancel_app
        self._let_go: Callable[[], object] | None = None

    def _move(self, new: Phase) -> None:
        if new not in MOVES[self.phase]:
            raise LifecycleError(f"a stream cannot go from {self.phase.value} to {new.value}")
        self.phase = new

    def _move_client(self, new: Client) -> None:
        if new not in CLIENT_MOVES[self.client]:
            raise LifecycleError(f"a stream's client cannot go from {self.client.value} to {new.value}")
        self.client = new
        self.connected = False  # every move leaves CONNECTED

    @property
    def detached(self) -> bool:
        return self.client is Client.DETACHED

    # -- the start ------------------------------------------------------------------------------------

    def pass_through(self) -> None:
        """Not a stream (or HEAD): every message goes through untouched from now on."""
        self._move(Phase.PASSING)

    def stream(self, let_go: Callable[[], object]) -> None:
        """A stream the middleware looks after; ``let_go`` is called once, when it no longer does."""
        self._move(Phase.STREAMING)
        self._let_go = let_go

    # -- the client -----------------------------------------------------------------------------------

    def client_left(self) -> None:
        """The client left or stopped reading: nothing more is written to it."""
        self._move_client(Client.GONE)

    def detach(self) -> None:
        """Idempotent. A resumable stream's client is gone: its frames go to the log only from now on."""
        if self.client is not Client.DETACHED:
            self._move_client(Client.DETACHED)

    # -- the app ends it ------------------------------------------------------------------------------

    def closing(self) -> None:
        """The app's final body is on its way (ours while written: a shutdown's hard stop may cut it)."""
        self._move(Phase.CLOSING)

    def closed(self) -> None:
        """The app's final body went out, or its write failed where the app hears it: the app's time is
        its own again."""
        self._move(Phase.ENDED)
        self.let_go()

    def client_gone(self) -> None:
        """The client left and the app can know it (it heard the disconnect, or will at its next send):
        what it does next is its own business."""
        self._move(Phase.ENDED)
        self.let_go()

    # -- the middleware ends it -----------------------------------------------------------------------

    def end(self, info: ErrorInfo | None = None) -> None:
        """Idempotent (the first reason wins). The middleware ends a live stream: the app is cancelled;
        the host's teardown tells the client ``info`` (None: just its end). Once the stream is ending or
        over, a later call changes nothing."""
        if self.phase is Phase.STREAMING:
            self._move(Phase.ENDING)
            self.ending = info
            self.ours = True
            self._cancel_app()

    def abandon(self) -> None:
        """Idempotent, as :meth:`end`. Ended with no word to anyone (a detached stream nobody follows):
        its log says it is not complete."""
        if self.phase is Phase.STREAMING:
            self.abandoned = True
            self.end(None)

    def fail(self, exc: Exception, info: ErrorInfo) -> None:
        """Idempotent as :meth:`end` (the first reason wins). The server refused a write of ours: the
        stream failed, not the app. The failure is kept for the teardown's report even when the stream
        was already ending (then ``info`` is dropped)."""
        self.write_failure = exc
        self.end(info)

    def finished(self) -> None:
        """The middleware writes the stream's last frame: from now on the app's writes go nowhere."""
        self._move(Phase.ENDED)
        self.ours = True

    def hard_stop(self) -> None:
        """Past a shutdown's grace and the bounded cleanup: cancel whatever the response still does, so a
        client that stopped reading cannot hold a deploy. The phase stays as it is."""
        self._cancel_app()

    def let_go(self) -> None:
        """Idempotent. Forget the stream: called by the transitions above and by the host's teardown."""
        let_go, self._let_go = self._let_go, None
        if let_go is not None:
            let_go()
