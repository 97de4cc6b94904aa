"""What a stream does when its watcher wakes it: a flush of merged text, a heartbeat, the stall timeout,
a shutdown's reconnect hint and hard stop, a resumable stream's handover and abandonment.

One per :class:`~.stream.Stream`. The watcher calls :meth:`StreamTimers.peek` synchronously on each timer
tick, and :meth:`StreamTimers.wake` only when something is due. The timers write nothing themselves: they
ask the stream's :class:`~.writer.Writer` (flush what is due, a heartbeat, a goodbye), and they end the
stream through :class:`TimerStream`, the narrow interface the stream gives them.
"""

from __future__ import annotations

import math
import time
from typing import Protocol

from .._core import errors
from .._core.config import CoreConfig
from .._core.deadlines import Due
from .._core.errors import ErrorInfo, logger
from .._core.lifecycle import Lifecycle, Phase
from .._core.sse import comment, retry_only
from .._settings import StreamingSettings
from .writer import Writer


class TimerStream(Protocol):
    """What the timers may ask of their stream (a weak proxy of it: the stream holds the timers)."""

    def end(self, info: ErrorInfo | None) -> None: ...

    def abandon(self) -> None: ...

    def stalled(self, now: float) -> None: ...

    def client_stuck(self) -> None: ...

    def detach(self) -> None: ...

    def abandoned_at(self) -> float: ...

    def fail(self, exc: Exception) -> None: ...

    def client_left(self, *, cancel_app: bool) -> bool: ...

    def error_id(self) -> str: ...


class StreamTimers:
    __slots__ = ("_config", "_ends", "_handover", "_settings", "life", "writer")

    def __init__(
        self,
        life: Lifecycle,
        writer: Writer,
        config: CoreConfig,
        settings: StreamingSettings,
        ends: TimerStream,
    ) -> None:
        self.life = life
        self.writer = writer
        self._config = config
        self._settings = settings
        self._ends = ends
        self._handover = False  # a shutdown asked a resumable stream to send its client away

    def peek(self, now: float) -> float:
        """The next deadline, with nothing done (``<= now``: something is due)."""
        phase = self.life.phase
        if phase is Phase.STREAMING:
            if self._handover:
                return now
            return self._next()
        if phase is Phase.CLOSING:
            return min(self.writer.clocks.stop_at, self.writer.stuck_at())
        if phase is Phase.ENDING:
            return self.writer.clocks.stop_at
        return math.inf

    def _next(self) -> float:
        deadline = self.writer.next_deadline(self._config)
        return min(deadline, self._ends.abandoned_at()) if self.life.detached else deadline

    async def wake(self, now: float) -> float:
        """Do what is due at ``now``; return the next deadline (inf: none)."""
        life, writer, ending, settings = self.life, self.writer, self._ends, self._settings
        stop_at = writer.clocks.stop_at
        if life.phase is Phase.CLOSING and now >= writer.stuck_at():
            ending.client_stuck()  # the app's final body is stuck: its write is cut
        if life.phase in (Phase.CLOSING, Phase.ENDING):  # only the hard stop is left to watch
            if now < stop_at:
                return self.peek(now)
            life.hard_stop()  # a client that stopped reading cannot hold a deploy
            return math.inf
        if life.phase is not Phase.STREAMING:
            return math.inf
        if self._handover:
            await self._hand_over(now)
        if now >= writer.stuck_at():  # the app's write in flight took too long: the client stopped reading
            ending.client_stuck()
            return writer.clocks.stop_at if life.phase is not Phase.STREAMING else self._next()
        what = writer.due(self._config, now)
        if what is Due.HARD_STOP:
            life.hard_stop()
            return math.inf
        if what is Due.SHUTDOWN:
            ending.end(errors.shutdown(ending.error_id(), settings.shutdown_retry_ms))
        elif what is Due.STALL:
            ending.stalled(now)
        elif life.detached and now >= ending.abandoned_at():
            logger.debug("a detached resumable stream nobody follows: ended")
            ending.abandon()
        elif what is Due.POSTPONE or (what is Due.HEARTBEAT and life.detached):
            writer.postpone(now)  # inside a huge event on the wire, or no client to keep alive
        elif what is not Due.NOTHING and writer.busy:
            # A write is in flight (a slow client holds it up). Never queue behind it, or a stuck client
            # would keep stall and shutdown from firing: a heartbeat is moot, a flush waits a little.
            if what is Due.HEARTBEAT:
                writer.postpone(now)
            else:
                await writer.free_within(settings.coalesce_max_delay)
        elif what is not Due.NOTHING:
            await self._write_due(what, now)
        if life.phase is not Phase.STREAMING:
            return writer.clocks.stop_at
        return self._next()

    async def _write_due(self, what: Due, now: float) -> None:
        """A flush of merged text or a heartbeat, between the app's writes. A client that stopped reading
        may hold it: the watcher is the writer here, so nobody else can cut it, and the write keeps its
        own deadline (``send_timeout``, and the shutdown's, which drain() moves)."""
        writer = self.writer
        timeout = self._settings.send_timeout
        stuck_at = now + timeout if timeout else math.inf
        until = min(stuck_at, writer.clocks.shutdown_at)
        try:
            if what is Due.FLUSH:
                written = await writer.flush_due(now, until)
            else:
                ids = writer.pipe.ids or (writer.log is not None and writer.log.events > 0)
                beat = comment(self._settings.heartbeat_comment, blank_line=not ids)
                written = await writer.heartbeat(beat, now, until)
        except OSError:
            self._ends.client_left(cancel_app=False)  # ASGI >= 2.4: the app hears it at its next send
            return
        except Exception as exc:  # the server refused our write: the stream failed, not the app
            self._ends.fail(exc)
            return
        if not written and time.monotonic() >= stuck_at:
            self._ends.client_stuck()

    # -- shutdown --------------------------------------------------------------------------------------

    def drain(self, grace: float) -> None:
        """The server is stopping: end this stream with a reconnect hint within the grace period; past it
        (and the bounded cleanup), everything the response does is cancelled, so a client that stopped
        reading cannot hold a deploy. A resumable stream hands its client over at once instead, and its app
        produces into the log for the grace. Called from a loop callback (the signal), not from a task."""
        writer = self.writer
        writer.shutdown(time.monotonic() + grace)
        if writer.log is not None and not self.life.detached:
            self._handover = True
            writer.wake_by(-math.inf)
        writer.wake_by(writer.clocks.shutdown_at)

    async def _hand_over(self, now: float) -> None:
        """Send a resumable stream's live client away with a reconnect hint and a clean end; the app goes
        on producing into the log."""
        self._handover = False
        stuck = await self.writer.goodbye(retry_only(self._settings.shutdown_retry_ms), now)
        if stuck is None:
            return  # the client was gone already
        if stuck:
            self._ends.client_stuck()  # detaches: the client resumes elsewhere, if it ever reads again
        self._ends.detach()
