"""The one writer to a stream's client (wsproto's single ``send``): the only caller of the server's ``send``
once a response is a stream, and the per-token path that feeds it.

:class:`Writer` owns what every write shares: the write lock (nothing is ever written inside a half-sent
message), the write in flight (``sending_since``) and the one way it is cut (:meth:`Writer.cut`, a cancel
scope around it), when it is stuck (:meth:`Writer.stuck_at`, which the watcher reads), the last write's
time (``clocks.last_write``), the resume log every frame goes through first, and the telemetry's frame
count. Everything else that writes (the timers' flush and heartbeat, the guards' approved text, the
stream's last frame) asks it through a named method.

The writer is *the client side* of a stream: it outlives nothing, but it knows nothing of the app's run
either (the app's run ends through :class:`Ends`, the narrow interface the stream gives it), so a second
run of the app could feed the same writer.

A write in the app's own task (its tokens, the hot path) is not wrapped in a scope of its own: a scope per
token costs more than the rest of the path. When such a write is stuck, the stream ends and the lifecycle
cancels the app, which cuts it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Protocol

import anyio

from .._core.config import CoreConfig
from .._core.deadlines import FINALIZE_SECONDS, Clocks, Due, due, next_deadline
from .._core.errors import ErrorInfo, logger
from .._core.lifecycle import Lifecycle, Phase
from .._core.pipeline import Pipeline
from .._types import Message, Send
from .watcher import Watcher, scope_time

if TYPE_CHECKING:
    from .._resume.log import StreamLog
    from .._telemetry.recorder import StreamTelemetry

BODY: Final = "http.response.body"


class Ends(Protocol):
    """What the writer may ask of the stream it writes for: how the app's run takes what happened."""

    def client_left(self, *, cancel_app: bool) -> bool: ...

    def end(self, info: ErrorInfo | None) -> None: ...

    def invalid_output(self) -> ErrorInfo: ...


class WriteLock:
    """The one lock around the server's ``send``. A flag, not ``anyio.Lock``: the app's own sends (nearly
    all of them) find it free and pay two attribute writes, where ``anyio.Lock`` costs microseconds per
    token even with ``fast_acquire``. The watcher's and the guards' writes can find it taken; the
    watcher never queues behind a write that a slow client holds up (see :mod:`.stream_timers`)."""

    __slots__ = ("busy", "waiting")

    def __init__(self) -> None:
        self.busy = False
        self.waiting: anyio.Event | None = None  # set when the lock is freed, if someone waits for it

    async def take(self) -> None:
        """Take the lock, without an await when it is free (the per-token path inlines this)."""
        while self.busy:
            await self.freed().wait()
        self.busy = True

    def free(self) -> None:
        """Free the lock (the per-token path inlines this when nobody is ``waiting``)."""
        self.busy = False
        if self.waiting is not None:
            self.waiting.set()
            self.waiting = None

    def freed(self) -> anyio.Event:
        """An event set when the write in progress ends."""
        if self.waiting is None:
            self.waiting = anyio.Event()
        return self.waiting


class Writer:
    """``ends``: the stream (a weak proxy). ``trailers``: the start declared trailers (the server waits
    for them)."""

    __slots__ = (
        "_ends",
        "_in_flight",
        "_send",
        "_tell_stuck_at",
        "_trailers",
        "clocks",
        "index",
        "life",
        "lock",
        "log",
        "pipe",
        "sending_since",
        "telemetry",
        "timeout",
        "watcher",
    )

    def __init__(
        self,
        send: Send,
        life: Lifecycle,
        pipe: Pipeline,
        telemetry: StreamTelemetry | None,
        watcher: Watcher,
        ends: Ends,
        *,
        send_timeout: float,
        heartbeat: float,
        trailers: bool,
        log: StreamLog | None,
    ) -> None:
        self._send = send
        self._ends = ends
        self.life = life
        self.pipe = pipe
        self.telemetry = telemetry
        self.watcher = watcher
        self.log = log
        self.lock = WriteLock()
        self.clocks = Clocks()
        self.clocks.last_write = self.clocks.last_app = time.monotonic()
        self.timeout = send_timeout  # 0: off
        self._trailers = trailers
        # Whether each write must tell the watcher when it will be stuck. Not while heartbeats are no
        # further apart than the timeout: the watcher then wakes by last_write + heartbeat_interval,
        # no later than a write in flight is stuck, and from there it looks at stuck_at() itself.
        self._tell_stuck_at = bool(send_timeout) and not 0 < heartbeat <= send_timeout
        self.sending_since = math.inf  # when the write in flight began (inf: none)
        self._in_flight: anyio.CancelScope | None = None  # the write cut() cuts
        self.index: Any = None  # called after each frame the log takes, until it returns True

    # -- the per-token path --------------------------------------------------------------------------------

    async def body(self, message: Message) -> None:
        """The app's body, on a stream without guards: into the pipeline, and what comes out to the
        client. The lock is taken before the frame is made, not just around the send: a flush of the
        watcher's that waited for a slow client must not overtake text this send hands the pipeline."""
        body = message.get("body", b"")
        if type(body) is not bytes:
            body = body_bytes(body)
        lock, pipe = self.lock, self.pipe
        if lock.busy:
            await lock.take()
        else:
            lock.busy = True
        try:
            now = self.clocks.last_app = time.monotonic()
            out = pipe.feed(body, now) if body else []
            if pipe.fault:  # the output can no longer be what its request declared: it ends here
                if out:
                    await self.frame(b"".join(out), now)
                self._ends.end(self._ends.invalid_output())
                return
            if not message.get("more_body", False):
                out.extend(pipe.close())
                await self.final(b"".join(out))
                return
            if out:
                data = out[0] if len(out) == 1 else b"".join(out)
                if self.log is not None:
                    await self.frame(data, now)
                else:  # frame() without a log, inlined: one coroutine less per token (docs/benchmarks.md)
                    if self.timeout:
                        self.sending_since = now
                        if self._tell_stuck_at:
                            self.watcher.want(now + self.timeout)
                    try:  # the app's own message when it is unchanged: no new dict per token
                        await self._send(message if data is message["body"] else _body(data))
                    except OSError:  # how ASGI >= 2.4 servers say the client is gone
                        if not self._ends.client_left(cancel_app=False):
                            raise  # the app hears it, as it would without us
                        return
                    finally:
                        self.sending_since = math.inf
                    self.clocks.last_write = now
                    if self.telemetry is not None:
                        self.telemetry.frame(len(data))
        finally:
            if lock.waiting is None:
                lock.busy = False
            else:
                lock.free()
        coalescer = pipe.coalescer
        if coalescer is not None and coalescer.due < self.watcher.target:  # inf: nothing is held
            self.watcher.want(coalescer.due)  # merged text waits: make sure someone wakes for it

    async def fed(self, body: bytes) -> None:
        """A guarded stream's body into its pipeline, and what the gate lets out at once to the client."""
        await self.lock.take()
        try:
            now = self.clocks.last_app = time.monotonic()
            out = self.pipe.feed(body, now) if body else []
            if out:
                await self.frame(b"".join(out), now)
        finally:
            self.lock.free()

    async def released(self, frames: Callable[[float], list[bytes]]) -> None:
        """Frames the guards approved (``frames(now)`` makes them, with the lock held)."""
        await self.lock.take()
        try:
            if self.life.phase is Phase.STREAMING:
                now = time.monotonic()
                out = frames(now)
                if out:
                    await self.frame(b"".join(out), now)
        finally:
            self.lock.free()

    async def end_of_body(self, close: Callable[[], list[bytes]]) -> None:
        """A guarded stream's final body: what ``close()`` lets out, once every final check passed."""
        await self.lock.take()
        try:
            await self.final(b"".join(close()))
        finally:
            self.lock.free()

    def wake_by(self, when: float | None) -> None:
        """Make sure the watcher looks at the stream by ``when`` (None or inf: nothing to wait for)."""
        if when is not None:
            self.watcher.want(when)

    # -- one frame, with the lock held ---------------------------------------------------------------------

    async def frame(self, data: bytes, now: float, until: float = math.inf) -> bool:
        """One frame to the client, through the log first when resumable. ``until``: when to give the
        write up, for a writer nobody watches (the watcher's own writes); inf: the watcher cuts it. Whether
        it was written (a detached stream's frame is only logged)."""
        log = self.log
        if log is not None:
            data = log.append(data)
            if self.index is not None and self.index():
                self.index = None
            if self.life.detached:
                return False
        return await self._write(_body(data), now, until, len(data))

    async def _write(self, message: Message, now: float, until: float, size: int | None) -> bool:
        """The one way a write is made cuttable: inside the scope :meth:`cut` cancels, its deadline
        ``until`` (inf: the watcher looks at :meth:`stuck_at` and cuts it). Whether it completed.
        ``size``: the frame's, for the telemetry (None: no frame of the stream's, the clock stays)."""
        if self.timeout:
            self.sending_since = now
            if until == math.inf and self._tell_stuck_at:
                self.watcher.want(now + self.timeout)
        try:
            with anyio.CancelScope(deadline=scope_time(until)) as scope:
                self._in_flight = scope
                await self._send(message)
        except OSError:  # how ASGI >= 2.4 servers say the client is gone
            if not self._ends.client_left(cancel_app=False):
                raise  # the app hears it, as it would without us
            return False
        finally:
            self.sending_since = math.inf
            self._in_flight = None
        if scope.cancelled_caught or self.life.detached:
            return False
        if size is not None:
            self.clocks.last_write = now
            if self.telemetry is not None:
                self.telemetry.frame(size)
        return True

    async def heartbeat(self, data: bytes, now: float, until: float) -> bool:
        """A comment that keeps the connection alive (never logged: it is not part of the stream), by
        the watcher. False: it did not go out (as :meth:`flush_due`)."""
        await self.lock.take()
        try:
            written = await self._write(_body(data), now, until, len(data))
        finally:
            self.lock.free()
        if written and self.telemetry is not None:
            self.telemetry.heartbeat()
        return written

    async def extension(self, message: Message) -> None:
        """An extension message (trailers, zero-copy send, ...): after what was merged, untouched."""
        await self.lock.take()
        try:
            now = time.monotonic()
            merged = b"".join(self.pipe.flush())
            if merged:
                await self.frame(merged, now)
            if not self.life.detached:
                await self._write(message, now, math.inf, None)
        finally:
            self.lock.free()

    async def goodbye(self, hint: bytes, now: float) -> bool | None:
        """A resumable stream's live client sent away (at a shutdown): what was merged, then ``hint`` as
        the response's clean end (not logged: followers must not replay it), both within
        ``send_timeout``. None: the client was gone already; else whether the client was stuck."""
        await self.lock.take()
        try:
            if not self.life.connected:
                return None
            until = now + self.timeout if self.timeout else math.inf
            merged = b"".join(self.pipe.flush())
            if merged and not await self.frame(merged, now, until):
                return time.monotonic() >= until
            if self.life.connected:
                end = {"type": BODY, "body": hint, "more_body": False}
                return not await self._last([end], now, until, watched=False)
            return False
        except OSError:  # the client left as we said goodbye (ASGI >= 2.4)
            return False
        finally:
            self.lock.free()

    def untouched(self, message: Message) -> Any:
        """A message of the app's after its stream is over (after its own final body, or a disconnect it
        heard): the server's business, as without us."""
        return self._send(message)

    # -- what the watcher asks -----------------------------------------------------------------------------

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

    def postpone(self, now: float) -> None:
        """No heartbeat now (inside a huge event on the wire, or no client to keep alive): count from
        ``now``."""
        self.clocks.last_write = now

    def shutdown(self, at: float) -> None:
        """A shutdown: the stream ends by ``at``; a write nobody watches gives up by then too."""
        self.clocks.shutdown(at)
        scope = self._in_flight
        if scope is not None and scope.deadline != math.inf:
            scope.deadline = min(scope.deadline, scope_time(self.clocks.shutdown_at))

    # -- the write in flight -------------------------------------------------------------------------------

    def stuck_at(self) -> float:
        """When the write in flight will have taken too long (inf: none in flight, or no timeout)."""
        since = self.sending_since
        return since + self.timeout if since != math.inf and self.life.connected else math.inf

    def cut(self) -> None:
        """Cut the write in flight, if it runs in the writer's scope (see the module's docstring)."""
        if self._in_flight is not None:
            self._in_flight.cancel()
        self.sending_since = math.inf

    def say_stuck(self, what: str, resumable: bool) -> None:
        """One log line and a span attribute for a write that took longer than ``send_timeout``. The
        server closes the connection when the response ends without its last write."""
        logger.warning(
            "the client stopped reading: %s took over send_timeout=%gs; %s",
            what,
            self.timeout,
            "detached (the stream goes on into its log)" if resumable else "it is given up",
        )
        if self.telemetry is not None:
            self.telemetry.mark("send_timeout")

    # -- the last write ------------------------------------------------------------------------------------

    async def final(self, data: bytes) -> None:
        """The app's final body, with the lock held. Still ours while it is written: a shutdown's hard
        stop may cut it when a client that stopped reading holds it."""
        life = self.life
        life.closing()
        try:
            await self.last(data, complete=True)
        except OSError:
            if not self._ends.client_left(cancel_app=False):
                raise
        if life.phase is Phase.CLOSING:  # not yet closed by a disconnect seen while it was written
            life.closed()

    async def last(self, data: bytes, *, complete: bool, **end: Any) -> None:
        """The final body, with the lock held. Telemetry ends first: a tracing middleware around us ends
        its span when it sees this message, and ours must end inside it (and end even if this write is
        cancelled). A resumable stream's log gets the frame, then its end marker."""
        log, life = self.log, self.life
        if log is not None and data:
            data = log.append(data)
        check = self.pipe.check
        if check is not None and check.unreadable is not None:  # said once, at the stream's end
            logger.warning("output check off for a part of this stream: %s", check.unreadable)
            if self.telemetry is not None:
                self.telemetry.note("sse_middleware.output_check.unreadable", check.unreadable)
        if self.telemetry is not None:
            if data and life.connected:
                self.telemetry.frame(len(data))
            self.telemetry.end(time.monotonic(), client_disconnected=not life.connected, **end)
        try:
            if life.connected:
                # While the watcher runs (the app's final body) it cuts a stuck write; after it stopped
                # (the host's teardown) the write keeps a deadline of its own.
                timeout, now = self.timeout, time.monotonic()
                watched = life.phase is Phase.CLOSING and self.watcher.running
                until = now + timeout if timeout and not watched else math.inf
                messages: list[Message] = [{"type": BODY, "body": data, "more_body": not complete}]
                if complete and self._trailers and (life.ending or end.get("exception")):
                    self._trailers = False  # the app will not send the trailers it declared
                    messages.append({"type": "http.response.trailers", "headers": [], "more_trailers": False})
                if not await self._last(messages, now, until, watched):
                    self.say_stuck("its last write", False)
                    if life.connected:
                        life.client_left()
        finally:
            self.sending_since = math.inf
            if log is not None:
                self.log = None
                with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
                    await log.close(complete)

    async def _last(self, messages: list[Message], now: float, until: float, watched: bool) -> bool:
        """The last messages in the writer's one scope; False: cut (stuck). An ``OSError`` reaches the
        caller."""
        if self.timeout:
            self.sending_since = now
            if watched:
                self.watcher.want(now + self.timeout)
        try:
            with anyio.CancelScope(deadline=scope_time(until)) as scope:
                self._in_flight = scope
                for message in messages:
                    await self._send(message)
        finally:
            self._in_flight = None
        return not scope.cancelled_caught


def body_bytes(body: object) -> bytes:
    """A body that is not ``bytes``: copied when it is bytes-like, else the app's ``TypeError``."""
    if not isinstance(body, (bytearray, memoryview)):
        raise TypeError(f"http.response.body 'body' must be bytes, got {type(body).__name__}")
    return bytes(body)


def _body(data: bytes) -> Message:
    return {"type": BODY, "body": data, "more_body": True}
