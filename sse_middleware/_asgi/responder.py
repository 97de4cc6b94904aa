"""The per-request responder: the request's lifecycle, around the app, for every HTTP request.

The app runs in the task that called the middleware (so contextvars such as the current span behave as
without us), with no task group around it. The responder decides at ``http.response.start`` whether the
response is a stream; if it is, :func:`.start.open_stream` builds its :class:`~.stream.Stream`, which
takes every body from then on (the per-token path is :meth:`.writer.Writer.body`). Everything else
passes through after that one check: the server's ``send`` is called here only for a response that is no
stream (and for its start); a stream's writes all go through its writer.

The app's time is the app's. The middleware ends the app only while it owns a live stream and either
the client is gone in a way the app cannot see (our own listener read the ``http.disconnect``), or a
stall or shutdown deadline passed. Before the start, on pass-through responses and HEAD, after the final
body (background tasks, dependency cleanup), and whenever the app hears of a disconnect itself (from its
``receive``, or from ``send`` raising ``OSError`` under ASGI >= 2.4), it runs exactly as without us.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Awaitable, Sequence
from typing import Final

import anyio
import anyio.lowlevel

from .._core import compress, headers
from .._core.deadlines import FINALIZE_SECONDS
from .._core.lifecycle import LIVE, Lifecycle, Phase
from .._core.recovery import GiveUp, Whole
from .._settings import SCOPE_KEY, StreamingSettings, effective
from .._telemetry.request_model import BodyPeek
from .._types import ASGIApp, Message, Receive, Scope, Send
from .backend import cancel_scope, cancelled_class
from .disconnect import ClientWatch
from .guards import Guard, request_guards
from .recovery import Recovering
from .recovery_plan import plan, recoverable_body
from .start import Shared, open_log, open_stream, start_telemetry
from .stream import Stream


class Responder:
    """One HTTP response's state. Made per request by the middleware; never shared."""

    __slots__ = (
        "_peek",
        "_run",
        "_send",
        "client_watch",
        "life",
        "scope",
        "settings",
        "shared",
        "started_mono",
        "started_ns",
        "stream",
    )

    def __init__(self, shared: Shared, scope: Scope, receive: Receive, send: Send) -> None:
        self.shared = shared
        self.scope = scope
        self.settings: StreamingSettings = shared.settings
        self._send = send
        self.started_mono = time.monotonic()
        self.started_ns = time.time_ns()
        self.stream: Stream | None = None  # made when the response turns out to be a stream
        self.client_watch = ClientWatch(receive, headers.has_request_body(scope.get("headers", ())))
        self._peek: BodyPeek | None = BodyPeek()  # what the app reads of its body: the request's model
        self._run = Run()  # the app's current run (a recovered stream has several)
        self.life = Lifecycle(self._run.cancel)

    # -- the host task -------------------------------------------------------------------------------

    async def run(self, app: ASGIApp) -> None:
        cancelled = False
        failure: Exception | None = None  # the app's, after the start: the stream reports it
        escaped: Exception | None = None  # the app's, raised where it would have been without us
        try:
            with self._run.scope:
                try:
                    await app(self.scope, self.receive, self.send)
                except Exception as exc:
                    if self.life.phase in LIVE:
                        failure = exc
                    else:
                        escaped = exc
                except cancelled_class():
                    await self._cancelled_from_outside()
                    raise
            recovering = self.stream.recovering if self.stream is not None else None
            if recovering is not None:
                failure = await self._recover(app, recovering, failure)
        except cancelled_class():
            cancelled = True
            raise
        finally:
            if self.stream is not None:
                await self.stream.aclose(cancelled, failure)
        if escaped is not None:
            raise escaped

    async def _recover(
        self, app: ASGIApp, recovering: Recovering, failure: Exception | None
    ) -> Exception | None:
        """Re-run the app while its stream is live and recovery says so (see :mod:`.recovery`); the
        exception the stream's teardown reports."""
        while True:
            decision = recovering.decide(failure)
            if decision is None:
                return failure
            if isinstance(decision, GiveUp):
                with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
                    return await recovering.give_up(decision)
                return None
            if isinstance(decision, Whole):
                with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
                    await recovering.complete(decision)
                return None
            failure = None
            with self._run.again():  # cancelled as the first run was: the client gone, a stall, ...
                await anyio.sleep(decision.delay)  # the stream's heartbeats go on meanwhile
                scope = recovering.scope_for(decision)
                try:
                    await app(scope, recovering.receive_for(decision, self.receive), recovering.send)
                except Exception as exc:
                    failure = exc
                except cancelled_class():
                    await self._cancelled_from_outside()
                    raise

    async def _cancelled_from_outside(self) -> None:
        if self.stream is not None and not self._run.scope.cancel_called:
            await self.stream.interrupted(None)

    def drain(self, grace: float | None = None) -> None:
        if self.stream is not None:
            self.stream.drain(self.settings.shutdown_grace if grace is None else grace)

    # -- receive: the app's, exactly the server's (see disconnect.py) --------------------------------

    async def receive(self) -> Message:
        try:
            message = await self.client_watch.receive()
        except cancelled_class():
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
            return stream.writer.extension(message)
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
            if stream is not None and not self.life.connected:
                # uvicorn's send to a gone client returns without a checkpoint: a generator that awaits
                # nothing else would spin forever, deaf to its own (Starlette's) cancellation.
                await anyio.lowlevel.checkpoint()
            await self._send(message)

    async def _start(self, message: Message) -> None:
        extra: Sequence[Guard] = ()
        settings: StreamingSettings | None = self.settings
        if self.scope.get(SCOPE_KEY):  # the request's own guards or settings (most have neither)
            extra = request_guards(self.scope)  # not a setting: taken out before the overrides are read
            settings = effective(
                self.settings, self.scope
            )  # a bad override: the app's error, before the start
        kind = headers.stream_kind(message.get("headers", ())) if settings is not None else None
        if kind is None or settings is None:
            self._peek = None
            self.life.pass_through()
            await self._send(message)
            return
        coding = None  # compressed by us: never HEAD (no body), never one the app encoded itself
        if settings.compress != "off" and self.scope.get("method") != "HEAD":
            coding = compress.choose(self.scope.get("headers", ()), message.get("headers", ()))
        start = {**message, "headers": headers.stream_headers(message.get("headers", ()), coding)}
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
        recovery = None
        if settings.recover != "off" and kind == headers.SSE:
            held = recoverable_body(self.scope, peek.whole() if peek is not None else None)
            recovery = plan(settings, self.scope, message, held, self._run)
        # The server may refuse the start (a bad header): that is the app's exception, as without us.
        await self._send(start)
        self.settings = settings
        shared, scope = self.shared, self.scope
        telemetry = None
        if settings.telemetry:
            telemetry = start_telemetry(shared, scope, settings, peek, (self.started_mono, self.started_ns))
        log = chat_request = None
        if settings.resume and kind == headers.SSE:
            kept = recovery.body if recovery is not None else None  # a takeover's re-run needs it
            log, chat_request = await open_log(
                shared, scope, settings, start["headers"], telemetry, chat_body, kept
            )
        forget = functools.partial(shared.forget, self)
        stream = self.stream = open_stream(
            shared,
            scope,
            message,
            kind,
            settings,
            peek,
            extra,
            telemetry,
            log,
            chat_request,
            self.life,
            self.client_watch,
            self._send,
            forget,
            recovery,
            coding,
        )
        self.shared.track(self)
        stream.begin()


class Run:
    """The cancel scope of the app's current run, which the lifecycle (and a stall) cancels: its own
    object, so that neither holds the responder (no reference cycle)."""

    __slots__ = ("scope",)

    def __init__(self) -> None:
        self.scope = cancel_scope()

    def cancel(self) -> None:
        self.scope.cancel()

    def again(self) -> anyio.CancelScope:
        """A new scope for a re-run of the app."""
        self.scope = cancel_scope()
        return self.scope

    def start_within(self, seconds: float) -> None:
        self.scope.deadline = anyio.current_time() + seconds

    def started(self) -> None:
        self.scope.deadline = math.inf


_STREAMING: Final = Phase.STREAMING  # a module global: per message, one look-up less than the enum's
_PASSING: Final = Phase.PASSING


async def _raise(exc: Exception) -> None:
    """``exc`` raised where the app awaits its ``send``, as from a coroutine function."""
    raise exc
