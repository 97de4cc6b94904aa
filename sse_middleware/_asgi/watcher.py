"""A stream's one helper task: it wakes the stream at its next deadline and, while the app does not
listen itself, reads ``receive`` for a disconnect. It runs only while there is something to do.

Why not a task group around the app: anyio spends more on spawning and cancelling one child than the rest
of a stream's setup (docs/benchmarks.md, "per-stream cost"), and most streams never need one. So the
child is spawned on its own, outside any task group (:func:`.backend.spawn_child`), and the stream's
teardown (:meth:`.stream.Stream.aclose`) stops and joins it before the response ends, which keeps it
structured in effect: it never outlives its stream.

On asyncio, deadlines are kept by a loop timer handle whose callback first *peeks*: it asks the stream
(synchronously, no I/O) when its next deadline really is. While tokens flow the answer has moved on (the
app's own sends flushed what was due), and the handle is simply set again: a few microseconds, no task
switch. Only when something is due now does the child run (spawned, or woken from its listener), so an
idle stream waiting for a heartbeat 15 s ahead holds a timer handle and no task. On trio (no timer
callbacks) the child stays, sleeping in a cancel scope whose deadline moves.
"""

from __future__ import annotations

import asyncio
import math
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Protocol

import anyio

from .._core.errors import logger
from .backend import asyncio_loop, spawn_child

_SLACK = 0.001  # uvloop fires timers up to ~1 ms early: never go back to sleep for less

Listen = Callable[[], Awaitable[None]]


class Watched(Protocol):
    """What the watcher looks after: a stream."""

    def peek(self, now: float) -> float:
        """The next deadline, with nothing done (``<= now``: something is due)."""

    async def wake(self, now: float) -> float:
        """Do what is due at ``now``; the next deadline (inf: none)."""


class Watcher:
    """Calls ``owner.wake(now)`` (which does what is due and returns the next deadline) once
    ``owner.peek(now)`` (the next deadline, without doing anything) says something is due, at every
    deadline given through :meth:`want`; runs a listener when one is set with :meth:`listen`. The owner
    is held weakly: it holds the watcher."""

    __slots__ = (
        "_done",
        "_handle",
        "_listener",
        "_loop",
        "_owner",
        "_scope",
        "_wait",
        "child",
        "stopped",
        "target",
    )

    def __init__(self, owner: Watched) -> None:
        self._owner = weakref.ref(owner)
        self.target = math.inf  # when to look next (read it; only want() and the watcher itself move it)
        self.stopped = False  # read it; only stop() sets it: deadlines given to want() are no longer kept
        self._listener: Listen | None = None
        self.child: object | None = None  # the running task, if any (read it; only the watcher sets it)
        self._done: anyio.Event | None = None  # set when the child ends
        self._scope: anyio.CancelScope | None = None  # the child's whole body
        self._wait: anyio.CancelScope | None = None  # the child's wait (listener; trio: its sleep)
        self._handle: asyncio.TimerHandle | None = None  # asyncio: when to peek next
        self._loop = asyncio_loop()  # None on trio

    # -- what the stream calls -----------------------------------------------------------------------

    def want(self, when: float) -> None:
        """Make sure the stream is looked at by ``when``. Cheap when ``when`` is no earlier than what is
        already wanted: that is the per-token case."""
        if when >= self.target or self.stopped:
            return
        self.target = when
        if self._loop is not None:
            self._arm(when)
        elif self.child is None:
            self._spawn()
        elif self._wait is not None:
            self._wait.deadline = scope_time(when)
        # else the child is inside wake(): it reads target when it returns

    @property
    def listening(self) -> bool:
        return self._listener is not None

    def listen(self, listener: Listen) -> None:
        """Run ``listener`` (until it returns) in the child, between wakes."""
        if self.stopped:
            return
        self._listener = listener
        if self.child is None:
            self._spawn()

    def stop(self) -> None:
        """No more wakes; the child (if any) ends at once. :meth:`join` waits for it."""
        self.stopped = True
        self._listener = None  # a method of the stream's: kept, it would make the two a reference cycle
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._scope is not None:
            self._scope.cancel()

    async def join(self) -> None:
        if self._done is not None and self.child is not None:
            await self._done.wait()

    # -- asyncio: a timer handle that peeks ----------------------------------------------------------

    def _arm(self, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        if self._loop is not None and when != math.inf:  # loop.time() is time.monotonic(): one clock
            self._handle = self._loop.call_at(when, self._ring)

    def _ring(self) -> None:
        self._handle = None
        if self.stopped:
            return
        owner = self._owner()
        if owner is None:
            return
        now = time.monotonic()
        target = owner.peek(now)
        self.target = target
        if target > now + _SLACK:
            self._arm(target)  # nothing due yet (the app's sends took care of it): look again then
        elif self.child is None:
            self._spawn()
        elif self._wait is not None:
            self._wait.cancel()  # the listener waits on receive: interrupt it for the work that is due
        # else the child is inside wake(): it peeks again when it returns

    # -- the child -----------------------------------------------------------------------------------

    def _spawn(self) -> None:
        self._done = anyio.Event()
        self.child = spawn_child(self._run, "sse_middleware watcher", self._loop)

    async def _run(self) -> None:
        try:
            with anyio.CancelScope() as self._scope:
                while not self.stopped:
                    now = time.monotonic()
                    if self.target <= now + _SLACK:
                        self.target = math.inf  # want() may lower it again while wake() runs
                        owner = self._owner()
                        if owner is None:
                            return
                        after = await owner.wake(now)
                        self.target = min(self.target, after)
                        continue
                    if self._listener is not None:
                        await self._listen(self._listener)
                    elif self._loop is not None:
                        self._arm(self.target)  # nothing to do until then: the task ends, the handle waits
                        return
                    elif self.target == math.inf:
                        return
                    else:
                        with anyio.CancelScope(deadline=scope_time(self.target)) as self._wait:
                            await anyio.sleep_forever()
                        self._wait = None
        except Exception:  # a bug of ours must never take the server down (a trio system task would)
            logger.exception("the stream watcher failed; the stream goes on without it")
        finally:
            self._scope = self._wait = None
            self.child = None
            if self._done is not None:
                self._done.set()

    async def _listen(self, listener: Listen) -> None:
        if self._loop is not None:
            self._arm(self.target)  # the handle peeks meanwhile, and interrupts only for due work
            deadline = math.inf
        else:
            deadline = scope_time(self.target)
        with anyio.CancelScope(deadline=deadline) as self._wait:
            await listener()
            self._listener = None  # it returned on its own: the client left or the app listens
        self._wait = None
        if self._loop is not None and self._listener is not None:  # interrupted: the work is due now
            self.target = min(self.target, time.monotonic())


def scope_time(when: float) -> float:
    """A ``time.monotonic()`` deadline on the event loop's clock, which cancel scopes use (trio's clock
    has an offset of its own)."""
    return when - time.monotonic() + anyio.current_time() if when != math.inf else math.inf
