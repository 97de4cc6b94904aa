"""The per-response responder: the thin I/O shell around the sans-I/O :class:`~.._core.pipeline.Pipeline`.

The app runs in the task that called the middleware (so contextvars such as the current span behave as
without us); the only child tasks are the timer, which serves every deadline (coalescing, heartbeat,
stall, shutdown) and is started only once there is a deadline to serve, and, once the request body is
read, a listener for ``http.disconnect``. One lock guards the real ``send``. Bytes go out by awaiting
the real ``send`` inside the app's ``send``: no queue, so back-pressure reaches the app.

A client that leaves (``http.disconnect`` on ``receive``, or ``send`` raising ``OSError``) cancels the
app's scope: its generator stops at its next await and its ``finally`` blocks run; nothing is logged as
an error, because nothing went wrong on the server.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.lowlevel

from .._core import errors, headers
from .._core.deadlines import Clocks
from .._core.errors import ErrorInfo, logger
from .._core.lifecycle import Phase, move, raise_collapsed
from .._core.pipeline import Pipeline
from .._settings import StreamingSettings, effective
from .._telemetry.request_model import BodyPeek
from .disconnect import ClientWatch
from .gate import SendGate
from .timer import FINALIZE_SECONDS, Timed

if TYPE_CHECKING:
    from .._telemetry.recorder import StreamTelemetry
    from .middleware import StreamingMiddleware

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

Message = dict[str, Any]
_LIVE = (Phase.STREAMING, Phase.ENDING)


class Responder(Timed):
    """One HTTP response's state. Made per request by the middleware; never shared."""

    __slots__ = (
        "__weakref__",  # the middleware keeps open streams in a WeakSet, to drain them at shutdown
        "_app_scope",
        "_gate",
        "_late",
        "_peek",
        "_send",
        "_tg",
        "_trailers",
        "_watch",
        "clocks",
        "disconnected",
        "ending",
        "failure",
        "mw",
        "phase",
        "pipe",
        "rec",
        "scope",
        "settings",
        "started_mono",
        "started_ns",
    )

    def __init__(
        self, mw: StreamingMiddleware, scope: MutableMapping[str, Any], receive: Any, send: Any
    ) -> None:
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
        self._watch = ClientWatch(receive, scope, self._client_gone)
        self._peek = BodyPeek()  # what the app reads of its body, for gen_ai.request.model
        self._gate = SendGate()
        self._trailers = False  # the start declared trailers: the server waits for them
        self._late = 0  # writes after the end
        self._init_timer()
        self._app_scope = anyio.CancelScope()
        self._tg: anyio.abc.TaskGroup | None = None

    # -- the host task -------------------------------------------------------------------------------

    async def run(self, app: Any) -> None:
        cancelled = False
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                with self._app_scope:
                    try:
                        await app(self.scope, self.receive, self.send)
                    except Exception as exc:
                        if self.phase not in _LIVE:
                            raise
                        self.failure = exc
                    except anyio.get_cancelled_exc_class():
                        await self._cancelled_from_outside()
                        raise
                tg.cancel_scope.cancel()  # the app is done: stop the timer and the listener
        except anyio.get_cancelled_exc_class():
            cancelled = True
            raise
        except BaseExceptionGroup as group:
            raise_collapsed(group)
        finally:
            self._tg = None
            if self.phase in _LIVE:
                with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
                    await self._finish(cancelled)
            if self.rec is not None:  # ends once; here in case a last write was cut short
                self.rec.end(time.monotonic(), client_disconnected=self.disconnected)
            self.mw.forget(self)

    async def _cancelled_from_outside(self) -> None:
        """The server stopped waiting (uvicorn's ``--timeout-graceful-shutdown``): send the reconnect event
        now, not after unwinding: uvicorn re-raises SIGTERM (ending the process) a few loop turns later."""
        if self.phase is Phase.STREAMING and not self._app_scope.cancel_called:
            with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
                await self._finish(cancelled=True)

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
        error_type = errors.error_type_name(self.failure) if self.failure else info.type if info else None
        await self._last_write(
            b"".join(out), complete=complete, error_type=error_type, exception=self.failure
        )

    async def _last_write(self, data: bytes, *, complete: bool, **end: Any) -> None:
        """The final body. Telemetry ends first: a tracing middleware around us ends its span when it sees
        this message, and ours must end inside it (and end even if this write is cancelled)."""
        if self.rec is not None:
            if data and not self.disconnected:
                self.rec.frame(len(data))
            self.rec.end(time.monotonic(), client_disconnected=self.disconnected, **end)
        if not self.disconnected:
            await self._raw_send({"type": "http.response.body", "body": data, "more_body": not complete})
            if complete and self._trailers and (self.ending or self.failure):
                self._trailers = False  # the app will not send the trailers it declared: the server waits
                await self._raw_send(
                    {"type": "http.response.trailers", "headers": [], "more_trailers": False}
                )

    def _stop_children(self) -> None:
        self._watch.stop()
        if self._sleep is not None:
            self._sleep.cancel()

    def _error_id(self) -> str:
        return errors.new_error_id(self.rec.trace_id if self.rec else None)

    # -- receive: the app's, watched for a disconnect (see disconnect.py) ----------------------------

    async def receive(self) -> Message:
        try:
            message = await self._watch.receive()
        except anyio.get_cancelled_exc_class():
            if self.clocks.shutdown_at != math.inf:  # stopping: this is where Starlette's host task waits
                await self._cancelled_from_outside()
            raise
        self._peek.see(message)
        self._start_listening()  # the app read its body, or stopped listening itself
        return message

    def _start_listening(self) -> None:
        if self._tg is not None and self.phase is Phase.STREAMING and self._watch.can_listen():
            self._watch.listen(self._tg)

    def _client_gone(self) -> None:
        if not self.disconnected:
            self.disconnected = True
            self._app_scope.cancel()
            self._stop_children()

    # -- send: what the app writes -------------------------------------------------------------------

    async def send(self, message: Message) -> None:
        if self.phase is Phase.PASSING:
            await self._send(message)
            return
        kind = message["type"]
        if kind == "http.response.body" and self.phase is Phase.STREAMING:
            await self._body(message)
        elif kind == "http.response.start" and self.phase is Phase.WAITING:
            await self._start(message)
        elif kind == "http.response.start" and self.phase is Phase.STREAMING:
            raise RuntimeError("a second http.response.start: the response already started")
        elif self.phase is Phase.STREAMING:
            if self.pipe is not None:
                await self._write(b"".join(self.pipe.flush()), more=True, now=time.monotonic())
            await self._raw_send(message)  # extensions go through, after what we merged
        elif self.phase is Phase.WAITING:
            await self._send(message)  # e.g. a body before the start: the server decides
        elif kind == "http.response.trailers" and self._trailers:
            self._trailers = bool(message.get("more_trailers", False))
            await self._raw_send(message)
        else:  # the stream is over: late writes go nowhere (said once, unless we ended it)
            if self._late == 0 and self.ending is None and self.failure is None and not self.disconnected:
                logger.warning("the app sent %s after its final body; dropped", kind)
            await self._nowhere()

    async def _start(self, message: Message) -> None:
        settings = effective(self.settings, self.scope)
        if settings is None:  # opted out
            self.phase = move(self.phase, Phase.PASSING)
            await self._send(message)
            return
        self.settings = settings
        kind = headers.stream_kind(message.get("headers", ()))
        if kind is None:
            self.phase = move(self.phase, Phase.PASSING)
            await self._send(message)
            return
        self.phase = move(self.phase, Phase.STREAMING)
        self._trailers = bool(message.get("trailers"))
        if self.settings.telemetry:
            self.rec = self.mw.telemetry.start(
                self.scope,
                start_mono=self.started_mono,
                start_ns=self.started_ns,
                body=self._peek,
                mark_parent=self.settings.mark_parent_span,
            )
        self.pipe = Pipeline(kind, self.settings, self.rec)
        self.mw.track(self)
        await self._raw_send({**message, "headers": headers.stream_headers(message.get("headers", ()))})
        self.clocks.last_write = self.clocks.last_app = time.monotonic()
        if self.scope.get("method") == "HEAD":
            # No body goes out: cancel the app inside this send, before it starts its generator.
            self.phase = move(self.phase, Phase.ENDING)
            self._app_scope.cancel()
            await anyio.lowlevel.checkpoint()
            return
        if self._next_deadline() != math.inf:
            self._arm()  # heartbeat or stall: no timer at all when neither is on
        self._start_listening()

    async def _body(self, message: Message) -> None:
        if self.pipe is None:  # only once a stream started; never otherwise
            return
        body = message.get("body", b"")
        if type(body) is not bytes:
            if not isinstance(body, (bytearray, memoryview)):
                raise TypeError(f"http.response.body 'body' must be bytes, got {type(body).__name__}")
            body = bytes(body)
        now = self.clocks.last_app = time.monotonic()
        out = self.pipe.feed(body, now) if body else []
        if not message.get("more_body", False):
            out.extend(self.pipe.close())
            self.phase = move(self.phase, Phase.ENDED)
            self._stop_children()
            await self._last_write(b"".join(out), complete=True)
            return
        if out:
            await self._write(out[0] if len(out) == 1 else b"".join(out), more=True, now=now)
        deadline = self.pipe.deadline()
        if deadline is not None and deadline < self._timer_target:
            self._arm()

    async def _write(self, data: bytes, *, more: bool, now: float) -> None:
        if not data and more:
            return
        await self._raw_send({"type": "http.response.body", "body": data, "more_body": more})
        self.clocks.last_write = now
        if self.rec is not None and data:
            self.rec.frame(len(data))

    async def _raw_send(self, message: Message) -> None:
        if self.disconnected:
            await self._nowhere()
            return
        gate = self._gate
        if gate.busy:
            await gate.acquire()
        else:
            gate.busy = True
        try:
            await self._send_held(message)
        finally:
            gate.release()

    async def _send_held(self, message: Message) -> None:
        """The real send, with the gate already held."""
        try:
            await self._send(message)
        except OSError:  # how ASGI >= 2.4 servers say the client is gone
            self._client_gone()

    async def _nowhere(self) -> None:
        """A write after the end. The app's cancellation should land at its next await *inside* its
        generator, so its ``finally`` runs now (here, it would wait at a ``yield`` for the GC); only an
        app that awaits nothing but ``send`` gets it here, after a few writes, rather than spin forever."""
        self._late += 1
        if self._late % 16 == 0:
            await anyio.lowlevel.checkpoint()

    def _end(self, info: ErrorInfo) -> None:
        """End the stream from the middleware's side: the app is cancelled, the host sends ``info``."""
        if self.phase is Phase.STREAMING:
            self.ending = info
            self.phase = move(self.phase, Phase.ENDING)
            self._app_scope.cancel()
