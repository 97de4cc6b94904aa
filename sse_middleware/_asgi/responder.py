"""The per-response responder: the thin I/O shell around the sans-I/O :class:`~.._core.pipeline.Pipeline`.

The app runs in the task that called the middleware (so contextvars such as the current span behave as
without us), with no task group around it. The per-token path is :meth:`Responder.send` ->
:meth:`Responder._body` -> the pipeline -> the real ``send``, top to bottom in this file. A stream's one
helper task (:class:`~.watcher.Watcher`) is started only when a deadline (coalescing window, heartbeat,
stall, shutdown) or a disconnect listener needs it, and calls back :meth:`Responder._wake`. One flag
guards the real ``send``. Bytes go out by awaiting the real ``send`` inside the app's ``send``: no queue,
so back-pressure reaches the app.

The app's time is the app's. The middleware ends the app only while it owns a live stream and either
the client is gone in a way the app cannot see (our own listener read the ``http.disconnect``), or a
stall or shutdown deadline passed. Before the start, on pass-through responses and HEAD, after the final
body (background tasks, dependency cleanup), and whenever the app hears of a disconnect itself (from its
``receive``, or from ``send`` raising ``OSError`` under ASGI >= 2.4), it runs exactly as without us.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from .._core import errors, headers
from .._core.deadlines import FINALIZE_SECONDS, Clocks, Due, due, next_deadline
from .._core.errors import ErrorInfo, logger
from .._core.lifecycle import Phase, move
from .._core.pipeline import Pipeline
from .._core.sse import comment
from .._settings import StreamingSettings, effective
from .._telemetry.request_model import BodyPeek
from .._types import ASGIApp, Message, Receive, Scope, Send
from .disconnect import ClientWatch
from .gate import SendGate
from .watcher import Watcher, scope_time

if TYPE_CHECKING:
    from .._telemetry.recorder import StreamTelemetry
    from .middleware import StreamingMiddleware

_LIVE = (Phase.STREAMING, Phase.ENDING)


class Responder:
    """One HTTP response's state. Made per request by the middleware; never shared."""

    __slots__ = (
        "__weakref__",  # the middleware keeps open streams in a WeakSet, to drain them at shutdown
        "_app_scope",
        "_due_write",
        "_gate",
        "_may_listen",
        "_peek",
        "_send",
        "_trailers",
        "_watch",
        "_watcher",
        "clocks",
        "disconnected",
        "ending",
        "failure",
        "mw",
        "ours",
        "phase",
        "pipe",
        "rec",
        "scope",
        "settings",
        "started_mono",
        "started_ns",
    )

    def __init__(self, mw: StreamingMiddleware, scope: Scope, receive: Receive, send: Send) -> None:
        self.mw = mw
        self.scope = scope
        self.settings: StreamingSettings = mw.settings
        self._send = send
        self.phase = Phase.WAITING
        self.started_mono = time.monotonic()
        self.started_ns = time.time_ns()
        self.pipe: Pipeline | None = None
        self.rec: StreamTelemetry | None = None
        self.clocks = Clocks()
        self.ending: ErrorInfo | None = None  # why the middleware ends the stream, when it does
        self.failure: Exception | None = None
        self.disconnected = False
        self.ours = False  # the middleware ended the stream and cancelled the app: its writes go nowhere
        self._watch = ClientWatch(receive, headers.has_request_body(scope.get("headers", ())))
        self._watcher: Watcher | None = None  # made when a stream starts
        self._due_write: anyio.CancelScope | None = None  # the watcher's write in flight
        self._may_listen = False  # set when a stream starts under a server that reports no disconnect on send
        self._peek: BodyPeek | None = BodyPeek()  # what the app reads of its body: the request's model
        self._gate = SendGate()
        self._trailers = False  # the start declared trailers: the server waits for them
        self._app_scope = anyio.CancelScope()

    # -- the host task -------------------------------------------------------------------------------

    async def run(self, app: ASGIApp) -> None:
        cancelled = False
        escaped: Exception | None = None  # the app's, raised where it would have been without us
        try:
            with self._app_scope:
                try:
                    await app(self.scope, self.receive, self.send)
                except Exception as exc:
                    if self.phase in _LIVE:
                        self.failure = exc
                    else:
                        escaped = exc
                except anyio.get_cancelled_exc_class():
                    await self._cancelled_from_outside()
                    raise
        except anyio.get_cancelled_exc_class():
            cancelled = True
            raise
        finally:
            await self._stop_watcher()  # first: nothing of ours outlives the response, or holds the gate
            if self.phase in _LIVE:
                with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
                    await self._finish(cancelled)
            if self.rec is not None:  # ends once; here in case a last write was cut short
                self.rec.end(time.monotonic(), client_disconnected=self.disconnected)
            self.mw.forget(self)
        if escaped is not None:
            raise escaped

    async def _cancelled_from_outside(self) -> None:
        """The server stopped waiting (uvicorn's ``--timeout-graceful-shutdown``): send the reconnect event
        now, not after unwinding: uvicorn re-raises SIGTERM (ending the process) a few loop turns later."""
        if self.phase is Phase.STREAMING and not self._app_scope.cancel_called:
            if self._watcher is not None:
                self._watcher.stop()  # frees the gate if it was writing; joined later, in run()
            with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
                await self._finish(cancelled=True)

    async def _stop_watcher(self) -> None:
        watcher = self._watcher
        if watcher is not None:
            watcher.stop()
            with anyio.CancelScope(shield=True):
                await watcher.join()

    async def _finish(self, cancelled: bool) -> None:
        """End a stream: flush what was merged, say why it ended, send the final body."""
        if self.pipe is None:  # only once a stream started; never otherwise
            return
        info = self.ending
        if info is None and self.failure is not None:
            info = errors.report(self.failure, self.settings, self._error_id(), self.disconnected)
        elif info is None and cancelled and not self.disconnected:
            # Cancelled from outside (the server stopped waiting for us): tell the client to come back.
            info = errors.shutdown(self._error_id(), self.settings.shutdown_retry_ms)
        out = self.pipe.flush() if info is not None else self.pipe.close()
        complete = True
        if info is not None:
            frame = self.pipe.error_frame(info)
            if frame is None:
                complete = False  # no in-band channel: cut the response so it cannot look complete
                logger.warning(
                    "%s stream cut without its last chunk (%s, error id %s)",
                    self.pipe.kind,
                    info.type,
                    info.id,
                )
            else:
                out.append(frame)
        self.phase = Phase.ENDED
        self.ours = True
        error_type = errors.error_type_name(self.failure) if self.failure else info.type if info else None
        with contextlib.suppress(OSError):  # the client left as we said goodbye (ASGI >= 2.4)
            await self._last_write(
                b"".join(out), complete=complete, error_type=error_type, exception=self.failure
            )

    async def _last_write(self, data: bytes, *, complete: bool, held: bool = False, **end: Any) -> None:
        """The final body. Telemetry ends first: a tracing middleware around us ends its span when it sees
        this message, and ours must end inside it (and end even if this write is cancelled). ``held``:
        the caller holds the gate."""
        if self.rec is not None:
            if data and not self.disconnected:
                self.rec.frame(len(data))
            self.rec.end(time.monotonic(), client_disconnected=self.disconnected, **end)
        if self.disconnected:
            return
        send = self._send_held if held else self._raw_send
        await send({"type": "http.response.body", "body": data, "more_body": not complete})
        if complete and self._trailers and (self.ending or self.failure):
            self._trailers = False  # the app will not send the trailers it declared: the server waits
            await send({"type": "http.response.trailers", "headers": [], "more_trailers": False})

    def _error_id(self) -> str:
        return errors.new_error_id(self.rec.trace_id if self.rec else None)

    # -- receive: the app's, exactly the server's (see disconnect.py) --------------------------------

    async def receive(self) -> Message:
        try:
            message = await self._watch.receive()
        except anyio.get_cancelled_exc_class():
            if self.clocks.shutdown_at != math.inf:  # stopping: this is where Starlette's host task waits
                await self._cancelled_from_outside()
            raise
        if self._peek is not None:
            self._peek.see(message)
        if self.phase is Phase.STREAMING:
            if message["type"] == "http.disconnect":
                self._client_left(cancel_app=False)  # the app heard it: what it does next is its own
            else:
                self._start_listening()  # the app read its body, or stopped listening itself
        return message

    def _start_listening(self) -> None:
        watcher = self._watcher
        if (
            self._may_listen
            and watcher is not None
            and not watcher.listening
            and self.phase is Phase.STREAMING
            and self._watch.can_listen()
        ):
            watcher.listen(self._listen)

    async def _listen(self) -> None:
        """Run by the watcher while the app does not listen itself: one message from ``receive``."""
        if await self._watch.listen():  # the app did not hear it (unless it came back meanwhile): end it
            self._client_left(cancel_app=not self._watch.app_listening)

    def _client_left(self, *, cancel_app: bool) -> None:
        """The client is gone. The stream ends here; the app is cancelled only if it cannot know."""
        if self.disconnected:
            return
        self.disconnected = True
        if self.phase is Phase.CLOSING:  # the app's last write failed (ASGI >= 2.4): it hears it there
            self.phase = move(self.phase, Phase.ENDED)
            self.mw.forget(self)
        if self.phase is not Phase.STREAMING:
            return
        if self._watcher is not None:
            self._watcher.stop()
        if cancel_app:
            self.phase = move(self.phase, Phase.ENDING)
            self.ours = True
            self._app_scope.cancel()  # the host finishes the stream's bookkeeping
        else:
            self.phase = move(self.phase, Phase.ENDED)
            if self.rec is not None:
                self.rec.end(time.monotonic(), client_disconnected=True)
            self.mw.forget(self)

    # -- send: what the app writes -------------------------------------------------------------------

    async def send(self, message: Message) -> None:
        phase = self.phase
        if phase is Phase.PASSING:
            await self._send(message)
            return
        kind = message["type"]
        if phase is Phase.STREAMING:
            if kind == "http.response.body":
                await self._body(message)
            elif kind == "http.response.start":
                raise RuntimeError("a second http.response.start: the response already started")
            else:
                await self._extension(message)
        elif phase is Phase.WAITING:
            if kind == "http.response.start":
                await self._start(message)
            else:
                await self._send(message)  # e.g. a body before the start: the server decides
        elif self.ours:
            await self._nowhere()  # we ended the stream and cancelled the app: it stops at its next await
        else:  # after its own final body, or a disconnect it heard: the server's business, as without us
            if self.disconnected:
                # uvicorn's send to a gone client returns without a checkpoint: a generator that awaits
                # nothing else would spin forever, deaf to its own (Starlette's) cancellation.
                await anyio.lowlevel.checkpoint()
            await self._send(message)

    async def _start(self, message: Message) -> None:
        settings = effective(self.settings, self.scope)  # a bad override: the app's error, before the start
        kind = headers.stream_kind(message.get("headers", ())) if settings is not None else None
        if kind is None or settings is None:
            self._peek = None
            self.phase = move(self.phase, Phase.PASSING)
            await self._send(message)
            return
        start = {**message, "headers": headers.stream_headers(message.get("headers", ()))}
        if self.scope.get("method") == "HEAD":  # no body will go out: the headers GET would have, no more
            self._peek = None
            self.phase = move(self.phase, Phase.PASSING)
            await self._send(start)
            return
        # The server may refuse the start (a bad header): that is the app's exception, as without us.
        await self._send(start)
        self.settings = settings
        self.phase = move(self.phase, Phase.STREAMING)
        self._trailers = bool(message.get("trailers"))
        if settings.telemetry:
            self.rec = self.mw.telemetry.start(
                self.scope,
                start_mono=self.started_mono,
                start_ns=self.started_ns,
                body=self._peek,
                mark_parent=settings.mark_parent_span,
            )
        self._peek = None  # read once the stream starts (or never, without telemetry): let it go
        pipe = self.pipe = Pipeline(
            kind,
            settings,
            self.rec,
            headers=message.get("headers", ()),
            relay=self.mw.relays.for_route(self.scope),
        )
        self.clocks.last_write = self.clocks.last_app = time.monotonic()
        self._watcher = Watcher(self._wake)
        self.mw.track(self)
        if self._watch.gone:
            self._client_left(cancel_app=False)  # the app heard it before it started: its business
            return
        self._watcher.want(next_deadline(settings, pipe, self.clocks))  # none: no task, no timer
        self._may_listen = not _reports_disconnect_on_send(self.scope)
        self._start_listening()

    async def _body(self, message: Message) -> None:
        if self.pipe is None:  # only once a stream started; never otherwise
            return
        body = message.get("body", b"")
        if type(body) is not bytes:
            if not isinstance(body, (bytearray, memoryview)):
                raise TypeError(f"http.response.body 'body' must be bytes, got {type(body).__name__}")
            body = bytes(body)
        # The gate is taken before the frame is made, not just around the send: a flush of the watcher's
        # that waited for a slow client must not overtake text this send hands the pipeline.
        gate, pipe = self._gate, self.pipe
        if gate.busy:
            await gate.acquire()
        else:
            gate.busy = True
        try:
            now = self.clocks.last_app = time.monotonic()
            out = pipe.feed(body, now) if body else []
            if not message.get("more_body", False):
                out.extend(pipe.close())
                self.phase = move(self.phase, Phase.CLOSING)  # still ours: a shutdown's hard stop may cut it
                await self._last_write(b"".join(out), complete=True, held=True)
                if self.phase is Phase.CLOSING:
                    self.phase = move(self.phase, Phase.ENDED)
                    self.mw.forget(self)
                    if self._watcher is not None:
                        self._watcher.stop()
                return
            if out:
                data = out[0] if len(out) == 1 else b"".join(out)
                await self._send_held({"type": "http.response.body", "body": data, "more_body": True})
                self.clocks.last_write = now
                if self.rec is not None:
                    self.rec.frame(len(data))
        finally:
            gate.release()
        deadline = pipe.deadline()
        if deadline is not None and self._watcher is not None:
            self._watcher.want(deadline)  # merged text waits: make sure someone wakes for it

    async def _extension(self, message: Message) -> None:
        """An extension message (trailers, zero-copy send, ...): after what we merged, untouched."""
        await self._gate.take()
        try:
            if self.pipe is not None:
                merged = b"".join(self.pipe.flush())
                if merged:
                    await self._send_held({"type": "http.response.body", "body": merged, "more_body": True})
                    self.clocks.last_write = time.monotonic()
                    if self.rec is not None:
                        self.rec.frame(len(merged))
            await self._send_held(message)
        finally:
            self._gate.release()

    async def _raw_send(self, message: Message) -> None:
        if self.disconnected:
            await self._nowhere()
            return
        await self._gate.take()
        try:
            await self._send_held(message)
        finally:
            self._gate.release()

    async def _send_held(self, message: Message) -> None:
        """The real send, with the gate already held. An ``OSError`` is how ASGI >= 2.4 servers say the
        client is gone: the stream ends, and the error reaches the app as it would without us."""
        try:
            await self._send(message)
        except OSError:
            self._client_left(cancel_app=False)
            raise

    async def _nowhere(self) -> None:
        """A write after the middleware ended the stream and cancelled the app: a checkpoint, so that an
        app that awaits nothing but ``send`` (an async generator over a list) stops here."""
        await anyio.lowlevel.checkpoint()

    def _end(self, info: ErrorInfo) -> None:
        """End the stream from the middleware's side: the app is cancelled, the host sends ``info``."""
        if self.phase is Phase.STREAMING:
            self.ending = info
            self.phase = move(self.phase, Phase.ENDING)
            self.ours = True
            self._app_scope.cancel()


    # -- the watcher's callback: whatever is due ---------------------------------------------------

    async def _wake(self, now: float) -> float:
        """Do what is due at ``now``; return the next deadline (inf: none)."""
        pipe, clocks, s = self.pipe, self.clocks, self.settings
        if self.phase in (Phase.CLOSING, Phase.ENDING):  # only the hard stop is left to watch
            if now < clocks.stop_at:
                return clocks.stop_at
            self._app_scope.cancel()  # a client that stopped reading cannot hold a deploy
            return math.inf
        if self.phase is not Phase.STREAMING or pipe is None:
            return math.inf
        what = due(s, pipe, clocks, now)
        if what is Due.HARD_STOP:
            self._app_scope.cancel()
            return math.inf
        if what is Due.SHUTDOWN:
            self._end(errors.shutdown(self._error_id(), s.shutdown_retry_ms))
        elif what is Due.STALL:
            self._end(errors.timeout(self._error_id(), s.stall_timeout))
        elif what is Due.POSTPONE:
            clocks.last_write = now  # inside a huge event on the wire: wait for its end
        elif what is not Due.NOTHING and self._gate.busy:
            # A send is in flight (a slow client holds it up). Never queue behind it, or a stuck client
            # would keep stall and shutdown from firing: a heartbeat is moot, a flush waits a little.
            if what is Due.HEARTBEAT:
                clocks.last_write = now
            else:
                with anyio.move_on_after(s.coalesce_max_delay):
                    await self._gate.released().wait()
        elif what is not Due.NOTHING:
            await self._write_due(what, now)
        if self.phase is not Phase.STREAMING:
            return clocks.stop_at
        return next_deadline(s, pipe, clocks)

    async def _write_due(self, what: Due, now: float) -> None:
        """A flush of merged text or a heartbeat, written by the watcher between the app's writes."""
        if self.pipe is None:  # only once a stream started; never otherwise
            return
        gate = self._gate
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
            with anyio.CancelScope(deadline=scope_time(self.clocks.shutdown_at)) as scope:
                self._due_write = scope
                try:
                    await self._send_held({"type": "http.response.body", "body": frame, "more_body": True})
                except OSError:
                    return  # the client left (ASGI >= 2.4); the app hears it from its own next send
                except Exception as exc:  # the server refused our write: the stream failed, not the app
                    self.failure = exc
                    self._end(errors.report(exc, self.settings, self._error_id(), self.disconnected))
                    return
                finally:
                    self._due_write = None
            if scope.cancelled_caught:
                return
            self.clocks.last_write = now
            if self.rec is not None:
                self.rec.frame(len(frame))
                if what is Due.HEARTBEAT:
                    self.rec.heartbeat()
        finally:
            gate.release()

    def drain(self, grace: float | None = None) -> None:
        """The server is stopping: end this stream with a reconnect hint within the grace period; past it
        (and the bounded cleanup), everything the response does is cancelled, so a client that stopped
        reading cannot hold a deploy. Called from a loop callback (the signal), not from a task."""
        grace = self.settings.shutdown_grace if grace is None else grace
        self.clocks.shutdown(time.monotonic() + grace)
        if self._due_write is not None:
            self._due_write.deadline = scope_time(self.clocks.shutdown_at)
        if self._watcher is not None:
            self._watcher.want(self.clocks.shutdown_at)


def _reports_disconnect_on_send(scope: Scope) -> bool:
    """ASGI >= 2.4: ``send`` raises ``OSError`` once the client is gone, so the app hears it there (and
    Starlette does not listen on ``receive``): no listener of ours, nothing for us to cancel."""
    spec = scope.get("asgi", {}).get("spec_version", "2.0")
    return tuple(int(part) for part in spec.split(".")[:2] if part.isdigit()) >= (2, 4)
