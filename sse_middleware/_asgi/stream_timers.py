"""What a stream does when its watcher wakes it: a flush of merged text, a heartbeat, the stall timeout,
a shutdown's reconnect hint and hard stop, a resumable stream's handover and abandonment.

One per :class:`~.stream.Stream`, which owns the state and the per-token path: the stream's watcher calls
:meth:`StreamTimers.peek` synchronously on each timer tick, and :meth:`StreamTimers.wake` only when
something is due.
"""

from __future__ import annotations

import math
import time
import weakref
from typing import TYPE_CHECKING

import anyio

from .._core import errors
from .._core.deadlines import Due, due, next_deadline
from .._core.errors import logger
from .._core.lifecycle import Phase
from .._core.sse import comment, retry_only
from .watcher import scope_time

if TYPE_CHECKING:
    from .stream import Stream

BODY = "http.response.body"


class StreamTimers:
    __slots__ = ("_due_write", "_handover", "_stream")

    def __init__(self, stream: Stream) -> None:
        # Weak: the stream holds these timers and its watcher (whose callbacks are these methods), so a
        # strong link back would make every stream a reference cycle, freed only by the cyclic GC.
        self._stream = weakref.ref(stream)
        self._due_write: anyio.CancelScope | None = None  # the watcher's write in flight
        self._handover = False  # a shutdown asked a resumable stream to send its client away

    @property
    def stream(self) -> Stream:
        stream = self._stream()
        if stream is None:  # never: only the stream's own watcher and the stream itself call these
            raise ReferenceError("the stream of these timers is gone")
        return stream

    def peek(self, now: float) -> float:
        """The next deadline, with nothing done (``<= now``: something is due)."""
        stream = self.stream
        phase = stream.life.phase
        if phase is Phase.STREAMING:
            if self._handover:
                return now
            return self._next(stream)
        if phase is Phase.CLOSING:
            return min(stream.clocks.stop_at, stream.stuck_at())
        if phase is Phase.ENDING:
            return stream.clocks.stop_at
        return math.inf

    def _next(self, stream: Stream) -> float:
        deadline = min(next_deadline(stream.config, stream.pipe, stream.clocks), stream.stuck_at())
        return min(deadline, self._abandoned_at()) if stream.detached else deadline

    async def wake(self, now: float) -> float:
        """Do what is due at ``now``; return the next deadline (inf: none)."""
        stream = self.stream
        life, clocks, settings = stream.life, stream.clocks, stream.settings
        if life.phase is Phase.CLOSING and now >= stream.stuck_at():
            stream.client_stuck()  # the app's final body is stuck: its write is cut
        if life.phase in (Phase.CLOSING, Phase.ENDING):  # only the hard stop is left to watch
            if now < clocks.stop_at:
                return self.peek(now)
            life.hard_stop()  # a client that stopped reading cannot hold a deploy
            return math.inf
        if life.phase is not Phase.STREAMING:
            return math.inf
        if self._handover:
            await self._hand_over(now)
        if now >= stream.stuck_at():  # the app's write in flight took too long: the client stopped reading
            stream.client_stuck()
            return clocks.stop_at if life.phase is not Phase.STREAMING else self._next(stream)
        what = due(stream.config, stream.pipe, clocks, now)
        if what is Due.HARD_STOP:
            life.hard_stop()
            return math.inf
        if what is Due.SHUTDOWN:
            stream.end(errors.shutdown(stream.error_id(), settings.shutdown_retry_ms))
        elif what is Due.STALL:
            stream.end(errors.timeout(stream.error_id(), settings.stall_timeout))
        elif stream.detached and now >= self._abandoned_at():
            logger.debug("a detached resumable stream nobody follows: ended")
            stream.end(None)
        elif what is Due.POSTPONE or (what is Due.HEARTBEAT and stream.detached):
            clocks.last_write = now  # inside a huge event on the wire, or no client to keep alive
        elif what is not Due.NOTHING and stream.gate.busy:
            # A send is in flight (a slow client holds it up). Never queue behind it, or a stuck client
            # would keep stall and shutdown from firing: a heartbeat is moot, a flush waits a little.
            if what is Due.HEARTBEAT:
                clocks.last_write = now
            else:
                with anyio.move_on_after(settings.coalesce_max_delay):
                    await stream.gate.released().wait()
        elif what is not Due.NOTHING:
            await self._write_due(what, now)
        if life.phase is not Phase.STREAMING:
            return clocks.stop_at
        return self._next(stream)

    def _abandoned_at(self) -> float:
        log = self.stream.log
        return math.inf if log is None else log.unwatched_since + self.stream.settings.resume_abandon_after

    async def _write_due(self, what: Due, now: float) -> None:
        """A flush of merged text or a heartbeat, written by the watcher between the app's writes."""
        stream = self.stream
        gate = stream.gate
        gate.busy = True  # taken before the frame is made: nothing can slip in between
        try:
            flush = what is Due.FLUSH
            frame = b"".join(stream.pipe.tick(now)) if flush else comment(stream.settings.heartbeat_comment)
            if not frame:
                return
            # A client that stopped reading may hold this write: bounded by send_timeout and by the
            # shutdown (drain() moves it), so that the watcher is free to end the stream in time.
            timeout = stream.settings.send_timeout
            stuck_at = now + timeout if timeout else math.inf
            deadline = min(stuck_at, stream.clocks.shutdown_at)
            with anyio.CancelScope(deadline=scope_time(deadline)) as self._due_write:
                try:
                    if flush:
                        await stream.deliver(frame, now)
                    else:
                        await stream.server_send({"type": BODY, "body": frame, "more_body": True})
                        stream.clocks.last_write = now
                        if stream.telemetry is not None:
                            stream.telemetry.frame(len(frame))
                            stream.telemetry.heartbeat()
                except OSError:
                    stream.client_left(cancel_app=False)  # ASGI >= 2.4: the app hears it at its next send
                except Exception as exc:  # the server refused our write: the stream failed, not the app
                    stream.fail(exc)
            cut, self._due_write = self._due_write, None
            if cut.cancelled_caught and time.monotonic() >= stuck_at:
                stream.client_stuck()
        finally:
            gate.release()

    # -- shutdown --------------------------------------------------------------------------------------

    def drain(self, grace: float) -> None:
        """The server is stopping: end this stream with a reconnect hint within the grace period; past it
        (and the bounded cleanup), everything the response does is cancelled, so a client that stopped
        reading cannot hold a deploy. A resumable stream hands its client over at once instead, and its app
        produces into the log for the grace. Called from a loop callback (the signal), not from a task."""
        stream = self.stream
        stream.clocks.shutdown(time.monotonic() + grace)
        if self._due_write is not None:
            self._due_write.deadline = min(self._due_write.deadline, scope_time(stream.clocks.shutdown_at))
        if stream.log is not None and not stream.detached:
            self._handover = True
            stream.watcher.want(-math.inf)
        stream.watcher.want(stream.clocks.shutdown_at)

    async def _hand_over(self, now: float) -> None:
        """Send a resumable stream's live client away with a reconnect hint (not logged: followers must not
        replay it) and a clean end; the app goes on producing into the log."""
        self._handover = False
        stream = self.stream
        await stream.gate.take()
        try:
            if stream.detached or stream.disconnected:
                return
            with anyio.move_on_after(stream.settings.send_timeout or None) as timer:
                merged = b"".join(stream.pipe.flush())
                if merged:
                    await stream.deliver(merged, now)
                if not stream.disconnected:
                    hint = retry_only(stream.settings.shutdown_retry_ms)
                    await stream.server_send({"type": BODY, "body": hint, "more_body": False})
            if timer.cancelled_caught:
                stream.client_stuck()  # detaches: the client resumes elsewhere, if it ever reads again
        except OSError:
            pass
        finally:
            stream.gate.release()
        stream.detach()
