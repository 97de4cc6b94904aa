"""The response's start builds a finished stream: everything one streaming response needs is made here,
in order (telemetry, the output check, the pipeline, the resume log), and the :class:`~.stream.Stream`
that comes out is ready to run. Nothing is patched onto it afterwards.

:class:`Shared` is what the responder knows of the middleware: what every response shares, and two
narrow callbacks (``track``, ``forget``) for the shutdown drain. The responder never imports the
middleware.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._core import chat, headers
from .._core.config import CoreConfig
from .._core.dialects import RelayMemory
from .._core.guarded import GuardedPipeline
from .._core.jsoncheck.request import DeclaredSchemas, declared_schemas
from .._core.lifecycle import Lifecycle
from .._core.output_check import OutputCheck
from .._core.pipeline import Pipeline
from .._settings import StreamingSettings
from .._telemetry.recorder import Telemetry
from .._telemetry.request_model import BodyPeek
from .._types import Message, Scope, Send
from .disconnect import ClientWatch
from .guards import Guard
from .recovery import Plan
from .resume import Resumption
from .stream import ChatRequest, Stream

if TYPE_CHECKING:
    from .._resume.log import StreamLog


@dataclasses.dataclass(frozen=True, slots=True)
class Shared:
    """What every response of one middleware shares. ``track(responder)``: an open stream, drained at a
    shutdown; ``forget(responder)``: no longer."""

    settings: StreamingSettings
    core: CoreConfig  # the core's config for streams without per-request overrides
    telemetry: Telemetry
    guards: tuple[Guard, ...]
    relays: RelayMemory
    resume: Resumption
    track: Callable[[Any], None]
    forget: Callable[[Any], None]


@dataclasses.dataclass(frozen=True, slots=True)
class Started:
    """One response's start, as the responder saw it."""

    scope: Scope
    message: Message  # the app's http.response.start
    headers: Sequence[tuple[bytes, bytes]]  # what went to the client: with the anti-buffering headers
    kind: str  # headers.SSE, ...
    settings: StreamingSettings  # with the request's overrides
    peek: BodyPeek | None  # what the app read of its request body
    chat_body: bytes | None  # a resumable POST's body, for the AI SDK's chat id
    extra_guards: Sequence[Guard]
    started_mono: float
    started_ns: int
    recovery: Plan | None = None  # the stream's recovery, if it has one


async def open_stream(
    shared: Shared,
    started: Started,
    life: Lifecycle,
    client_watch: ClientWatch,
    send: Send,
    forget: Callable[[], object],
) -> Stream:
    """The stream of a response that turned out to be one (its start already went out)."""
    scope, settings, kind, peek = started.scope, started.settings, started.kind, started.peek
    check = _output_check(settings, peek) if settings.validate_json and kind != headers.BYTES else None
    telemetry = None
    if settings.telemetry:
        telemetry = shared.telemetry.start(
            scope,
            start_mono=started.started_mono,
            start_ns=started.started_ns,
            body=peek,
            mark_parent=settings.mark_parent_span,
        )
    core = shared.core if settings is shared.settings else settings.core()
    guards = (*shared.guards, *started.extra_guards)
    relay = shared.relays.for_route(scope)
    app_headers = started.message.get("headers", ())
    pipe: Pipeline
    guarded = None
    if guards:
        hold = settings.guard_mode == "hold"
        pipe = guarded = GuardedPipeline(
            kind, core, telemetry, hold=hold, scope=scope, headers=app_headers, relay=relay, check=check
        )
    else:
        pipe = Pipeline(kind, core, telemetry, headers=app_headers, relay=relay, check=check)
    log: StreamLog | None = None
    chat_request: ChatRequest | None = None
    if settings.resume and kind == headers.SSE:
        span = telemetry.span_context() if telemetry is not None else None  # made now: the log links it
        log = await shared.resume.open(scope, settings, started.headers, span)
        if log is not None and started.chat_body:
            path = chat.chat_path(scope.get("raw_path") or scope["path"].encode())
            chat_request = (path, shared.resume.identity(scope), started.chat_body)
    return Stream(
        life,
        settings,
        pipe,
        telemetry,
        send,
        client_watch,
        trailers=bool(started.message.get("trailers")),
        forget=forget,
        may_listen=not _reports_disconnect_on_send(scope),
        log=log,
        guards=(guarded, guards) if guarded is not None else None,
        chat_request=chat_request,
        recovery=started.recovery,
    )


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
