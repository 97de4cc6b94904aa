"""The app the format tests serve with uvicorn: each stream format of issue 13, as apps write them.

``TEST_WRAP=0`` serves it without the middleware (the control). Every endpoint takes ``n`` (tokens),
``delay`` (seconds between events) and ``fail_at`` (raise before that event, after the response started).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from starlette.types import ASGIApp

from sse_middleware import StreamingMiddleware

from .apps import TOKENS
from .formats import stream

api = FastAPI()
AI_SDK_HEADER = {"x-vercel-ai-ui-message-stream": "v1"}


def _events(fmt: str, request: Request) -> list[str]:
    n = int(request.query_params.get("n", len(TOKENS)))
    tokens = (TOKENS * (n // len(TOKENS) + 1))[:n]
    return [event + "\n\n" for event in stream(fmt, tokens).decode().split("\n\n") if event]


def _respond(
    fmt: str, request: Request, headers: dict[str, str] | None = None, *, skip_start: bool = False
) -> StreamingResponse:
    events = _events(fmt, request)[1 if skip_start else 0 :]
    delay = float(request.query_params.get("delay", 0.0))
    fail_at = int(request.query_params.get("fail_at", -1))

    async def gen() -> AsyncIterator[str]:
        for i, event in enumerate(events):
            if i == fail_at:
                raise RuntimeError("the model server said: password hunter2")
            yield event
            await anyio.sleep(delay)

    return StreamingResponse(gen(), media_type="text/event-stream", headers=headers)


def _route(fmt: str, headers: dict[str, str] | None = None, *, skip_start: bool = False) -> Any:
    async def endpoint(request: Request) -> StreamingResponse:
        return _respond(fmt, request, headers, skip_start=skip_start)

    return endpoint


# Full chunks (vLLM-like: reasoning_content, content, two parallel tool calls), and the minimal ones
# ({"choices": [{"delta": ...}]}, no id/object/model; reasoning deltas).
api.post("/openai/v1/chat/completions")(_route("openai"))
api.post("/openai-minimal/v1/chat/completions")(_route("openai-minimal"))
api.post("/openai-responses/v1/responses")(_route("openai-responses"))
api.post("/anthropic/v1/messages")(_route("anthropic"))
# The UI message stream with its header, as createUIMessageStreamResponse sends it, but without its
# start part (the SDK's sendStart: false): only the header can tell what it is. Then without the header:
# detected from its first part.
api.post("/ai-sdk/api/chat")(_route("ai-sdk", AI_SDK_HEADER, skip_start=True))
api.post("/ai-sdk-bare/api/chat")(_route("ai-sdk"))
api.get("/relay")(_route("relay"))  # the classic FastAPI relay: data: {"text": ...} per token, then [DONE]
api.get("/json")(_route("json"))  # its own envelope (served with dialect=json, json_text_field=payload.t)

GENERIC = {
    "lines": ["data: plain text line {i}\n\n"],
    "messages": ['data: {{"text": "note {i}"}}\n\n', 'data: {{"user": "u{i}", "joined": true}}\n\n'],
    "notes": ['data: {{"text": "note {i}"}}\n\n'],  # a relay's shape, but no [DONE]: never proven
    "ids": ['id: {i}\ndata: {{"choices": [{{"delta": {{"content": "t{i}"}}}}]}}\n\n'],
}


@api.get("/generic/{kind}")
async def generic(kind: str, request: Request) -> StreamingResponse:
    """SSE that is none of the formats: plain text lines, JSON messages, events with ``id:``."""
    n, delay = int(request.query_params.get("n", 50)), float(request.query_params.get("delay", 0.0))

    async def gen() -> AsyncIterator[str]:
        for i in range(n):
            for template in GENERIC[kind]:
                yield template.format(i=i)
                await anyio.sleep(delay)

    return StreamingResponse(gen(), media_type="text/event-stream")


def build(wrap: bool) -> ASGIApp:
    return StreamingMiddleware(api) if wrap else api


app = build(os.environ.get("TEST_WRAP", "1") == "1")
