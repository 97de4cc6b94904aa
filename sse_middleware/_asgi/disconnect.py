"""Seeing a client leave, under both ASGI spec versions, without taking the app's messages.

ASGI >= 2.4 servers raise ``OSError`` from ``send`` (the responder handles that); uvicorn declares 2.3,
where a ``send`` to a gone client silently does nothing, so the only sign is ``http.disconnect`` on
``receive``. Many apps never call ``receive`` once they stream, so we listen ourselves, but only once the
app can no longer want a body message from it; anything else we read is kept for the app. Only one
``receive`` is ever in flight: some servers (granian) answer a second, concurrent one with a false
``http.disconnect``.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

import anyio
import anyio.abc

from .._core.headers import has_request_body

Message = dict[str, Any]


class ClientWatch:
    def __init__(self, receive: Any, scope: MutableMapping[str, Any], on_gone: Callable[[], None]) -> None:
        self._receive = receive
        self._scope = scope
        self._on_gone = on_gone
        self._stash: list[Message] = []
        self._body_read = False
        self._listening = False
        self._listen_scope = anyio.CancelScope()
        self._one_at_a_time = anyio.Lock()
        self._app_waiting = 0  # the app is in receive() (Starlette's StreamingResponse listens itself)
        self.gone = False

    async def receive(self) -> Message:
        """The app's ``receive``: what we kept for it first, then the server's messages, observed."""
        # Counted from the call, not from inside the lock: the lock's acquire yields, and an app on its
        # way into receive (Starlette's disconnect listener, between two calls) is already listening.
        self._app_waiting += 1
        try:
            async with self._one_at_a_time:
                if self._stash:
                    return self._stash.pop(0)
                if self.gone:
                    return {"type": "http.disconnect"}
                message: Message = await self._receive()
        finally:
            self._app_waiting -= 1
        self._observe(message)
        return message

    def _observe(self, message: Message) -> None:
        if message["type"] == "http.disconnect":
            if not self.gone:
                self.gone = True
                self._listen_scope.cancel()
                self._on_gone()
        elif message["type"] == "http.request" and not message.get("more_body", False):
            self._body_read = True

    def can_listen(self) -> bool:
        """Whether to start our own listener: not while the app waits in ``receive`` itself (it will see
        the disconnect through us, and a second task per stream costs ~3 KiB), nor while it may still
        want a body message."""
        if self._listening or self._app_waiting or self.gone:
            return False
        return self._body_read or not has_request_body(self._scope.get("headers", ()))

    def listen(self, tg: anyio.abc.TaskGroup) -> None:
        """Start watching ``receive`` in ``tg`` (check :meth:`can_listen` first)."""
        self._listening = True
        tg.start_soon(self._listen)

    async def _listen(self) -> None:
        if self._app_waiting:  # the app went back into receive since we were started: it listens itself
            self._listening = False
            return
        with self._listen_scope:
            while not self.gone:
                async with self._one_at_a_time:
                    if self.gone:
                        return
                    message: Message = await self._receive()
                self._observe(message)
                if message["type"] != "http.disconnect":
                    self._stash.append(message)  # the app's, should it ask: we only watch

    def stop(self) -> None:
        self._listen_scope.cancel()
