"""Metrics of several workers (``uvicorn --workers N``, gunicorn), as docs/observability.md's "Several
workers" sets them up: each worker serves its own ``/metrics`` on the first free port of
``TEST_METRICS_PORTS`` (comma-separated), for Prometheus to scrape them all; and, the naive setup the
test holds it against, ``/metrics`` mounted in the app, served by whichever worker takes the scrape.

- ``GET /v1/answer``: a short OpenAI-style stream; ``X-Worker`` names the worker (its pid).

Run with ``uvicorn tests.support.apps_workers:app --workers 2``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Sequence

import anyio
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import make_asgi_app, start_http_server
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Mount, Route

from sse_middleware import StreamingMiddleware


def serve_metrics(ports: Sequence[int], host: str = "127.0.0.1") -> int:
    """Serve this worker's /metrics on the first free port of ``ports`` (one port per worker)."""
    for port in ports:
        try:
            start_http_server(port, addr=host)
        except OSError:  # another worker holds it
            continue
        return port
    raise RuntimeError(f"no free port among {list(ports)}: more workers than ports")


async def answer(request: Request) -> StreamingResponse:
    async def gen() -> AsyncIterator[str]:
        for i in range(5):
            await anyio.sleep(0.1)
            chunk = {"id": "c", "object": "chat.completion.chunk", "model": "m",
                     "choices": [{"index": 0, "delta": {"content": f"t{i} "}}]}  # fmt: skip
            yield f"data: {json.dumps(chunk)}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(gen(), media_type="text/event-stream", headers={"X-Worker": str(os.getpid())})


provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
serve_metrics([int(port) for port in os.environ["TEST_METRICS_PORTS"].split(",")])
routes = [Route("/v1/answer", answer), Mount("/metrics", make_asgi_app())]
app = StreamingMiddleware(Starlette(routes=routes), meter_provider=provider)
