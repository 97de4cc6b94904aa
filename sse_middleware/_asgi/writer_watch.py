"""What the watcher asks of a stream's writer: when anything is due (the write in flight's stuck time
included), the merged text whose time has come, whether a write is in flight, and how it is cut. A part of
:class:`~.writer.Writer` (its base class), which holds the state (its slots)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import anyio

from .._core.config import CoreConfig
from .._core.deadlines import Due, due, next_deadline
from .backend import TaskCut
from .watcher import scope_time
from .write_lock import WriterState


class WatchedWrites(WriterState):
    """The watcher's side of :class:`~.writer.Writer`."""

    __slots__ = ()

    if TYPE_CHECKING:

        async def frame(self, data: bytes, now: float, until: float = math.inf) -> bool: ...

    def next_deadline(self, config: CoreConfig) -> float:
        """The next time anything is due on the live stream (inf: nothing), the write in flight's included."""
        return min(next_deadline(config, self.pipe, self.clocks), self.stuck_at())

    def due(self, config: CoreConfig, now: float) -> Due:
        return due(config, self.pipe, self.clocks, now)

    async def flush_due(self, now: float, until: float) -> bool:
        """Merged text whose time has come, written by the watcher between the app's writes. False: it
        did not go out (cut at ``until``, when it may be half on the wire; or the client is gone)."""
        await self.lock.take()  # free: the watcher asked busy first, or waited for it
        try:
            frame = b"".join(self.pipe.tick(now))
            return not frame or await self.frame(frame, now, until)
        finally:
            self.lock.free()

    @property
    def busy(self) -> bool:
        """A write is in flight (a slow client may hold it up)."""
        return self.lock.busy

    async def free_within(self, seconds: float) -> None:
        """Wait for the write in flight to end, ``seconds`` at most."""
        with anyio.move_on_after(seconds):
            await self.lock.freed().wait()

    def postpone(self, now: float) -> None:
        """No heartbeat now (inside a huge event on the wire, or no client to keep alive): count from
        ``now``."""
        self.clocks.last_write = now

    def shutdown(self, at: float) -> None:
        """A shutdown: the stream ends by ``at``; a write nobody watches gives up by then too."""
        self.clocks.shutdown(at)
        scope = self._in_flight
        if scope is not None and not isinstance(scope, TaskCut) and scope.deadline != math.inf:
            scope.deadline = min(scope.deadline, scope_time(self.clocks.shutdown_at))

    # -- the write in flight -------------------------------------------------------------------------------

    def stuck_at(self) -> float:
        """When the write in flight will have taken too long (inf: none in flight, or no timeout)."""
        since = self.sending_since
        return since + self.timeout if since and self.life.connected else math.inf

    def cut(self) -> None:
        """Cut the write in flight, if it runs in the writer's scope (see the module's docstring)."""
        if self._in_flight is not None:
            self._in_flight.cancel()
        self.sending_since = 0.0
