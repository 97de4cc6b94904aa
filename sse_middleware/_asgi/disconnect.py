"""Seeing a client leave without changing what the app sees on ``receive``.

The app's ``receive`` must behave exactly as the server's: same messages, same timing, and no await of
ours before the server's own. Starlette's ``Request.is_disconnected()`` calls ``receive()`` inside an
already-cancelled scope and expects an answer, which only works if nothing before the server's call is a
checkpoint (a lock's acquire is one).

Under ASGI spec < 2.4 (uvicorn, hypercorn, granian) a ``send`` to a client that left silently does
nothing, so the only sign is ``http.disconnect`` on ``receive``. Most apps listen themselves (Starlette's
``StreamingResponse``, sse-starlette); a raw generator may never call ``receive`` once it streams, so the
stream may start :meth:`ClientWatch.listen` while the app is not listening. Only one ``receive`` is ever
in flight: some servers (granian) answer a second, concurrent one with a false ``http.disconnect``. An app
that calls ``receive`` while our listener waits gets the listener's answer; whatever the listener read is
kept for the app, disconnects included.

Who acts: the stream (:class:`Listener`, which its watcher's task runs) starts the listener while the app
does not listen itself; the responder only passes the app's ``receive`` through :meth:`ClientWatch.receive`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import anyio

from .._core.lifecycle import Lifecycle, Phase
from .._types import Message, Receive
from .watcher import Watcher

_KEEP = 16  # messages kept for an app that does not read them; a server has nothing more to say


class ClientWatch:
    __slots__ = ("_hidden", "_in_flight", "_receive", "_stash", "_waiting", "body_read", "gone")

    def __init__(self, receive: Receive, has_body: bool) -> None:
        self._receive = receive
        self._stash: list[Message] = []
        self._in_flight: anyio.Event | None = None  # set when our listener's receive returns or stops
        self._waiting = 0  # the app is inside receive(): it listens itself
        self.body_read = not has_body
        self.gone = False  # an http.disconnect was seen, by the app or by us
        self._hidden: Callable[[], object] | None = None

    @property
    def app_listening(self) -> bool:
        return self._waiting > 0

    async def receive(self) -> Message:
        """The app's ``receive``: what our listener read first, else the server's own call, observed."""
        self._waiting += 1
        try:
            while True:
                if self._stash:
                    message = self._stash.pop(0)
                elif self._in_flight is not None:
                    await self._in_flight.wait()  # the server's call is pending anyway: share its answer
                    continue
                else:
                    message = await self._receive()
                    self._observe(message)
                if message["type"] != "http.disconnect" or self._hidden is None:
                    return message
                self._hidden()  # a resumable stream goes on without its client: the app never hears of it
                await anyio.sleep_forever()
        finally:
            self._waiting -= 1

    def hide_disconnects(self, told: Callable[[], object]) -> None:
        """From now on the app never receives ``http.disconnect``; its ``receive`` waits instead (as for a
        client still there), and ``told`` is called."""
        self._hidden = told

    def _observe(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.disconnect":
            self.gone = True
        elif kind == "http.request" and not message.get("more_body", False):
            self.body_read = True

    def can_listen(self) -> bool:
        """Whether our listener may read ``receive`` now: the app is not listening itself and cannot want
        a body message from it any more."""
        return (
            self.body_read
            and not self.gone
            and not self._waiting
            and len(self._stash) < _KEEP
            and self._in_flight is None
        )

    async def listen(self) -> bool:
        """Read ``receive`` until a disconnect (True), or until the app listens itself (False); every
        message read is kept for the app. Check :meth:`can_listen` first."""
        while not self._waiting and len(self._stash) < _KEEP:
            in_flight = self._in_flight = anyio.Event()
            try:
                message: Message = await self._receive()
            finally:
                self._in_flight = None
                in_flight.set()
            self._stash.append(message)
            self._observe(message)
            if self.gone:
                return True
        return False


ClientLeft = Callable[..., bool]  # the stream's client_left(cancel_app=...)


class Listener:
    """A stream's disconnect listener, run by its watcher while the app does not listen itself.
    ``client_left``: the stream's, held weakly (the stream holds this listener)."""

    __slots__ = ("_client_left", "_life", "_may_listen", "_watch", "_watcher")

    def __init__(
        self,
        watch: ClientWatch,
        watcher: Watcher,
        life: Lifecycle,
        client_left: weakref.WeakMethod[ClientLeft],
        may_listen: bool,
    ) -> None:
        self._watch = watch
        self._watcher = watcher
        self._life = life
        self._client_left = client_left
        self._may_listen = may_listen

    def gone_before_start(self) -> bool:
        return self._watch.gone

    def listen_if_needed(self) -> None:
        """Start our listener if nobody would otherwise hear the client leave."""
        if (
            self._may_listen
            and not self._watcher.listening
            and self._life.phase is Phase.STREAMING
            and self._watch.can_listen()
        ):
            self._watcher.listen(self._listen)

    async def _listen(self) -> None:
        watch = self._watch
        if await watch.listen():  # the app did not hear it (unless it came back meanwhile)
            self._tell(cancel_app=not watch.app_listening)

    def _tell(self, *, cancel_app: bool) -> None:
        client_left = self._client_left()
        if client_left is not None:
            client_left(cancel_app=cancel_app)

    def hide_disconnects(self) -> None:
        """A resumable stream: the app goes on when its client leaves, and never hears of it."""
        left = self._client_left  # not self: the watch is the responder's, kept past the stream's end

        def told() -> None:
            method = left()
            if method is not None:
                method(cancel_app=False)

        self._watch.hide_disconnects(told)
