"""The app the transparency tests serve (``tests/e2e/test_transparency.py``): what an ordinary FastAPI chat
backend does around its responses. ``TEST_WRAP=0`` serves it without the middleware (the control); with
it, the middleware is added the way a user adds it (``api.add_middleware``). Under ``/audited`` the same
app sits inside a ``BaseHTTPMiddleware`` with work after ``call_next``, outside ours. (Only there: a
``BaseHTTPMiddleware`` wraps ``receive`` in a task group, so ``request.is_disconnected()`` never turns
true behind one, with or without us.)

Every endpoint takes ``?id=`` and writes a mark file named after it in ``TEST_MARKS`` when the work the
test looks for happened: a background task ran, a dependency cleaned up, a loop saw the client leave, an
aborted upload was rolled back. Each piece of that work awaits first, as saving to a database would, so
that a cancellation landing on it shows.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Annotated

import anyio
from fastapi import BackgroundTasks, Depends, FastAPI, Request, Response
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from fastapi.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import ClientDisconnect
from starlette.routing import Mount

from sse_middleware import StreamingMiddleware

MARKS = Path(os.environ.get("TEST_MARKS", "/tmp/sse-test-marks"))
SSE = "text/event-stream"


async def mark(name: str) -> None:
    await anyio.sleep(0.01)  # the await a real save or rollback has
    MARKS.mkdir(parents=True, exist_ok=True)
    (MARKS / name).write_text("done")


def _id(request: Request) -> str:
    return request.query_params["id"]


async def tokens() -> AsyncIterator[str]:
    for i in range(3):
        yield f"data: token {i}\n\n"
        await anyio.sleep(0.01)


api = FastAPI()


@api.get("/background/streaming")
async def background_streaming(request: Request) -> StreamingResponse:
    return StreamingResponse(tokens(), media_type=SSE, background=BackgroundTask(mark, _id(request)))


@api.get("/background/native", response_class=EventSourceResponse)
async def background_native(request: Request, tasks: BackgroundTasks) -> AsyncIterator[dict[str, str]]:
    tasks.add_task(mark, _id(request))
    for i in range(3):
        yield {"text": f"token {i}"}
        await anyio.sleep(0.01)


@api.get("/background/sse-starlette")
async def background_sse_starlette(request: Request) -> Response:
    from sse_starlette import EventSourceResponse as SseStarletteResponse

    async def events() -> AsyncIterator[dict[str, str]]:
        for i in range(3):
            yield {"data": f"token {i}"}
            await anyio.sleep(0.01)

    return SseStarletteResponse(events(), background=BackgroundTask(mark, _id(request)))


@api.get("/background/file")
async def background_file(request: Request) -> FileResponse:
    return FileResponse(__file__, media_type="text/plain", background=BackgroundTask(mark, _id(request)))


async def database(request: Request) -> AsyncIterator[None]:
    yield
    await mark(_id(request))  # `await db.close()` after the response


@api.get("/dependency")
async def dependency(_: Annotated[None, Depends(database)]) -> StreamingResponse:
    return StreamingResponse(tokens(), media_type=SSE)


@api.get("/long-poll")
async def long_poll(request: Request) -> JSONResponse:
    """Waits up to 30 s for news, checking every 0.1 s whether the client is still there."""
    for check in range(300):
        if await request.is_disconnected():
            await mark(_id(request))
            return JSONResponse({"checks": check})
        await anyio.sleep(0.1)
    return JSONResponse({"news": None})


@api.post("/upload")
async def upload(request: Request) -> Response:
    try:
        body = await request.body()
    except ClientDisconnect:
        await mark(_id(request))  # roll back what the partial upload started
        return Response(status_code=400)
    return Response(f"{len(body)} bytes")


@api.get("/bad-header")
async def bad_header() -> StreamingResponse:
    """A header value no HTTP/1.1 server may send: the server rejects the start."""
    return StreamingResponse(tokens(), media_type=SSE, headers={"x-note": "one\r\ntwo"})


class AfterCallNext(BaseHTTPMiddleware):
    """Outer middleware with work after ``call_next`` (an audit log): marks ``after-<id>``."""

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        await mark(f"after-{_id(request)}")
        return response


if os.environ.get("TEST_WRAP", "1") == "1":
    api.add_middleware(StreamingMiddleware)
app = Starlette(routes=[Mount("/audited", AfterCallNext(api)), Mount("/", api)])
