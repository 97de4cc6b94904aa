"""``StreamingMiddleware``: the one line an app adds. Stateless but for frozen settings; each response
gets its own :class:`~.responder.Responder`."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._core.dialects import RelayMemory
from .._core.resume import Caller
from .._settings import StreamingSettings
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


class StreamingMiddleware:
    """Pure ASGI middleware for token streams: anti-buffering headers, heartbeats, coalescing, error
    events, graceful shutdown and telemetry, for every ``text/event-stream`` (and text/plain or NDJSON
    without a Content-Length) response. Everything else passes through untouched.

    ``settings=None`` reads ``SSE_MIDDLEWARE_*`` from the environment (a bad value fails here, at start-up).
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
    ) -> None:
        self.app = app
        self.settings = StreamingSettings.from_env() if settings is None else settings
        if not isinstance(self.settings, StreamingSettings):
            raise TypeError(f"settings must be a StreamingSettings, got {type(self.settings).__name__}")
        s = self.settings
        self.guards = validate(guards)  # checked here: a guard that is no function fails at start-up
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
