"""What a stream does when its watcher wakes it: a flush of merged text, a heartbeat, the stall timeout,
a shutdown's reconnect hint and hard stop, a resumable stream's handover and abandonment.

A base of :class:`~.stream.Stream` (which owns the state used here and the per-token path): the watcher
calls :meth:`StreamTimers.peek` synchronously on each timer tick, and :meth:`StreamTimers.wake` only when
something is due.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import anyio

from .._core import errors
from .._core.deadlines import Due, due, next_deadline
from .._core.errors import logger
from .._core.lifecycle import Phase, move
from .._core.sse import comment
from .watcher import scope_time

if TYPE_CHECKING:
    from .._core.deadlines import Clocks
    from .._core.errors import ErrorInfo
    from .._core.pipeline import Pipeline
    from .._resume.log import StreamLog
    from .._settings import StreamingSettings
    from .._telemetry.recorder import StreamTelemetry
    from .._types import Message, Send
    from .gate import SendGate
    from .responder import Responder
    from .watcher import Watcher

BODY = "http.response.body"


class StreamTimers:
    __slots__ = ("_due_write", "_handover", "cut")

    # The stream's state and methods this side uses (see stream.py).
    r: Responder
    settings: StreamingSettings
    pipe: Pipeline
    rec: StreamTelemetry | None
    clocks: Clocks
    gate: SendGate
    watcher: Watcher
    log: StreamLog | None
    detached: bool
    disconnected: bool
    _send: Send
    _due_write: anyio.CancelScope | None  # the watcher's write in flight
    _handover: bool  # a shutdown asked a resumable stream to send its client away
    cut: bool  # ended by us without a word to anyone (abandoned): the log is not complete

    if TYPE_CHECKING:

        async def deliver(self, data: bytes, now: float, message: Message | None = None) -> None: ...
        def end(self, info: ErrorInfo) -> None: ...
        def error_id(self) -> str: ...
        def client_left(self, *, cancel_app: bool) -> bool: ...
        def _detach(self) -> None: ...

    def peek(self, now: float) -> float:
        """The next deadline, with nothing done (``<= now``: something is due)."""
        r = self.r
        if r.phase is Phase.STREAMING:
            if self._handover:
                return now
            deadline = next_deadline(self.settings, self.pipe, self.clocks)
            return min(deadline, self._abandoned_at()) if self.detached else deadline
        if r.phase in (Phase.CLOSING, Phase.ENDING):
            return self.clocks.stop_at
        return math.inf

    async def wake(self, now: float) -> float:
        """Do what is due at ``now``; return the next deadline (inf: none)."""
        pipe, clocks, s, r = self.pipe, self.clocks, self.settings, self.r
        if r.phase in (Phase.CLOSING, Phase.ENDING):  # only the hard stop is left to watch
            if now < clocks.stop_at:
                return clocks.stop_at
            r.cancel_app()  # a client that stopped reading cannot hold a deploy
            return math.inf
        if r.phase is not Phase.STREAMING:
            return math.inf
        if self._handover:
            await self._hand_over(now)
        what = due(s, pipe, clocks, now)
        if what is Due.HARD_STOP:
            r.cancel_app()
            return math.inf
        if what is Due.SHUTDOWN:
            self.end(errors.shutdown(self.error_id(), s.shutdown_retry_ms))
        elif what is Due.STALL:
            self.end(errors.timeout(self.error_id(), s.stall_timeout))
        elif self.detached and now >= self._abandoned_at():
            logger.debug("a detached resumable stream nobody follows: ended")
            self.cut = True
            r.phase = move(r.phase, Phase.ENDING)
            r.ours = True
            r.cancel_app()
        elif what is Due.POSTPONE or (what is Due.HEARTBEAT and self.detached):
            clocks.last_write = now  # inside a huge event on the wire, or no client to keep alive
        elif what is not Due.NOTHING and self.gate.busy:
            # A send is in flight (a slow client holds it up). Never queue behind it, or a stuck client
            # would keep stall and shutdown from firing: a heartbeat is moot, a flush waits a little.
            if what is Due.HEARTBEAT:
                clocks.last_write = now
            else:
                with anyio.move_on_after(s.coalesce_max_delay):
                    await self.gate.released().wait()
        elif what is not Due.NOTHING:
            await self._write_due(what, now)
        if r.phase is not Phase.STREAMING:
            return clocks.stop_at
        deadline = next_deadline(s, pipe, clocks)
        return min(deadline, self._abandoned_at()) if self.detached else deadline

    def _abandoned_at(self) -> float:
        log = self.log
        return math.inf if log is None else log.unwatched_since + self.settings.resume_abandon_after

    async def _write_due(self, what: Due, now: float) -> None:
        """A flush of merged text or a heartbeat, written by the watcher between the app's writes."""
        gate = self.gate
        gate.busy = True  # taken before the frame is made: nothing can slip in between
        try:
            if what is Due.FLUSH:
                frame = b"".join(self.pipe.tick(now))
            else:
                frame = comment(self.settings.heartbeat_comment)
            if not frame:
                return
            # A client that stopped reading may hold this write: bounded by the shutdown (drain() moves
            # it), so that the watcher is free to end the stream when the grace is over.
            with anyio.CancelScope(deadline=scope_time(self.clocks.shutdown_at)) as self._due_write:
                try:
                    if what is Due.FLUSH:
                        await self.deliver(frame, now)
                    else:
                        await self._send({"type": BODY, "body": frame, "more_body": True})
                        self.clocks.last_write = now
                        if self.rec is not None:
                            self.rec.frame(len(frame))
                            self.rec.heartbeat()
                except OSError:
                    self.client_left(cancel_app=False)  # ASGI >= 2.4: the app hears it at its next send
                except Exception as exc:  # the server refused our write: the stream failed, not the app
                    self.r.failure = exc
                    self.end(errors.report(exc, self.settings, self.error_id(), self.disconnected))
            self._due_write = None
        finally:
            gate.release()

    # -- shutdown --------------------------------------------------------------------------------------

    def drain(self, grace: float) -> None:
        """The server is stopping: end this stream with a reconnect hint within the grace period; past it
        (and the bounded cleanup), everything the response does is cancelled, so a client that stopped
        reading cannot hold a deploy. A resumable stream hands its client over at once instead, and its app
        produces into the log for the grace. Called from a loop callback (the signal), not from a task."""
        self.clocks.shutdown(time.monotonic() + grace)
        if self._due_write is not None:
            self._due_write.deadline = scope_time(self.clocks.shutdown_at)
        if self.log is not None and not self.detached:
            self._handover = True
            self.watcher.want(-math.inf)
        self.watcher.want(self.clocks.shutdown_at)

    async def _hand_over(self, now: float) -> None:
        """Send a resumable stream's live client away with a reconnect hint (not logged: followers must not
        replay it) and a clean end; the app goes on producing into the log."""
        self._handover = False
        await self.gate.take()
        try:
            if self.detached or self.disconnected:
                return
            hint = b"retry: %d\n\n" % self.settings.shutdown_retry_ms
            merged = b"".join(self.pipe.flush())
            if merged:
                await self.deliver(merged, now)
            if not self.disconnected:
                await self._send({"type": BODY, "body": hint, "more_body": False})
        except OSError:
            pass
        finally:
            self.gate.release()
        self._detach()
