"""The one writer to a stream's client (wsproto's single ``send``): the only caller of the server's ``send``
once a response is a stream, and the per-token path that feeds it.

:class:`Writer` owns what every write shares: the write lock (nothing is ever written inside a half-sent
message), the write in flight (``sending_since``) and the one way it is cut (:meth:`Writer.cut`, a cancel
scope around it), when it is stuck (:meth:`Writer.stuck_at`, which the watcher reads), the last write's
time (``clocks.last_write``), the resume log every frame goes through first, the compressor every frame
goes through last (``compress="auto"``), and the telemetry's frame count. Every frame leaves through one
point, :meth:`Writer.put`. Everything else that writes (the timers' flush and heartbeat, the guards'
approved text, the stream's last frame) asks it through a named method.

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
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import anyio

from .._core.deadlines import Clocks
from .._core.lifecycle import Lifecycle, Phase
from .._core.pipeline import Pipeline
from .._types import Message, Send
from .backend import TaskCut, cancel_scope
from .last_write import LastWrites
from .watcher import Watcher, scope_time
from .write_lock import Ends, WriteLock, body_bytes, body_frame, compressing
from .writer_watch import WatchedWrites

if TYPE_CHECKING:
    from .._core.compress import Compressor
    from .._resume.log import StreamLog
    from .._telemetry.recorder import StreamTelemetry

__all__ = ["LAST_FRAME_BYTES", "Writer", "body_bytes"]

_INF: Final = math.inf

LAST_FRAME_BYTES: Final = 4096
"""How much of its last frame a stream keeps through a silence (the ending looks at its last event): the
frame is kept whole while the app writes (no slice per token) and cut to its tail by the first heartbeat,
so a large frame is not held through the silence after it. An end marker longer than this, sent before
a silence, is then not recognized: the ending adds its event, as before."""


class Writer(WatchedWrites, LastWrites):
    """``ends``: the stream (a weak proxy). ``trailers``: the start declared trailers (the server waits
    for them)."""

    __slots__ = ()  # the state is the slots of WriterState, which every part shares

    def __init__(
        self,
        send: Send,
        life: Lifecycle,
        pipe: Pipeline,
        telemetry: StreamTelemetry | None,
        watcher: Watcher,
        ends: Ends,
        send_timeout: float,
        heartbeat: float,
        trailers: bool,
        log: StreamLog | None,
        encoder: Compressor | None = None,
    ) -> None:
        # Compressed, every frame is compressed on its way to the server's send (put's), so a stream that
        # is not compressed pays no test per frame.
        self._send = send if encoder is None else compressing(send, encoder)
        self._ends = ends
        self.life = life
        self.pipe = pipe
        self.telemetry = telemetry
        self.watcher = watcher
        self.log = log
        self.lock = WriteLock()
        now = time.monotonic()
        self.clocks = Clocks(now, now)  # last_write, last_app
        self.timeout = send_timeout  # 0: off
        self._trailers = trailers
        # Whether each write must tell the watcher when it will be stuck. Not while heartbeats are no
        # further apart than the timeout: the watcher then wakes by last_write + heartbeat_interval,
        # no later than a write in flight is stuck, and from there it looks at stuck_at() itself.
        self._tell_stuck_at = bool(send_timeout) and not 0 < heartbeat <= send_timeout
        self.sending_since = 0.0  # when the write in flight began (0.0, a time no clock shows: none)
        self._in_flight: anyio.CancelScope | TaskCut | None = None  # the write cut() cuts
        self.index: Any = None  # called after each frame the log takes, until it returns True
        self.last_frame = b""  # the last frame the client has (or the log, detached); no heartbeat

    # -- the per-token path ---------------------------------------------------------------------------------

    def body(self, message: Message) -> Awaitable[Any]:
        """The app's body, on a stream without guards: into the pipeline, and what comes out to the
        client. Not a coroutine function: it feeds the pipeline at once and hands back the one awaitable
        that finishes the job (a frame's :meth:`put`, which frees the lock), so a frame costs one
        coroutine, the write's. The lock is taken before the frame is made, not just around the send: a
        flush of the watcher's that waited for a slow client must not overtake text this send hands the
        pipeline."""
        try:  # a subscript, not get(): no method call per token (both keys are optional in ASGI)
            body = message["body"]
        except KeyError:
            body = b""
        if type(body) is not bytes:
            body = body_bytes(body)
        lock, pipe = self.lock, self.pipe
        if lock.busy:
            return self._when_free(message)
        lock.busy = True
        try:
            now = self.clocks.last_app = time.monotonic()
            out = pipe.feed(body, now) if body else []
            if pipe.fault:  # the output can no longer be what its request declared: it ends here
                return self._invalid(out, now)
            try:
                more = message["more_body"]
            except KeyError:
                more = False
            if not more:
                out.extend(pipe.close())
                return self.final(b"".join(out))  # it frees the lock
            coalescer = pipe.coalescer
            if coalescer is not None and coalescer.due < self.watcher.target:  # inf: nothing is held
                self.watcher.want(coalescer.due)  # merged text waits: make sure someone wakes for it
            if out:
                data = out[0] if len(out) == 1 else b"".join(out)
                if self.log is not None:
                    return self._logged(data, now)
                self.last_frame = data
                # The app's own message when it is unchanged: no new dict per token.
                return self.put(message if data is message["body"] else body_frame(data), now, len(data))
        except BaseException:
            lock.free()
            raise
        lock.busy = False  # taken and freed with no await between: nobody can be waiting for it
        return _nothing()

    async def _when_free(self, message: Message) -> None:
        """The app's body when a write of the watcher's or the guards' holds the lock."""
        lock = self.lock
        while lock.busy:
            await lock.freed().wait()
        await self.body(message)

    async def _logged(self, data: bytes, now: float) -> None:
        try:
            await self.frame(data, now)
        finally:
            self.lock.free()

    async def _invalid(self, out: list[bytes], now: float) -> None:
        try:
            if out:
                await self.frame(b"".join(out), now)
            self._ends.end(self._ends.invalid_output())
        finally:
            self.lock.free()

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
            data = b"".join(close())
        except BaseException:
            self.lock.free()
            raise
        await self.final(data)  # it frees the lock

    def wake_by(self, when: float) -> None:
        """Make sure the watcher looks at the stream by ``when`` (inf: nothing to wait for)."""
        self.watcher.want(when)

    # -- one frame, with the lock held ---------------------------------------------------------------------

    async def frame(self, data: bytes, now: float, until: float = math.inf) -> bool:
        """One frame to the client, through the log first when resumable. ``until``: when to give the
        write up, for a writer nobody watches (the watcher's own writes); inf: the watcher cuts it. Whether
        it was written (a detached stream's frame is only logged)."""
        self.last_frame = data
        log = self.log
        if log is not None:
            data = log.append(data)
            if self.index is not None and self.index():
                self.index = None
            if self.life.detached:
                return False
        cut = cancel_scope(scope_time(until))
        return await self.put(body_frame(data), now, len(data), until, cut) is True

    # -- the one frame-out point ---------------------------------------------------------------------------

    async def put(
        self,
        message: Message,
        now: float,
        size: int = -1,
        until: float = _INF,
        cut: anyio.CancelScope | TaskCut | None = None,
    ) -> bool | None:
        """Every write of a stream's, and the only awaited call of the server's ``send``: the write in
        flight (``sending_since``, and telling the watcher when it will be stuck), the one place a write
        is cut (inside ``cut``, which :meth:`cut` cancels; its deadline is ``until``), the client gone
        (``OSError``, ASGI >= 2.4), and the bookkeeping of a frame of ``size`` bytes that went out (the
        last write's time, the telemetry's count; -1: none, the clock stays). True: written; False: cut,
        or only logged (detached); None: the client was gone.

        Without ``cut``: the app's own write on the per-token path, whose lock :meth:`body` took and this
        frees. It has no cut of its own (a scope per token costs more than the rest of the path): the
        lifecycle cancels the app to cut it (see :meth:`_given_up`)."""
        if self.timeout:
            self.sending_since = now
            if self._tell_stuck_at and until == _INF:
                self.watcher.want(now + self.timeout)
        try:
            if cut is None:
                await self._send(message)
            else:
                with cut:
                    self._in_flight = cut
                    await self._send(message)
                if cut.cancelled_caught:
                    return False
        except OSError:  # how ASGI >= 2.4 servers say the client is gone
            if not self._ends.client_left(cancel_app=False):
                raise  # the app hears it, as it would without us
            return None
        except BaseException as exc:
            if cut is None and self._given_up(exc):
                return None
            raise
        finally:
            self.sending_since = 0.0
            if cut is None:
                lock = self.lock
                if lock.waiting is None:
                    lock.busy = False
                else:
                    lock.free()
            else:
                self._in_flight = None
        if cut is not None and self.life.detached:
            return False
        if size >= 0:
            self.clocks.last_write = now
            if self.telemetry is not None:
                self.telemetry.frame(size)
        return True

    async def heartbeat(self, data: bytes, now: float, until: float) -> bool:
        """A comment that keeps the connection alive (never logged: it is not part of the stream), by
        the watcher. False: it did not go out (as :meth:`flush_due`)."""
        await self.lock.take()
        if len(self.last_frame) > LAST_FRAME_BYTES:  # a silence: see LAST_FRAME_BYTES
            self.last_frame = self.last_frame[-LAST_FRAME_BYTES:]
        try:
            cut = cancel_scope(scope_time(until))
            written = await self.put(body_frame(data), now, len(data), until, cut) is True
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
                await self.put(message, now, -1, math.inf, cancel_scope())
        finally:
            self.lock.free()

    def _given_up(self, exc: BaseException) -> bool:
        """Whether ``exc`` is how a write in the app's own task was cut: the stream gave its client up
        and ended (the lifecycle cancelled the app, which is how such a write is cut). Such a write
        returns, as one the writer's scope cut does; the app's scope stays cancelled, so the app's next
        checkpoint is cancelled, in the app's own code. That matters: an async generator suspended at
        its ``yield`` while the cancellation passes its caller is closed only when collected, and
        anyio's task group keeps that cancellation in a reference cycle (its ``task_done`` callback holds
        the exception whose traceback holds the callback's frame), so a ``StreamingResponse``'s
        ``finally`` (an upstream's ``async with``) would wait for the cyclic GC."""
        life = self.life
        return life.ours and not life.connected and isinstance(exc, anyio.get_cancelled_exc_class())


async def _nothing() -> None:
    """What the app awaits for a body that wrote nothing (its text waits to be merged)."""
