"""The response's start builds a finished stream: everything one streaming response needs is made here,
in order (:func:`start_telemetry`, then a resumable stream's :func:`open_log`, the one await, then
:func:`open_stream`: the output check, the pipeline, the stream and its parts), and the
:class:`~.stream.Stream` that comes out is ready to run. Nothing is patched onto it afterwards.

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
from .._core.compress import Compressor
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
from .chat_resume import ChatRequest
from .disconnect import ClientWatch
from .guards import Guard
from .recovery import Plan
from .resume import Resumption
from .stream import Stream

if TYPE_CHECKING:
    from .._resume.log import StreamLog
    from .._telemetry.recorder import StreamTelemetry


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


def start_telemetry(
    shared: Shared,
    scope: Scope,
    settings: StreamingSettings,
    peek: BodyPeek | None,
    started: tuple[float, int],
) -> StreamTelemetry | None:
    """The stream's telemetry, when ``settings.telemetry`` (the caller asks first: no call per stream
    without it); ``started``: the request's (``time.monotonic()``, ``time.time_ns()``)."""
    return shared.telemetry.start(
        scope, start_mono=started[0], start_ns=started[1], body=peek, mark_parent=settings.mark_parent_span
    )


async def open_log(
    shared: Shared,
    scope: Scope,
    settings: StreamingSettings,
    sent: Sequence[tuple[bytes, bytes]],
    telemetry: StreamTelemetry | None,
    chat_body: bytes | None,
    kept: bytes | None = None,
) -> tuple[StreamLog | None, ChatRequest | None]:
    """A resumable stream's log (None: the store is unavailable), and the AI SDK's chat request when its
    POST had a body. ``sent``: the headers that went out, which a resumed response repeats, but for a
    ``Content-Encoding`` of ours: the log keeps what the app wrote, uncompressed (a compressor is one
    connection's), and a resume replays it as it is. ``kept``: a recoverable stream's request body, kept
    with the log for a takeover."""
    span = telemetry.span_context() if telemetry is not None else None  # made now: the log links it
    if settings.compress != "off":
        sent = [(name, value) for name, value in sent if name.lower() != b"content-encoding"]
    log = await shared.resume.open(scope, settings, sent, span, kept)
    if log is None or not chat_body:
        return log, None
    path = chat.chat_path(scope.get("raw_path") or scope["path"].encode())
    return log, (path, shared.resume.identity(scope), chat_body)


def open_stream(
    shared: Shared,
    scope: Scope,
    message: Message,
    kind: str,
    settings: StreamingSettings,
    peek: BodyPeek | None,
    extra_guards: Sequence[Guard],
    telemetry: StreamTelemetry | None,
    log: StreamLog | None,
    chat_request: ChatRequest | None,
    life: Lifecycle,
    client_watch: ClientWatch,
    send: Send,
    forget: Callable[[], object],
    recovery: Plan | None = None,
    coding: str | None = None,
) -> Stream:
    """The stream of a response that turned out to be one, its start already gone out, ready to run:
    ``message`` is the app's ``http.response.start``, ``kind`` the stream's (``headers.SSE``, ...),
    ``settings`` with the request's overrides, ``peek`` what the app read of its request body. Plain
    arguments, no object to carry them, and no await: this runs once per stream. ``coding``: the
    content coding the start announced (its frames are compressed as they leave)."""
    check = _output_check(settings, peek) if settings.validate_json and kind != headers.BYTES else None
    core = shared.core if settings is shared.settings else settings.core()
    guards = (*shared.guards, *extra_guards)
    relay = shared.relays.for_route(scope)
    app_headers = message.get("headers", ())
    pipe: Pipeline
    guarded = None
    if guards:
        hold = settings.guard_mode == "hold"
        pipe = guarded = GuardedPipeline(
            kind, core, telemetry, hold=hold, scope=scope, headers=app_headers, relay=relay, check=check
        )
    else:
        pipe = Pipeline(kind, core, telemetry, headers=app_headers, relay=relay, check=check)
    return Stream(
        life,
        settings,
        pipe,
        telemetry,
        send,
        client_watch,
        bool(message.get("trailers")),  # the start declared trailers
        forget,
        not _reports_disconnect_on_send(scope),  # may_listen
        log,
        (guarded, guards) if guarded is not None else None,
        chat_request,
        recovery,
        Compressor() if coding is not None else None,
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
