"""The per-request responder: the request's lifecycle, around the app, for every HTTP request.

The app runs in the task that called the middleware (so contextvars such as the current span behave as
without us), with no task group around it. The responder decides at ``http.response.start`` whether the
response is a stream; if it is, a :class:`~.stream.Stream` takes every body from then on (the per-token
path is in that module). Everything else passes through after that one check.

The app's time is the app's. The middleware ends the app only while it owns a live stream and either
the client is gone in a way the app cannot see (our own listener read the ``http.disconnect``), or a
stall or shutdown deadline passed. Before the start, on pass-through responses and HEAD, after the final
body (background tasks, dependency cleanup), and whenever the app hears of a disconnect itself (from its
``receive``, or from ``send`` raising ``OSError`` under ASGI >= 2.4), it runs exactly as without us.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Final

import anyio
import anyio.lowlevel

from .._core import chat, headers
from .._core.deadlines import next_deadline
from .._core.guarded import GuardedPipeline
from .._core.jsoncheck.request import DeclaredSchemas, declared_schemas
from .._core.lifecycle import LIVE, Lifecycle, Phase
from .._core.output_check import OutputCheck
from .._core.pipeline import Pipeline
from .._settings import StreamingSettings, effective
from .._telemetry.request_model import BodyPeek
from .._types import ASGIApp, Message, Receive, Scope, Send
from .disconnect import ClientWatch
from .guards import GuardRunner, request_guards
from .stream import Stream

if TYPE_CHECKING:
    from .middleware import StreamingMiddleware


class Responder:
    """One HTTP response's state. Made per request by the middleware; never shared."""

    __slots__ = (
        "__weakref__",  # the middleware keeps open streams in a WeakSet, to drain them at shutdown
        "_app_scope",
        "_peek",
        "_send",
        "client_watch",
        "life",
        "middleware",
        "scope",
        "settings",
        "started_mono",
        "started_ns",
        "stream",
    )

    def __init__(self, middleware: StreamingMiddleware, scope: Scope, receive: Receive, send: Send) -> None:
        self.middleware = middleware
        self.scope = scope
        self.settings: StreamingSettings = middleware.settings
        self._send = send
        self.started_mono = time.monotonic()
        self.started_ns = time.time_ns()
        self.stream: Stream | None = None  # made when the response turns out to be a stream
        self.client_watch = ClientWatch(receive, headers.has_request_body(scope.get("headers", ())))
        self._peek: BodyPeek | None = BodyPeek()  # what the app reads of its body: the request's model
        self._app_scope = anyio.CancelScope()
        self.life = Lifecycle(self._app_scope.cancel)

    # -- the host task -------------------------------------------------------------------------------

    async def run(self, app: ASGIApp) -> None:
        cancelled = False
        failure: Exception | None = None  # the app's, after the start: the stream reports it
        escaped: Exception | None = None  # the app's, raised where it would have been without us
        try:
            with self._app_scope:
                try:
                    await app(self.scope, self.receive, self.send)
                except Exception as exc:
                    if self.life.phase in LIVE:
                        failure = exc
                    else:
                        escaped = exc
                except anyio.get_cancelled_exc_class():
                    await self._cancelled_from_outside()
                    raise
        except anyio.get_cancelled_exc_class():
            cancelled = True
            raise
        finally:
            if self.stream is not None:
                await self.stream.aclose(cancelled, failure)
        if escaped is not None:
            raise escaped

    async def _cancelled_from_outside(self) -> None:
        if self.stream is not None and not self._app_scope.cancel_called:
            await self.stream.interrupted(None)

    def drain(self, grace: float | None = None) -> None:
        if self.stream is not None:
            self.stream.drain(self.settings.shutdown_grace if grace is None else grace)

    # -- receive: the app's, exactly the server's (see disconnect.py) --------------------------------

    async def receive(self) -> Message:
        try:
            message = await self.client_watch.receive()
        except anyio.get_cancelled_exc_class():
            stream = self.stream
            if stream is not None and stream.stopping:
                await self._cancelled_from_outside()  # stopping: this is where Starlette's host task waits
            raise
        if self._peek is not None:
            self._peek.see(message)
        stream = self.stream
        if stream is not None and self.life.phase is Phase.STREAMING:
            if message["type"] == "http.disconnect":
                stream.client_left(cancel_app=False)  # the app heard it: what it does next is its own
            else:
                stream.listen_if_needed()  # the app read its body, or stopped listening itself
        return message

    # -- send: what the app writes -------------------------------------------------------------------

    def send(self, message: Message) -> Awaitable[None]:
        """The app's ``send``. Not a coroutine function itself: it hands back the awaitable that does
        the work (the server's own ``send`` when passing through, the stream's per-token path), so each
        message costs one coroutine less."""
        phase = self.life.phase
        stream = self.stream
        if phase is _STREAMING and stream is not None:
            kind = message["type"]
            if kind == "http.response.body":
                return stream.body(message)
            if kind == "http.response.start":
                return _raise(RuntimeError("a second http.response.start: the response already started"))
            return stream.extension(message)
        if phase is _PASSING:
            return self._send(message)
        return self._send_otherwise(message, phase, stream)

    async def _send_otherwise(self, message: Message, phase: Phase, stream: Stream | None) -> None:
        kind = message["type"]
        if phase is Phase.WAITING:
            if kind == "http.response.start":
                await self._start(message)
            else:
                await self._send(message)  # e.g. a body before the start: the server decides
        elif self.life.ours:
            # We ended the stream and cancelled the app: its writes go nowhere, and each is a checkpoint,
            # so that an app that awaits nothing but send (an async generator over a list) stops here.
            await anyio.lowlevel.checkpoint()
        else:  # after its own final body, or a disconnect it heard: the server's business, as without us
            if stream is not None and stream.disconnected:
                # uvicorn's send to a gone client returns without a checkpoint: a generator that awaits
                # nothing else would spin forever, deaf to its own (Starlette's) cancellation.
                await anyio.lowlevel.checkpoint()
            await self._send(message)

    async def _start(self, message: Message) -> None:
        extra = request_guards(self.scope)  # not a setting: taken out before the overrides are read
        settings = effective(self.settings, self.scope)  # a bad override: the app's error, before the start
        kind = headers.stream_kind(message.get("headers", ())) if settings is not None else None
        if kind is None or settings is None:
            self._peek = None
            self.life.pass_through()
            await self._send(message)
            return
        start = {**message, "headers": headers.stream_headers(message.get("headers", ()))}
        self._peek, peek = None, self._peek
        chat_body = None
        if (
            settings.resume
            and kind == headers.SSE
            and self.scope.get("method") == "POST"
            and peek is not None
        ):
            chat_body = peek.seen()  # before the telemetry takes the peek: the chat id, for the AI SDK
        if self.scope.get("method") == "HEAD":  # no body will go out: the headers GET would have, no more
            self.life.pass_through()
            await self._send(start)
            return
        # The server may refuse the start (a bad header): that is the app's exception, as without us.
        await self._send(start)
        self.settings = settings
        check = _output_check(settings, peek) if settings.validate_json and kind != headers.BYTES else None
        telemetry = None
        if settings.telemetry:
            telemetry = self.middleware.telemetry.start(
                self.scope,
                start_mono=self.started_mono,
                start_ns=self.started_ns,
                body=peek,
                mark_parent=settings.mark_parent_span,
            )
        core = self.middleware.core if settings is self.middleware.settings else settings.core()
        guards = (*self.middleware.guards, *extra)
        relay = self.middleware.relays.for_route(self.scope)
        app_headers = message.get("headers", ())
        guarded = (
            GuardedPipeline(
                kind,
                core,
                telemetry,
                hold=settings.guard_mode == "hold",
                scope=self.scope,
                headers=app_headers,
                relay=relay,
                check=check,
            )
            if guards
            else None
        )
        pipe = guarded or Pipeline(kind, core, telemetry, headers=app_headers, relay=relay, check=check)
        stream = self.stream = Stream(
            self.life,
            settings,
            pipe,
            telemetry,
            self._send,
            self.client_watch,
            trailers=bool(message.get("trailers")),
            forget=functools.partial(self.middleware.forget, self),
            may_listen=not _reports_disconnect_on_send(self.scope),
        )
        if guarded is not None:
            stream.guards = GuardRunner(stream, guarded, guards)
        self.life.stream(stream.release)
        if settings.resume and kind == headers.SSE:
            # The span is made now: the log links it.
            span = telemetry.span_context() if telemetry is not None else None
            stream.log = await self.middleware.resume.open(self.scope, settings, start["headers"], span)
            if stream.log is not None:
                stream.hide_disconnects()
                if chat_body:
                    path = chat.chat_path(self.scope.get("raw_path") or self.scope["path"].encode())
                    stream.chat(path, self.middleware.resume.identity(self.scope), chat_body)
        self.middleware.track(self)
        if self.client_watch.gone:
            stream.client_left(cancel_app=False)  # the app heard it before it started: its business
            return
        stream.watcher.want(next_deadline(pipe.config, pipe, stream.clocks))  # none: no task, no timer
        stream.listen_if_needed()


_STREAMING: Final = Phase.STREAMING  # a module global: per message, one look-up less than the enum's
_PASSING: Final = Phase.PASSING


async def _raise(exc: Exception) -> None:
    """``exc`` raised where the app awaits its ``send``, as from a coroutine function."""
    raise exc


def _output_check(settings: StreamingSettings, peek: BodyPeek | None) -> OutputCheck | None:
    """What the request declared its output must be (or the schema given per request); None: no check."""
    if settings.json_schema is not None:
        declared = DeclaredSchemas(content=settings.json_schema)
    else:
        declared = declared_schemas(peek.document() if peek is not None else None)
    return OutputCheck(declared) if declared else None


def _reports_disconnect_on_send(scope: Scope) -> bool:
    """ASGI >= 2.4: ``send`` raises ``OSError`` once the client is gone, so the app hears it there (and
    Starlette does not listen on ``receive``): no listener of ours, nothing for us to cancel."""
    return _spec_at_least_2_4(scope.get("asgi", {}).get("spec_version", "2.0"))


@functools.lru_cache(maxsize=16)
def _spec_at_least_2_4(spec: str) -> bool:
    return tuple(int(part) for part in spec.split(".")[:2] if part.isdigit()) >= (2, 4)
