"""The app the output-check tests serve with uvicorn: an OpenAI-compatible chat endpoint and an
Anthropic-compatible messages endpoint that stream the JSON given in the query (``doc``), a few
characters per event, as a model's tool call or structured answer. Each request counts the events it
produced under its ``run`` id (``GET /produced/{run}``), so a test can see the app stop.

``TEST_WRAP=0`` serves it without the middleware; settings come from ``SSE_MIDDLEWARE_*``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from starlette.types import ASGIApp

from sse_middleware import StreamingMiddleware

api = FastAPI()
produced: dict[str, int] = {}
STEP = 3  # characters of the document per event


def _sse(obj: dict[str, Any], name: str | None = None) -> str:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(obj, separators=(',', ':'))}\n\n"


def _pieces(request: Request) -> list[str]:
    doc = request.query_params["doc"]
    return [doc[i : i + STEP] for i in range(0, len(doc), STEP)]


def _stream(request: Request, events: list[str]) -> StreamingResponse:
    run, delay = request.query_params.get("run", "-"), float(request.query_params.get("delay", 0.005))
    produced[run] = 0

    async def gen() -> AsyncIterator[str]:
        for event in events:
            produced[run] += 1
            yield event
            await anyio.sleep(delay)

    return StreamingResponse(gen(), media_type="text/event-stream")


@api.post("/openai/v1/chat/completions")
async def chat(request: Request) -> StreamingResponse:
    body = await request.json()

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        obj = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}
        return _sse(obj)

    if body.get("tools"):
        name = body["tools"][0]["function"]["name"]
        function = {"name": name, "arguments": ""}
        head = {"index": 0, "id": "call_1", "type": "function", "function": function}
        events = [chunk({"role": "assistant", "content": None, "tool_calls": [head]})]
        for piece in _pieces(request):
            events.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
        events.append(chunk({}, "tool_calls"))
    else:
        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": p}) for p in _pieces(request)]
        events.append(chunk({}, "stop"))
    return _stream(request, [*events, "data: [DONE]\n\n"])


@api.post("/anthropic/v1/messages")
async def messages(request: Request) -> StreamingResponse:
    body = await request.json()
    name = body["tools"][0]["name"]
    usage = {"input_tokens": 1, "output_tokens": 1}
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    block = {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}
    start = {"type": "content_block_start", "index": 0, "content_block": block}
    events = [
        _sse({"type": "message_start", "message": message}, "message_start"),
        _sse(start, "content_block_start"),
    ]
    events += [
        _sse(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": p},
            },
            "content_block_delta",
        )
        for p in _pieces(request)
    ]
    events += [_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
               _sse({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                     "usage": {"output_tokens": 9}}, "message_delta"),
               _sse({"type": "message_stop"}, "message_stop")]  # fmt: skip
    return _stream(request, events)


@api.get("/produced/{run}")
async def produced_by(run: str) -> int:
    return produced.get(run, -1)


def build(wrap: bool) -> ASGIApp:
    return StreamingMiddleware(api) if wrap else api


app = build(os.environ.get("TEST_WRAP", "1") == "1")
