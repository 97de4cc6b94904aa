"""The one lock around the real ``send``, so nothing is ever written inside a half-sent message.

A flag, not ``anyio.Lock``: the app's own sends (nearly all of them) find it free and pay two attribute
writes, where ``anyio.Lock`` costs microseconds per token even with ``fast_acquire``. Only the timer
can find it taken, and it never queues behind a send that a slow client holds up (see ``Responder``).
"""

from __future__ import annotations

import anyio


class SendGate:
    __slots__ = ("busy", "waiting")

    def __init__(self) -> None:
        self.busy = False
        self.waiting: anyio.Event | None = None  # set at the release, when someone waits for it

    async def acquire(self) -> None:
        while self.busy:
            await self.released().wait()
        self.busy = True

    async def take(self) -> None:
        """Acquire, without an await when the gate is free (the per-token path inlines this)."""
        if self.busy:
            await self.acquire()
        else:
            self.busy = True

    def release(self) -> None:
        """Free the gate (the per-token path inlines this when nobody is ``waiting``)."""
        self.busy = False
        if self.waiting is not None:
            self.waiting.set()
            self.waiting = None

    def released(self) -> anyio.Event:
        """An event set when the send in progress ends."""
        if self.waiting is None:
            self.waiting = anyio.Event()
        return self.waiting
