"""The app the behaviour tests serve with uvicorn. ``TEST_WRAP=0`` serves it without the middleware (the
control); ``TEST_GZIP=inner|outer`` adds Starlette's GZipMiddleware inside or outside ours."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp

from sse_middleware import StreamError, StreamingMiddleware, opt_out, override

from .endpoints import mark, number, silence

SSE = "text/event-stream"
TOKENS = [
    "Hello",
    ",",
    " wor",
    "ld",
    "!",
    " Here",
    " is",
    " some",
    " `code`",
    ":\n\n",
    "```py",
    "thon\n",
    "print",
    "('hi')",
    "\n```",
    "\n\nDone",
    " é",
    "😀",
    " 你好",
    ".",
]

api = FastAPI()


def openai_chunk(text: str | None, *, index: int = 0, finish: str | None = None, role: bool = False) -> str:
    delta: dict[str, str] = {"role": "assistant", "content": ""} if role else {}
    if text is not None:
        delta["content"] = text
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "test-model",
        "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body, separators=(',', ':'), ensure_ascii=False)}\n\n"


async def openai_stream(tokens: list[str], delay: float, fail_at: int, secret: str) -> AsyncIterator[str]:
    yield openai_chunk(None, role=True)
    for i, token in enumerate(tokens):
        if i == fail_at:
            raise RuntimeError(f"database password is {secret}")
        await anyio.sleep(delay)
        yield openai_chunk(token)
    yield openai_chunk(None, finish="stop")
    yield "data: [DONE]\n\n"


@api.get("/openai")
async def openai_endpoint(request: Request) -> StreamingResponse:
    n = int(number(request, "n", len(TOKENS)))
    tokens = (TOKENS * (n // len(TOKENS) + 1))[:n]
    gen = openai_stream(
        tokens,
        number(request, "delay", 0.0),
        int(number(request, "fail_at", -1)),
        request.query_params.get("secret", "hunter2"),
    )
    return StreamingResponse(gen, media_type=SSE)


def anthropic_event(name: str, body: dict[str, object]) -> str:
    return f"event: {name}\ndata: {json.dumps({'type': name, **body}, separators=(',', ':'))}\n\n"


async def anthropic_stream(tokens: list[str], delay: float, fail_at: int) -> AsyncIterator[str]:
    message: dict[str, object] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 7, "output_tokens": 1},
    }
    yield anthropic_event("message_start", {"message": message})
    yield anthropic_event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    for i, token in enumerate(tokens):
        if i == fail_at:
            raise RuntimeError("secret anthropic failure hunter2")
        await anyio.sleep(delay)
        yield anthropic_event(
            "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": token}}
        )
    yield anthropic_event("content_block_stop", {"index": 0})
    yield anthropic_event(
        "message_delta",
        {
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": len(tokens)},
        },
    )
    yield anthropic_event("message_stop", {})
    if fail_at == len(tokens):  # after the last event: a cleanup that fails once the answer is whole
        raise RuntimeError("secret anthropic failure hunter2")


@api.post("/v1/messages")
async def anthropic_endpoint(request: Request) -> StreamingResponse:
    n = int(number(request, "n", len(TOKENS)))
    tokens = (TOKENS * (n // len(TOKENS) + 1))[:n]
    gen = anthropic_stream(tokens, number(request, "delay", 0.0), int(number(request, "fail_at", -1)))
    return StreamingResponse(gen, media_type=SSE)


@api.post("/v1/chat/completions")
async def chat_completions(request: Request) -> StreamingResponse:
    return await openai_endpoint(request)


def responses_event(name: str, body: dict[str, object], seq: int) -> str:
    payload = {"type": name, "sequence_number": seq, **body}
    return f"event: {name}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n"


async def responses_stream(tokens: list[str], delay: float, fail_at: int) -> AsyncIterator[str]:
    response = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "gpt-test",
        "status": "in_progress",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    yield responses_event("response.created", {"response": response}, 0)
    ids = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    for i, token in enumerate(tokens):
        if i == fail_at:
            raise RuntimeError("secret responses failure hunter2")
        await anyio.sleep(delay)
        yield responses_event("response.output_text.delta", {**ids, "delta": token, "logprobs": []}, i + 1)
    done = {
        **response,
        "status": "completed",
        "usage": {
            "input_tokens": 3,
            "output_tokens": len(tokens),
            "total_tokens": 3 + len(tokens),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    yield responses_event("response.completed", {"response": done}, len(tokens) + 1)
    if fail_at == len(tokens):  # after the last event, as above
        raise RuntimeError("secret responses failure hunter2")


@api.post("/v1/responses")
async def responses_endpoint(request: Request) -> StreamingResponse:
    n = int(number(request, "n", len(TOKENS)))
    tokens = (TOKENS * (n // len(TOKENS) + 1))[:n]
    gen = responses_stream(tokens, number(request, "delay", 0.0), int(number(request, "fail_at", -1)))
    return StreamingResponse(gen, media_type=SSE)


@api.get("/fail_before_start")
async def fail_before_start() -> StreamingResponse:
    raise RuntimeError("failed before the response started")


@api.get("/sse")
async def sse(request: Request) -> StreamingResponse:
    n, delay = int(number(request, "n", 5)), number(request, "delay", 0.0)
    fail_at = int(number(request, "fail_at", -1))

    async def gen() -> AsyncIterator[str]:
        for i in range(n):
            if i == fail_at:
                raise RuntimeError("secret hunter2")
            if i == int(number(request, "stream_error_at", -1)):
                raise StreamError("quota exceeded", type="rate_limit", code="quota")
            yield f"id: {i}\ndata: tick {i}\n\n"
            await anyio.sleep(delay)

    return StreamingResponse(
        gen(),
        media_type=SSE,
        headers={"Cache-Control": request.query_params.get("cc", "")}
        if "cc" in request.query_params
        else None,
    )


@api.get("/plain")
async def plain(request: Request) -> StreamingResponse:
    n, delay = int(number(request, "n", 5)), number(request, "delay", 0.0)
    fail_at = int(number(request, "fail_at", -1))

    async def gen() -> AsyncIterator[str]:
        for i in range(n):
            if i == fail_at:
                raise RuntimeError("secret hunter2")
            yield f"line {i}\n"
            await anyio.sleep(delay)

    return StreamingResponse(gen(), media_type="text/plain")


api.get("/silence")(silence)


@api.get("/forever")
async def forever(request: Request) -> StreamingResponse:
    name = request.query_params.get("mark", "forever")
    delay = number(request, "delay", 0.05)

    async def gen() -> AsyncIterator[str]:
        try:
            i = 0
            while True:
                yield f"data: {i}\n\n"
                i += 1
                await anyio.sleep(delay)
        finally:
            mark(name)

    return StreamingResponse(gen(), media_type=SSE)


@api.get("/json")
async def plain_json() -> JSONResponse:
    return JSONResponse({"hello": "world", "pad": "x" * 2000})


@api.get("/sized")
async def sized() -> PlainTextResponse:
    return PlainTextResponse("fixed length body")


@api.get("/optout")
async def optout(request: Request) -> StreamingResponse:
    opt_out(request.scope)
    return await sse(request)


@api.get("/bad_override")
async def bad_override(request: Request) -> StreamingResponse:
    override(request.scope, heartbeat_interval=-1)
    return await sse(request)


from fastapi.sse import EventSourceResponse as NativeEventSourceResponse  # noqa: E402


@api.get("/native", response_class=NativeEventSourceResponse)
async def native(request: Request) -> AsyncIterator[dict[str, str]]:
    for i in range(int(number(request, "n", 5))):
        yield {"tick": str(i)}
        await anyio.sleep(number(request, "delay", 0.0))


@api.get("/sse_starlette")
async def sse_starlette_endpoint(request: Request) -> object:
    from sse_starlette import EventSourceResponse

    delay = number(request, "delay", 0.0)

    async def gen() -> AsyncIterator[dict[str, str]]:
        for i in range(int(number(request, "n", 5))):
            yield {"data": f"tick {i}"}
            await anyio.sleep(delay)

    return EventSourceResponse(gen(), ping=600)


def build(wrap: bool, gzip: str = "") -> ASGIApp:
    app: ASGIApp = api
    if gzip == "inner":
        app = GZipMiddleware(app, minimum_size=1)
    if wrap:
        app = StreamingMiddleware(app)
    if gzip == "outer":
        app = GZipMiddleware(app, minimum_size=1)
    return app


app = build(os.environ.get("TEST_WRAP", "1") == "1", os.environ.get("TEST_GZIP", ""))
