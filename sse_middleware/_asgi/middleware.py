"""``StreamingMiddleware``: the one line an app adds. Stateless but for frozen settings; each response
gets its own :class:`~.responder.Responder`."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._core.dialects import RelayMemory
from .._core.resume import Caller
from .._exceptions import ConfigError
from .._settings import StreamingSettings, resolve
from .._telemetry.recorder import Telemetry
from .._types import ASGIApp, Message, Receive, Scope, Send
from .chat_resume import ChatResume
from .guards import Guard, validate
from .responder import Responder
from .resume import Resumption
from .shutdown import ShutdownWatch
from .start import Shared

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider
    from typing_extensions import Unpack

    from .._settings import SettingsChanges


class StreamingMiddleware:
    """Pure ASGI middleware for token streams: anti-buffering headers, heartbeats, coalescing, error
    events, graceful shutdown and telemetry, for every ``text/event-stream`` (and text/plain or NDJSON
    without a Content-Length) response. Everything else passes through untouched.

    Settings come as ``settings=StreamingSettings(...)``, or as its fields by keyword
    (``add_middleware(StreamingMiddleware, heartbeat_interval=5)``) over the ``SSE_MIDDLEWARE_*``
    environment variables, which ``settings=None`` reads alone. A bad value, an unknown name or both forms
    at once fails the server's start: the lifespan's startup is refused with the message (under a server
    that runs no lifespan, every request raises it).
    ``resume_caller(scope)``: who the caller is, for resumable streams (default: a keyed hash of the
    ``Authorization`` and ``Cookie`` headers); a resume is granted only to the same caller.
    ``guards``: functions (or coroutine functions) shown the stream's text before it leaves (README,
    "Guards"); one raising :class:`~sse_middleware.Blocked` ends the stream as its format says filtered.
    """

    def __init__(
        self,
        app: ASGIApp,
        settings: StreamingSettings | None = None,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        resume_caller: Caller | None = None,
        guards: Sequence[Guard] = (),
        **changes: Unpack[SettingsChanges],
    ) -> None:
        self.app = app
        try:
            self.settings = resolve(settings, changes)
            self.guards = validate(guards)  # a guard that is no function fails at start-up too
        except (ConfigError, TypeError) as exc:
            # Not raised: Starlette builds its middleware in its first call, the lifespan's, and an exception
            # there reads to uvicorn as "lifespan unsupported"; the server would start and answer 500s.
            self.error = exc
            self.__class__ = Refusing
            return
        s = self.settings
        self.core = s.core()  # the core's config for streams without per-request overrides
        self.telemetry = Telemetry(
            tracer_provider,
            meter_provider,
            slo_ttft=s.slo_ttft,
            slo_tpot=s.slo_tpot,
            gap_sample_every=s.inter_chunk_sample_every,
        )
        self.relays = RelayMemory()  # routes proven to stream a JSON relay (see _core/dialects/relay.py)
        # Open streams, for a shutdown's drain. A plain set: each stream's teardown takes itself out (its
        # lifecycle lets it go exactly once), with no weak reference made and dropped per stream.
        self._open: set[Responder] = set()
        self._drain_at = math.inf
        self._watch = ShutdownWatch(self.begin_shutdown)
        self.resume = Resumption(
            s, caller=resume_caller, tracer_provider=tracer_provider, meter_provider=meter_provider
        )
        self.resume.app = None if self.guards else app  # a takeover's re-run: guards would not see it
        self.chats = ChatResume(self.resume) if s.resume else None  # no chat's resume without resume
        forget = self._open.discard
        self.shared = Shared(
            s, self.core, self.telemetry, self.guards, self.relays, self.resume, self.track, forget
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            resume = self.resume
            position = resume.wanted(scope) if resume.answers else None
            if position is not None and await resume.answer(scope, receive, send, position):
                return  # a resumed stream, answered from its log: the app never sees it
            if self.chats is not None and self.chats.wanted(scope):
                answered, send = await self.chats.answer(scope, receive, send)
                if answered:
                    return  # the AI SDK's resume of a chat's stream (or its stop)
            await Responder(self.shared, scope, receive, send).run(self.app)
        elif kind == "lifespan":
            await self.app(scope, self._lifespan_receive(receive), send)
        else:
            await self.app(scope, receive, send)

    def _lifespan_receive(self, receive: Receive) -> Receive:
        async def wrapped() -> Message:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._watch.stopping = False  # served again (tests, programmatic restarts): a fresh start
                self.resume.stopping = False
                self._drain_at = math.inf
            elif message["type"] == "lifespan.shutdown":
                self.begin_shutdown()  # servers that send this early get the same drain
            return message

        return wrapped

    def begin_shutdown(self, grace: float | None = None) -> None:
        """End every open stream within ``grace`` seconds (default ``shutdown_grace``) with a reconnect
        hint; streams that start later get what is left of it. Called on SIGTERM/SIGINT; call it
        yourself under a server that stops another way."""
        self._watch.stopping = True
        grace = self.settings.shutdown_grace if grace is None else grace
        self._drain_at = min(self._drain_at, time.monotonic() + grace)
        for responder in list(self._open):
            responder.drain(grace)
        self.resume.drain()

    def track(self, responder: Responder) -> None:
        self._open.add(responder)
        if self._watch.stopping:
            responder.drain(max(0.0, self._drain_at - time.monotonic()))
        else:
            self._watch.install()


class Refusing(StreamingMiddleware):
    """A middleware whose settings are bad: it answers the lifespan's startup with
    ``lifespan.startup.failed`` and the error, which servers turn into a failed start, without running
    the app's lifespan, then raises the error (as Starlette's router does after a failed startup, for
    runners that read no ``failed``); any other call raises it too. Its own class, not a check on every
    request: a good middleware's calls pay nothing for it."""

    error: ConfigError | TypeError

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and (await receive())["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.failed", "message": f"StreamingMiddleware: {self.error}"})
        raise self.error.with_traceback(None)
