"""The per-response responder: the thin I/O shell around the sans-I/O :class:`~.._core.pipeline.Pipeline`.

The app runs in the task that called the middleware (so contextvars such as the current span behave as
without us); the only child tasks are the timer, which serves every deadline (coalescing, heartbeat,
stall, shutdown) and is started only once there is a deadline to serve, and a listener for
``http.disconnect`` while the app does not listen itself. One flag guards the real ``send``. Bytes go out
by awaiting the real ``send`` inside the app's ``send``: no queue, so back-pressure reaches the app.

The app's time is the app's. The middleware ends the app only while it owns a live stream and either
the client is gone in a way the app cannot see (our own listener read the ``http.disconnect``), or a
stall or shutdown deadline passed. Before the start, on pass-through responses and HEAD, after the final
body (background tasks, dependency cleanup), and whenever the app hears of a disconnect itself (from its
``receive``, or from ``send`` raising ``OSError`` under ASGI >= 2.4), it runs exactly as without us.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
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
from .._types import ASGIApp, Message, Receive, Scope, Send
from .disconnect import ClientWatch
from .gate import SendGate
from .timer import FINALIZE_SECONDS, Timed

if TYPE_CHECKING:
    from .._telemetry.recorder import StreamTelemetry
    from .middleware import StreamingMiddleware

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

_LIVE = (Phase.STREAMING, Phase.ENDING)


class Responder(Timed):
    """One HTTP response's state. Made per request by the middleware; never shared."""

    __slots__ = (
        "__weakref__",  # the middleware keeps open streams in a WeakSet, to drain them at shutdown
        "_app_scope",
        "_gate",
        "_listen_scope",
        "_may_listen",
        "_send",
        "_tg",
        "_trailers",
        "_watch",
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
        self._listen_scope: anyio.CancelScope | None = None
        self._may_listen = False  # set when a stream starts under a server that reports no disconnect on send
        self._gate = SendGate()
        self._trailers = False  # the start declared trailers: the server waits for them
        self._init_timer()
        self._app_scope = anyio.CancelScope()
        self._tg: anyio.abc.TaskGroup | None = None

    # -- the host task -------------------------------------------------------------------------------

    async def run(self, app: ASGIApp) -> None:
        cancelled = False
        escaped: Exception | None = None  # the app's, raised where it would have been without us
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                with self._app_scope:
                    try:
                        await app(self.scope, self.receive, self.send)
                    except Exception as exc:
                        if self.phase in _LIVE:
                            self.failure = exc
                        else:  # not through the task group, which would wrap or copy it
                            escaped = exc
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
        if escaped is not None:
            raise escaped

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
        self.ours = True
        error_type = errors.error_type_name(self.failure) if self.failure else info.type if info else None
        with contextlib.suppress(OSError):  # the client left as we said goodbye (ASGI >= 2.4)
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
        if self._listen_scope is not None:
            self._listen_scope.cancel()
        if self._sleep is not None:
            self._sleep.cancel()

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
        if self.phase is Phase.STREAMING:
            if message["type"] == "http.disconnect":
                self._client_left(cancel_app=False)  # the app heard it: what it does next is its own
            else:
                self._start_listening()  # the app read its body, or stopped listening itself
        return message

    def _start_listening(self) -> None:
        if (
            self._may_listen
            and self._tg is not None
            and self._listen_scope is None
            and self._watch.can_listen()
        ):
            self._listen_scope = anyio.CancelScope()
            self._tg.start_soon(self._listen, self._listen_scope)

    async def _listen(self, scope: anyio.CancelScope) -> None:
        gone = False
        with scope:
            gone = await self._watch.listen()
        self._listen_scope = None
        if gone:  # the app did not hear it (unless it came back to receive() meanwhile): end it
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
        self._stop_children()
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
            else:  # extensions go through, after what we merged
                if self.pipe is not None:
                    await self._write(b"".join(self.pipe.flush()), more=True, now=time.monotonic())
                await self._raw_send(message)
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
            self.phase = move(self.phase, Phase.PASSING)
            await self._send(message)
            return
        start = {**message, "headers": headers.stream_headers(message.get("headers", ()))}
        if self.scope.get("method") == "HEAD":  # no body will go out: the headers GET would have, no more
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
                self.scope, start_mono=self.started_mono, start_ns=self.started_ns
            )
        self.pipe = Pipeline(kind, settings, self.rec)
        self.mw.track(self)
        self.clocks.last_write = self.clocks.last_app = time.monotonic()
        if self._watch.gone:
            self._client_left(cancel_app=False)  # the app heard it before it started: its business
            return
        if self._next_deadline() != math.inf:
            self._arm()  # heartbeat or stall: no timer at all when neither is on
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
        now = self.clocks.last_app = time.monotonic()
        out = self.pipe.feed(body, now) if body else []
        if not message.get("more_body", False):
            out.extend(self.pipe.close())
            self.phase = move(self.phase, Phase.CLOSING)  # still ours: a shutdown's hard stop may cut it
            self._stop_children()
            await self._last_write(b"".join(out), complete=True)
            if self.phase is Phase.CLOSING:
                self.phase = move(self.phase, Phase.ENDED)
                self.mw.forget(self)
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


def _reports_disconnect_on_send(scope: Scope) -> bool:
    """ASGI >= 2.4: ``send`` raises ``OSError`` once the client is gone, so the app hears it there (and
    Starlette does not listen on ``receive``): no listener of ours, nothing for us to cancel."""
    spec = scope.get("asgi", {}).get("spec_version", "2.0")
    return tuple(int(part) for part in spec.split(".")[:2] if part.isdigit()) >= (2, 4)
