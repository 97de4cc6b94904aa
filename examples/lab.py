"""The sse_middleware lab: one answer, three ways, side by side on one clock.

Run it (no API keys, no network; a simulated model answers)::

    pip install -e '.[demo]'            # from a clone (or a built wheel: pip install dist/*.whl fastapi
                                        # uvicorn opentelemetry-sdk)
    python examples/lab.py [--port 8000]

then open the address it prints. Pick a scenario and press Run: the same simulated model answers
(a) buffered, as one JSON document at the end, (b) streamed raw, and (c) streamed through
``StreamingMiddleware``. All three finish together; the difference is the wait you *feel*. In the
"Guarded answer" scenario the middleware also runs a guard (a regex blocklist for credentials) on the
answer: the raw panel shows the leaked key, the middleware's ends at the filter (badged "stopped": a
filter doing its job is no failure). In "Provider fails mid-answer" the route turns the middleware's
recovery on: the raw panel keeps half an answer and a broken connection, the middleware's runs the app
again (``recovery()`` tells it what the client has) and shows the whole answer, the re-run noted in its
event log.

Spans and metrics of the middleware's streams print to the console; the standard ``OTEL_*`` variables
send them elsewhere (``OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318`` for OTLP/HTTP; for Arize
Phoenix, which takes traces only, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:6006/v1/traces
OTEL_METRICS_EXPORTER=none``; see ``examples/lab_telemetry.py`` and docs/observability.md). Any
``SSE_MIDDLEWARE_*`` variable changes the middleware's settings (the lab sends a heartbeat after 1 s
of silence unless ``SSE_MIDDLEWARE_HEARTBEAT_INTERVAL`` says otherwise).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import lab_model
import lab_telemetry
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from sse_middleware import Blocked, Check, StreamingMiddleware, StreamingSettings, guard

CREDENTIAL = re.compile(r"\bsk-(?:live|test)-[A-Za-z0-9]{8,}")

STATIC = Path(__file__).with_name("lab_static")


def lab_settings() -> StreamingSettings:
    """Settings from the environment, with a 1 s heartbeat so the tool-call silence shows pings, and
    resumable streams (in this process's memory) so the network drop resumes."""
    settings = StreamingSettings.from_env()
    lab_defaults = {"heartbeat_interval": 1.0, "resume": True}
    unset = {k: v for k, v in lab_defaults.items() if f"SSE_MIDDLEWARE_{k.upper()}" not in os.environ}
    return settings.replace(unset)


def no_credentials(check: Check) -> None:
    """The lab's guard: a regex blocklist. Its check's text ends at a word boundary, so a key is never
    seen (or sent) in halves."""
    if CREDENTIAL.search(check.new):
        raise Blocked("The answer contained a credential; a guard stopped it.", code="credential")


def guarded_on_request(app: ASGIApp) -> ASGIApp:
    """Adds the lab's guard to the requests that ask for it (the page does, for the guarded scenario):
    a guard per request, as a route or dependency would add it."""

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (b"x-lab-guard", b"1") in scope.get("headers", ()):
            guard(scope, no_credentials)
        await app(scope, receive, send)

    return asgi


def build_app(settings: StreamingSettings | None = None, *, telemetry: bool = True) -> Starlette:
    settings = settings or lab_settings()
    model = lab_model.build_model_app()
    providers = lab_telemetry.setup() if telemetry else (None, None)
    wrapped = StreamingMiddleware(
        guarded_on_request(model), settings, tracer_provider=providers[0], meter_provider=providers[1]
    )

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "lab.html", headers={"Cache-Control": "no-cache"})

    async def config(request: Request) -> Response:
        return JSONResponse({
            "scenarios": [s.public() for s in lab_model.SCENARIOS.values()],
            "settings": {
                "heartbeat_interval": settings.heartbeat_interval,
                "coalesce": settings.coalesce,
                "coalesce_max_delay": settings.coalesce_max_delay,
                "resume": settings.resume,
            },
        })

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        for provider in providers:  # flush the last spans and metrics
            if provider is not None:
                provider.shutdown()

    return Starlette(
        routes=[
            Route("/", index),
            Route("/api/config", config),
            Mount("/static", StaticFiles(directory=STATIC)),
            Mount("/raw", app=model),  # (a) buffered with "stream": false, (b) streamed, no middleware
            Mount("/mw", app=wrapped),  # (c) the same app through StreamingMiddleware
        ],
        lifespan=lifespan,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="The sse_middleware lab: one answer, three ways.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    app = build_app()
    print(f"sse_middleware lab: http://{args.host}:{args.port}/", flush=True)
    print(f"telemetry: {lab_telemetry.describe()}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, access_log=False, timeout_graceful_shutdown=3)


if __name__ == "__main__":
    main()
