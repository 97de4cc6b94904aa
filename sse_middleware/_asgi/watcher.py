"""A stream's one helper task: it wakes the responder at its next deadline and, while the app does not
listen itself, reads ``receive`` for a disconnect. Started only when needed, and parked when idle.

Why not a task group around the app: anyio spends more on spawning and cancelling one child than a
whole token's trip through the server costs (docs/benchmarks.md, "per-stream cost"), and most streams
never need one. So the child is spawned on its own, outside any task group, and the responder stops and
joins it before the response ends, which keeps it structured in effect: it never outlives its stream.

On asyncio the waits are a future and a loop timer handle: moving a deadline reschedules the handle, and
a wake costs no exception. A stream whose next deadline is far away (a heartbeat in 15 s) parks: the
task ends and only the timer handle waits, a few hundred bytes instead of a task and its frames. On trio
(no timer callbacks) the child stays, sleeping in a cancel scope whose deadline moves.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from .._core.errors import logger

_SLACK = 0.001  # uvloop fires timers up to ~1 ms early: never go back to sleep for less
_PARK = 1.0  # a deadline this far away is left to a timer handle, with no task (asyncio)

Wake = Callable[[float], Awaitable[float]]
Listen = Callable[[], Awaitable[None]]


class Watcher:
    """Calls ``wake(now)`` (which does what is due and returns the next deadline) at every deadline it
    is given through :meth:`want`, and runs a listener when one is set with :meth:`listen`."""

    __slots__ = (
        "_child",
        "_done",
        "_handle",
        "_listener",
        "_loop",
        "_scope",
        "_sleep",
        "_stopped",
        "_target",
        "_wait",
        "_wake",
    )

    def __init__(self, wake: Wake) -> None:
        self._wake = wake
        self._target = math.inf  # when wake() is due next
        self._stopped = False
        self._listener: Listen | None = None
        self._child: object | None = None  # the running task, if any
        self._done: anyio.Event | None = None  # set when the child ends
        self._scope: anyio.CancelScope | None = None  # the child's whole body
        self._wait: anyio.CancelScope | None = None  # the child's current wait, when it is a cancel scope
        self._sleep: asyncio.Future[None] | None = None  # the child's current wait on asyncio
        self._handle: asyncio.TimerHandle | None = None  # wakes the sleep, or re-spawns a parked child
        self._loop = asyncio._get_running_loop()  # None on trio

    # -- what the responder calls --------------------------------------------------------------------

    def want(self, when: float) -> None:
        """Make sure ``wake`` runs at ``when`` (or earlier). Cheap when ``when`` is no earlier than what
        is already wanted: that is the per-token case."""
        if when >= self._target or self._stopped:
            return
        self._target = when
        if self._child is None:
            if self._loop is not None and when - time.monotonic() > _PARK:
                self._arm(when)  # parked: only a timer handle
            else:
                self._spawn()
        elif self._wait is not None:
            self._wait.deadline = scope_time(when)
        elif self._sleep is not None:
            self._arm(when)
        # else the child is inside wake(): it reads _target when it returns

    @property
    def listening(self) -> bool:
        return self._listener is not None

    def listen(self, listener: Listen) -> None:
        """Run ``listener`` (until it returns) in the child, between wakes."""
        if self._stopped:
            return
        self._listener = listener
        if self._child is None:
            self._spawn()
        elif self._sleep is not None:
            self._poke()

    def stop(self) -> None:
        """No more wakes; the child (if any) ends at once. :meth:`join` waits for it."""
        self._stopped = True
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._sleep is not None:
            self._poke()
        elif self._scope is not None:
            self._scope.cancel()

    async def join(self) -> None:
        if self._done is not None and self._child is not None:
            await self._done.wait()

    # -- the child -----------------------------------------------------------------------------------

    def _spawn(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._done = anyio.Event()
        if self._loop is not None:
            self._child = self._loop.create_task(self._run())
        else:
            trio: Any = sys.modules["trio"]  # only ever here when the app runs on trio
            self._child = trio.lowlevel.spawn_system_task(
                self._run, name="sse_middleware watcher", context=contextvars.copy_context()
            )

    async def _run(self) -> None:
        try:
            with anyio.CancelScope() as self._scope:
                while not self._stopped and self._step():
                    await self._next()
        except Exception:  # a bug of ours must never take the server down (a trio system task would)
            logger.exception("the stream watcher failed; the stream goes on without it")
        finally:
            self._scope = self._wait = self._sleep = None
            self._child = None
            if self._done is not None:
                self._done.set()

    def _step(self) -> bool:
        """Whether the child has anything to do: a listener, or a deadline soon enough to wait for."""
        if self._listener is not None:
            return True
        if self._target == math.inf:
            return False
        if self._loop is not None and self._target - time.monotonic() > _PARK:
            self._arm(self._target)  # park: the task ends, the timer handle re-spawns it
            return False
        return True

    async def _next(self) -> None:
        now, target = time.monotonic(), self._target
        if target <= now + _SLACK:
            self._target = math.inf  # want() may lower it again while wake() runs
            after = await self._wake(max(now, target))
            if after < self._target:
                self._target = after
            return
        listener = self._listener
        if listener is not None:
            with anyio.CancelScope(deadline=scope_time(self._target)) as self._wait:
                await listener()
                self._listener = None  # it returned on its own: the client left or the app listens
            self._wait = None
        elif self._loop is not None:
            self._sleep = self._loop.create_future()
            self._arm(self._target)
            try:
                await self._sleep
            finally:
                self._sleep = None
        else:
            with anyio.CancelScope(deadline=scope_time(self._target)) as self._wait:
                await anyio.sleep_forever()
            self._wait = None

    # -- asyncio's timer handle ----------------------------------------------------------------------

    def _arm(self, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        if self._loop is not None:  # loop.time() is time.monotonic(): the clock of every deadline here
            self._handle = self._loop.call_at(when, self._ring)

    def _ring(self) -> None:
        self._handle = None
        if self._sleep is not None:
            self._poke()
        elif self._child is None and not self._stopped:
            self._spawn()

    def _poke(self) -> None:
        if self._sleep is not None and not self._sleep.done():
            self._sleep.set_result(None)


def scope_time(when: float) -> float:
    """A ``time.monotonic()`` deadline on the event loop's clock, which cancel scopes use (trio's clock
    has an offset of its own)."""
    return when - time.monotonic() + anyio.current_time() if when != math.inf else math.inf
