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

Who acts: the stream starts a :class:`Listener` (which its watcher's task runs) while the app does not
listen itself; the responder only passes the app's ``receive`` through :meth:`ClientWatch.receive`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Protocol

import anyio

from .._types import Message, Receive

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


class Leaves(Protocol):
    """What the listener tells: the stream's ``client_left``."""

    def client_left(self, *, cancel_app: bool) -> bool: ...


class Listener:
    """A stream's disconnect listener, run by its watcher while the app does not listen itself. Made only
    when it starts (see :meth:`.stream.Stream.listen_if_needed`): most apps listen themselves, so most
    streams never make one. ``stream``: a weak proxy (the stream holds its watcher, which holds this)."""

    __slots__ = ("_stream", "_watch")

    def __init__(self, watch: ClientWatch, stream: Leaves) -> None:
        self._watch = watch
        self._stream = stream

    async def __call__(self) -> None:
        watch = self._watch
        if await watch.listen():  # the app did not hear it (unless it came back meanwhile)
            _tell(self._stream, cancel_app=not watch.app_listening)


def hide_disconnects(watch: ClientWatch, stream: Leaves) -> None:
    """A resumable stream: the app goes on when its client leaves, and never hears of it. ``stream``: a weak
    proxy (the watch is the responder's, kept past the stream's end)."""

    def told() -> None:
        _tell(stream, cancel_app=False)

    watch.hide_disconnects(told)


def _tell(stream: Leaves, *, cancel_app: bool) -> None:
    with contextlib.suppress(ReferenceError):  # the stream is over: nobody to tell
        stream.client_left(cancel_app=cancel_app)
