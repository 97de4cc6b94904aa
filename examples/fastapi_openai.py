"""An OpenAI-compatible chat endpoint in FastAPI, made production-grade with one line.

Run::

    python examples/fastapi_openai.py [--port 8000]

then point any OpenAI client at it::

    from openai import OpenAI
    client = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="unused")
    stream = client.chat.completions.create(
        model="echo", messages=[{"role": "user", "content": "hi"}], stream=True)
    for chunk in stream:
        if chunk.choices:
            print(chunk.choices[0].delta.content or "", end="", flush=True)

The "model" streams a canned answer one token per event, as real servers do. ``StreamingMiddleware``
coalesces those events into ~20 frames a second, keeps idle streams alive, and turns an exception
after the first byte into an OpenAI ``{"error": ...}`` event the SDK raises as ``APIError``.

OpenTelemetry: under ``opentelemetry-instrument`` the middleware uses what it set up; run directly, the
standard ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` / ``OTEL_EXPORTER_OTLP_*`` variables are
honoured (see ``examples/lab_telemetry.py``), e.g. for Arize Phoenix::

    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:6006/v1/traces OTEL_METRICS_EXPORTER=none \
        python examples/fastapi_openai.py
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

import anyio
import uvicorn
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from sse_middleware import StreamingMiddleware

app = FastAPI(title="OpenAI-compatible example")
app.add_middleware(StreamingMiddleware)  # settings from SSE_MIDDLEWARE_* environment variables


class Message(BaseModel):
    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | None = None


class ChatRequest(BaseModel):
    model: str
    messages: list[Message]
    stream: bool = False


def answer_tokens(request: ChatRequest) -> list[str]:
    """Stand-in for a model: a short answer about the last user message, split like a tokenizer would."""
    question = next((m.content for m in reversed(request.messages) if m.role == "user" and m.content), "")
    text = (f"You asked: “{question.strip()}”. Streaming sends this answer token by token, so the "
            "first words arrive long before the last. ✅")
    return re.findall(r"\s*\S{1,4}", text)


async def chunks(request: ChatRequest, cid: str, created: int) -> AsyncIterator[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": request.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(body, ensure_ascii=False, separators=(',', ':'))}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for token in answer_tokens(request):
        await anyio.sleep(0.02)  # 50 tokens/s
        yield chunk({"content": token})
    yield chunk({}, "stop")
    yield "data: [DONE]\n\n"


@app.post("/v1/chat/completions", response_model=None)
async def chat_completions(request: ChatRequest) -> StreamingResponse | dict[str, Any]:
    cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    if request.stream:
        return StreamingResponse(chunks(request, cid, created), media_type="text/event-stream")
    text = "".join(answer_tokens(request))
    return {
        "id": cid, "object": "chat.completion", "created": created, "model": request.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="OpenAI-compatible FastAPI example")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    if any(name.startswith(("OTEL_TRACES_", "OTEL_METRICS_", "OTEL_EXPORTER_")) for name in os.environ):
        import lab_telemetry  # beside this file

        lab_telemetry.install("fastapi-openai-example")
        print(f"telemetry: {lab_telemetry.describe()}", flush=True)
    print(f"OpenAI-compatible endpoint: http://{args.host}:{args.port}/v1/chat/completions", flush=True)
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
