"""The app the lifecycle tests serve with uvicorn (``tests/test_lifecycle.py``). ``TEST_WRAP=0`` serves it
without the middleware (the control). Generators write a mark file in ``TEST_MARKS`` from their
``finally``, so a test can see that they were stopped, not abandoned."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from sse_middleware import StreamingMiddleware, override

from .endpoints import mark, number, silence


class Raw:
    """An endless raw ASGI stream that never calls ``receive`` (as many hand-written LLM bridges do).
    Under uvicorn (ASGI 2.3) a send to a gone client does nothing, so alone it would run forever."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await raw(scope, send)


async def raw(scope: dict[str, Any], send: Any) -> None:
    query = dict(p.split("=", 1) for p in scope["query_string"].decode().split("&") if "=" in p)
    start = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": start})
    try:
        n = 0
        while True:
            await send({"type": "http.response.body", "body": b"data: %d\n\n" % n, "more_body": True})
            n += 1
            await anyio.sleep(float(query.get("delay", "0.05")))
    finally:
        mark(query.get("mark", "raw"))


async def forever(request: Request) -> Response:
    """An endless Starlette stream, the everyday shape of a token generator."""
    name, delay = request.query_params.get("mark", "forever"), number(request, "delay", 0.05)

    async def gen() -> AsyncIterator[str]:
        try:
            i = 0
            while True:
                yield f"data: {i}\n\n"
                i += 1
                await anyio.sleep(delay)
        finally:
            mark(name)

    # Which process serves it (with --workers N, a test can see that every worker got streams).
    return StreamingResponse(gen(), media_type="text/event-stream", headers={"x-worker": str(os.getpid())})


async def hang(request: Request) -> Response:
    """One event, then an upstream that never answers. ``stall`` sets this request's stall_timeout."""
    override(request.scope, stall_timeout=number(request, "stall", 0.0))
    name = request.query_params.get("mark", "hang")

    async def gen() -> AsyncIterator[str]:
        try:
            yield "data: first\n\n"
            await anyio.sleep(3600)
        finally:
            mark(name)

    return StreamingResponse(gen(), media_type="text/event-stream")


async def tasks(request: Request) -> Response:
    """Debug: how many asyncio tasks the process has (this request's own included)."""
    return JSONResponse({"tasks": len(asyncio.all_tasks())})


routes = [
    Route("/forever", forever),
    Route("/hang", hang),
    Route("/silence", silence),
    Route("/tasks", tasks),
    Route("/raw", Raw()),
]
bare = Starlette(routes=routes)
app: Any = StreamingMiddleware(bare) if os.environ.get("TEST_WRAP", "1") == "1" else bare
