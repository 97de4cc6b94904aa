"""The timer half of a responder: one task per stream that serves every deadline (coalescing window,
heartbeat, stall, shutdown), started only once there is one. The decisions are sans-I/O, in
:mod:`.._core.deadlines`; this is the part that sleeps and writes.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from .._core import errors
from .._core.deadlines import Clocks, Due, due, next_deadline
from .._core.errors import ErrorInfo
from .._core.lifecycle import Phase
from .._core.sse import comment
from .gate import SendGate

if TYPE_CHECKING:
    from .._core.pipeline import Pipeline
    from .._settings import StreamingSettings
    from .._telemetry.recorder import StreamTelemetry

_SLACK = 0.001
FINALIZE_SECONDS = 5.0  # a bound on every await in cleanup, so a stuck client cannot hold a worker


class Timed:
    """Mixed into :class:`~.responder.Responder`, which owns the state below."""

    __slots__ = ("_sleep", "_stopping", "_timer_on", "_timer_target")
    settings: StreamingSettings
    pipe: Pipeline | None
    clocks: Clocks
    phase: Phase
    disconnected: bool
    rec: StreamTelemetry | None
    ending: ErrorInfo | None
    _gate: SendGate
    _tg: anyio.abc.TaskGroup | None
    _app_scope: anyio.CancelScope

    def _error_id(self) -> str:
        raise NotImplementedError

    async def _send_held(self, message: dict[str, Any]) -> None:
        raise NotImplementedError

    def _end(self, info: ErrorInfo) -> None:
        raise NotImplementedError

    def _init_timer(self) -> None:
        self._sleep: anyio.CancelScope | None = None  # the timer's long sleep, cancelled to wake it
        self._stopping = False  # a shutdown's hard stop is scheduled
        self._timer_target = math.inf  # what the timer sleeps until (inf: no timer; -inf: napping)
        self._timer_on = False

    def _next_deadline(self) -> float:
        if self.pipe is None:
            return math.inf
        return next_deadline(self.settings, self.pipe, self.clocks)

    def _arm(self) -> None:
        """Have the timer look at the deadlines again: wake it, or start it if there is none yet."""
        if self._timer_on:
            if self._sleep is not None:
                self._sleep.cancel()
        elif self._tg is not None and self.phase is Phase.STREAMING and not self.disconnected:
            self._timer_on = True
            self._tg.start_soon(self._timer)

    async def _timer(self) -> None:
        """Sleep to the next deadline. While tokens flow it naps at most ``coalesce_max_delay`` and needs
        no waking: new text's deadline is never earlier than the end of a nap that began before it
        arrived. Idle, it sleeps long and is woken by cancelling the nap. A timeout that *expires*
        costs ~50 us in anyio (a Cancelled exception); a plain sleep ~10 us, so it never expires one."""
        if self.pipe is None:  # only once a stream started; never otherwise
            return
        nap = self.settings.coalesce_max_delay if self.pipe.coalescer is not None else math.inf
        active_for = max(1.0, 4 * nap) if nap != math.inf else 0.0
        while self.phase is Phase.STREAMING and not self.disconnected:
            now = time.monotonic()
            deadline = self._next_deadline()
            if deadline <= now + _SLACK:  # uvloop timers fire up to ~1 ms early: never re-sleep < 1 ms
                await self._on_deadline(max(now, deadline))
            elif now - self.clocks.last_app < active_for:
                self._timer_target = -math.inf  # napping: the app's sends never need to wake us
                await anyio.sleep(min(deadline - now, nap))
            else:
                self._timer_target = deadline
                with anyio.CancelScope() as self._sleep:
                    await anyio.sleep(deadline - now if deadline != math.inf else 1e9)
                self._sleep = None

    async def _stop_after(self, seconds: float) -> None:
        """The hard stop of a shutdown: past the grace and the bounded cleanup, cancel the response (only
        while the stream is ours: after its final body the app's remaining work is its own)."""
        await anyio.sleep(seconds)
        if self._tg is not None and self.phase in (Phase.STREAMING, Phase.CLOSING, Phase.ENDING):
            self._tg.cancel_scope.cancel()

    async def _on_deadline(self, now: float) -> None:
        if self.pipe is None:  # only once a stream started; never otherwise
            return
        s = self.settings
        what = due(s, self.pipe, self.clocks, now)
        if what is Due.SHUTDOWN:
            self._end(errors.shutdown(self._error_id(), s.shutdown_retry_ms))
        elif what is Due.STALL:
            self._end(errors.timeout(self._error_id(), s.stall_timeout))
        elif what is Due.POSTPONE:
            self.clocks.last_write = now  # inside a huge event on the wire: wait for its end
        elif what is not Due.NOTHING and self._gate.busy:
            # A send is in flight (a slow client holds it up). Never queue behind it, or a stuck client
            # would keep stall and shutdown from firing: a heartbeat is moot, a flush waits a little.
            if what is Due.HEARTBEAT:
                self.clocks.last_write = now
            else:
                with anyio.move_on_after(s.coalesce_max_delay):
                    await self._gate.released().wait()
        elif what is not Due.NOTHING:
            self._gate.busy = True  # taken before the frame is made: nothing can slip in between
            try:
                if self.phase is Phase.STREAMING and not self.disconnected:
                    frame = (
                        b"".join(self.pipe.tick(now)) if what is Due.FLUSH else comment(s.heartbeat_comment)
                    )
                    message = {"type": "http.response.body", "body": frame, "more_body": True}
                    try:
                        await self._send_held(message)
                    except OSError:
                        return  # the client left (ASGI >= 2.4); the app hears it from its own next send
                    self.clocks.last_write = now
                    if self.rec is not None:
                        self.rec.frame(len(frame))
                        if what is Due.HEARTBEAT:
                            self.rec.heartbeat()
            finally:
                self._gate.release()

    def drain(self, grace: float | None = None) -> None:
        """The server is stopping: end this stream with a reconnect hint within the grace period. Past
        it (and the bounded cleanup), everything the response does is cancelled: a client that stopped
        reading cannot hold a deploy. Called from a loop callback (the signal), not from a task."""
        grace = self.settings.shutdown_grace if grace is None else grace
        self.clocks.shutdown_at = min(self.clocks.shutdown_at, time.monotonic() + grace)
        if self._tg is not None and not self._stopping:
            self._stopping = True
            self._tg.start_soon(self._stop_after, grace + FINALIZE_SECONDS)
        self._arm()
