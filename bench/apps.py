"""One ASGI app per contender, all streaming :mod:`bench.workload` at ``GET /<name>``.

The query string sets the pace (``n``, ``rate``, ``prefill``, ``idle``), so the same app serves the
in-process drive and the uvicorn server. Contenders whose library is missing are left out, not faked.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from bench.workload import Pace, frames, payloads

try:
    from fastapi.sse import ServerSentEvent
except ImportError:  # FastAPI older than its native SSE, or absent
    ServerSentEvent = None  # type: ignore[assignment,misc]

ASGIApp = Callable[..., Any]

# Contenders in report order. "middleware_hb" is the middleware with a short heartbeat (idle CPU test).
CONTENDERS = (
    "raw",
    "middleware_passthrough",
    "middleware_all",
    "sse_starlette",
    "fastapi_native",
    "otel_asgi",
)
# Decomposition of the pass-through cost: telemetry through the OpenTelemetry API with no SDK installed
# (the global no-op providers), and telemetry off. Measured in process only.
DIAGNOSTIC: dict[str, dict[str, Any]] = {
    "middleware_passthrough_api_only": {"coalesce": False},
    "middleware_passthrough_no_telemetry": {"coalesce": False, "telemetry": False},
    "middleware_all_no_telemetry": {"telemetry": False},
}
HEARTBEAT_TEST_INTERVAL = float(os.environ.get("BENCH_HEARTBEAT_INTERVAL", "0.5"))


class _Discard(SpanExporter):
    """Exports nowhere: the SDK still builds, ends and hands over every span, the cost users pay."""

    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def sdk_providers() -> tuple[TracerProvider, MeterProvider]:
    """Real OpenTelemetry SDK providers (not the no-op API), with nothing behind them."""
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(_Discard()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return tracer_provider, meter_provider


def pace_of(request: Request) -> Pace:
    q = request.query_params
    return Pace(
        tokens=int(q.get("n", "100")),
        rate=float(q.get("rate", "0")),
        prefill=float(q.get("prefill", "0")),
        idle=q.get("idle", "0") == "1",
    )


def raw_app(path: str, source: Callable[[Pace], AsyncIterator[bytes]] = frames) -> Starlette:
    """The floor: Starlette ``StreamingResponse`` over the finished frames (``source``'s)."""

    async def endpoint(request: Request) -> Response:
        return StreamingResponse(source(pace_of(request)), media_type="text/event-stream")

    return Starlette(routes=[Route(path, endpoint)])


def sse_starlette_app(path: str) -> Starlette:
    from sse_starlette import EventSourceResponse

    async def endpoint(request: Request) -> Response:
        # A str item becomes ServerSentEvent(data=item): sse-starlette's own framing; sep="\n" keeps the
        # wire bytes identical to the others (its default is CRLF).
        return EventSourceResponse(payloads(pace_of(request)), sep="\n")

    return Starlette(routes=[Route(path, endpoint)])


def fastapi_native_app(path: str) -> Any:
    # FastAPI resolves the endpoint's annotations in this module's globals, hence the global import.
    from fastapi import FastAPI
    from fastapi.sse import EventSourceResponse

    if ServerSentEvent is None:
        raise ImportError("fastapi.sse.ServerSentEvent is not in the installed FastAPI")
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    @app.get(path, response_class=EventSourceResponse)
    async def endpoint(request: Request) -> AsyncIterator[ServerSentEvent]:
        # raw_data: the payload is already JSON; FastAPI frames it (data= would JSON-encode it again).
        async for p in payloads(pace_of(request)):
            yield ServerSentEvent(raw_data=p)

    return app


def otel_asgi_app(path: str) -> ASGIApp:
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

    tracer_provider, meter_provider = sdk_providers()
    return OpenTelemetryMiddleware(
        raw_app(path), tracer_provider=tracer_provider, meter_provider=meter_provider
    )


def middleware_available() -> str | None:
    """None when ``sse_middleware.StreamingMiddleware`` imports, else why not."""
    try:
        from sse_middleware import StreamingMiddleware, StreamingSettings  # noqa: F401
    except Exception as exc:  # ImportError, or a half-written module failing at import
        return f"{type(exc).__name__}: {exc}"
    return None


def middleware_app(path: str, **settings: Any) -> ASGIApp:
    from sse_middleware import StreamingMiddleware, StreamingSettings

    tracer_provider, meter_provider = sdk_providers()
    return StreamingMiddleware(
        raw_app(path),
        StreamingSettings(**settings),
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )


def build(name: str) -> ASGIApp:
    """The app for one contender, routed at ``/<name>``."""
    path = "/" + name
    if name == "raw":
        return raw_app(path)
    if name == "middleware_passthrough":
        return middleware_app(path, coalesce=False)
    if name in ("middleware_all", "middleware"):
        return middleware_app(path)
    if name == "middleware_hb":
        return middleware_app(path, heartbeat_interval=HEARTBEAT_TEST_INTERVAL)
    if name in DIAGNOSTIC:
        from sse_middleware import StreamingMiddleware, StreamingSettings

        return StreamingMiddleware(raw_app(path), StreamingSettings(**DIAGNOSTIC[name]))
    if name == "sse_starlette":
        return sse_starlette_app(path)
    if name == "fastapi_native":
        app: ASGIApp = fastapi_native_app(path)
        return app
    if name == "otel_asgi":
        return otel_asgi_app(path)
    raise ValueError(f"unknown contender {name!r}")


def available(names: tuple[str, ...] | list[str]) -> dict[str, str]:
    """Contenders that cannot be built here, with the reason (missing library, middleware not ready)."""
    missing: dict[str, str] = {}
    for name in names:
        try:
            build(name)
        except Exception as exc:
            missing[name] = f"{type(exc).__name__}: {exc}"
    return missing
