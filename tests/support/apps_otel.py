"""``examples/fastapi_openai.py`` as an operator runs it against a tracing backend: OpenTelemetry set up
from the standard ``OTEL_*`` variables (``examples/lab_telemetry.py``), FastAPIInstrumentor's HTTP
server span around the middleware (without its per-message spans), plus two test routes:

- ``POST /v1/chat/completions?fail_at=N``: the example's endpoint, failing after N tokens when asked;
  ``mark=0`` turns ``mark_parent_span`` off for that request (the control); ``session`` annotates it.
- ``GET /timed?ttft=S&gap=S&n=N&model=M``: a stream with known latencies, for the Prometheus quantiles.

Run with ``uvicorn tests.support.apps_otel:app``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
from fastapi import Request
from fastapi.responses import StreamingResponse
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import fastapi_openai
import lab_telemetry

from sse_middleware import annotate, override

lab_telemetry.install("sse-middleware-test")
app = fastapi_openai.app
app.router.routes = [r for r in app.router.routes if getattr(r, "path", "") != "/v1/chat/completions"]


@app.post("/v1/chat/completions", response_model=None)
async def chat(request: Request, body: fastapi_openai.ChatRequest) -> object:
    fail_at = int(request.query_params.get("fail_at", "-1"))
    if request.query_params.get("mark") == "0":
        override(request.scope, mark_parent_span=False)
    if session := request.query_params.get("session"):
        annotate(request.scope, {"gen_ai.conversation.id": session, "user.id": "user-7"})
    response = await fastapi_openai.chat_completions(body)
    if fail_at < 0 or not isinstance(response, StreamingResponse):
        return response
    upstream = response.body_iterator

    async def failing() -> AsyncIterator[str | bytes]:
        sent = 0
        async for chunk in upstream:
            if sent == fail_at:
                raise RuntimeError("the model backend went away")
            sent += 1
            yield chunk

    return StreamingResponse(failing(), media_type="text/event-stream")


@app.get("/timed")
async def timed(request: Request) -> StreamingResponse:
    ttft, gap = float(request.query_params["ttft"]), float(request.query_params["gap"])
    n = int(request.query_params.get("n", "5"))
    if model := request.query_params.get("model"):
        annotate(request.scope, request_model=model)  # no body to name it: the hook does

    async def gen() -> AsyncIterator[str]:
        await anyio.sleep(ttft)
        for i in range(n):
            if i:
                await anyio.sleep(gap)
            chunk = {
                "id": "c",
                "object": "chat.completion.chunk",
                "model": "m",
                "choices": [{"index": 0, "delta": {"content": f"t{i} "}}],
            }
            yield f"data: {json.dumps(chunk)}\n\n"  # OpenAI's shape: its [DONE] is no token
        yield "data: [DONE]\n\n"

    return StreamingResponse(gen(), media_type="text/event-stream")


FastAPIInstrumentor.instrument_app(app, exclude_spans=["send", "receive"])
