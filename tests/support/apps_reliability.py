"""The app the reliability tests serve (any ASGI server). Stdlib + Starlette + anyio only, so it runs on
uvicorn, hypercorn (asyncio and trio) and granian alike.

``TEST_WRAP=0`` serves it without the middleware (the control); ``TEST_QUEUE=1`` puts a deliberately
*queueing* middleware in front (the control for back-pressure: it breaks it); ``TEST_LEAK=1`` makes every
stream leak 256 KiB (the control for the memory checks). Settings come from ``SSE_MIDDLEWARE_*``.

``/stats`` reports the process's RSS and peak RSS, live tasks, streams started and finalized (every
generator counts itself in ``finally``) and how many of the middleware's responders are still alive.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from sse_middleware import StreamingMiddleware

from .endpoints import number

SSE = "text/event-stream"
STATS: dict[str, Any] = {"started": 0, "finalized": 0, "produced": {}}
LEAKED: list[bytearray] = []
_GATE: list[anyio.Event] = []


def proc_status() -> dict[str, int]:
    """VmRSS / VmHWM (peak) of this process in KiB, from /proc (Linux)."""
    out: dict[str, int] = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out


def task_count() -> int:
    """Live tasks on this event loop, asyncio or trio."""
    if "trio" in sys.modules:
        import sniffio

        if sniffio.current_async_library() == "trio":
            import trio

            def walk(task: Any) -> int:
                return 1 + sum(walk(t) for n in task.child_nurseries for t in n.child_tasks)

            return walk(trio.lowlevel.current_root_task())
    import asyncio

    return len(asyncio.all_tasks())


def responders_alive() -> int:
    from sse_middleware._asgi.responder import Responder

    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Responder)


def text_of(stream_id: int, k: int) -> str:
    """Token ``k`` of stream ``stream_id``: unique per stream and position, so order is checkable."""
    return f"<{stream_id}:{k}>"


def openai_chunk(text: str) -> str:
    body = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }
    return f"data: {json.dumps(body, separators=(',', ':'))}\n\n"


def _gate() -> anyio.Event:
    if not _GATE:
        _GATE.append(anyio.Event())
    return _GATE[0]


async def counted(gen: AsyncIterator[str | bytes], stream_id: str = "") -> AsyncIterator[str | bytes]:
    """Count the stream as started and, in ``finally``, finalized; count bytes produced per id."""
    STATS["started"] += 1
    if os.environ.get("TEST_LEAK") == "1":
        LEAKED.append(bytearray(256 * 1024))
    produced = STATS["produced"]
    try:
        async for piece in gen:
            if stream_id:
                produced[stream_id] = produced.get(stream_id, 0) + len(piece)
            yield piece
    finally:
        STATS["finalized"] += 1


async def stream(request: Request) -> StreamingResponse:
    """``n`` tokens of stream ``id`` (kind openai, sse or plain), ``delay`` apart. ``gate=1``: after the
    first token, wait for ``/gate`` (so many streams are open at once); ``fail_at``: raise there."""
    sid, n = int(number(request, "id", 0)), int(number(request, "n", 20))
    delay = number(request, "delay", 0.0)
    kind, gate, fail_at = (
        request.query_params.get("kind", "openai"),
        number(request, "gate", 0),
        number(request, "fail_at", -1),
    )

    async def gen() -> AsyncIterator[str]:
        for k in range(n):
            if k == fail_at:
                raise RuntimeError(f"secret-{sid} failed")
            text = text_of(sid, k)
            yield openai_chunk(text) if kind == "openai" else f"data: {text}\n\n" if kind == "sse" else text
            if k == 0 and gate:
                await _gate().wait()
            if delay:
                await anyio.sleep(delay)
        if kind == "openai":
            yield "data: [DONE]\n\n"

    media = "text/plain" if kind == "plain" else SSE
    return StreamingResponse(counted(gen()), media_type=media)


async def gate(request: Request) -> Response:
    if request.query_params.get("open") == "1":
        _gate().set()
    else:
        _GATE.clear()
    return Response("ok")


async def burst(request: Request) -> StreamingResponse:
    """Events of ``size`` bytes as fast as the server takes them, until the client leaves."""
    sid, size = request.query_params.get("id", "b"), int(number(request, "size", 1024))
    kind = request.query_params.get("kind", "sse")
    token = "x" * (size - 16)

    async def gen() -> AsyncIterator[str]:
        k = 0
        while True:
            k += 1
            yield openai_chunk(token[: size - 120]) if kind == "openai" else f"data: {k:08d} {token}\n\n"

    return StreamingResponse(counted(gen(), sid), media_type=SSE)


async def huge(request: Request) -> StreamingResponse:
    """One event (or one text/plain body) of ``mb`` MiB, sent in ``chunk``-byte pieces."""
    mb, chunk, kind = (
        int(number(request, "mb", 100)),
        int(number(request, "chunk", 65536)),
        request.query_params.get("kind"),
    )
    sid = request.query_params.get("id", "")
    piece = b"y" * chunk

    async def gen() -> AsyncIterator[bytes]:
        if kind != "plain":
            yield b"data: "
        for _ in range(mb * (1 << 20) // chunk):
            yield piece
        yield b"\n\n" if kind != "plain" else b"\n"

    return StreamingResponse(counted(gen(), sid), media_type="text/plain" if kind == "plain" else SSE)


async def stats(request: Request) -> JSONResponse:
    """``?fast=1`` skips the gc walk (for frequent sampling)."""
    out = {
        **proc_status(),
        "tasks": task_count(),
        "started": STATS["started"],
        "finalized": STATS["finalized"],
        "produced": STATS["produced"],
    }
    if request.query_params.get("fast") != "1":
        out["responders"] = responders_alive()  # after a full collection
        out["blocks"] = sys.getallocatedblocks()  # Python-level allocations, unlike RSS never high-water
    return JSONResponse(out)


class RawForever:
    """A raw ASGI app that never calls ``receive``: only the server or the middleware can stop it."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await raw_forever(send)


async def raw_forever(send: Any) -> None:
    STATS["started"] += 1
    try:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for k in range(1000):  # 20 s at most, so a control cannot run forever
            await send({"type": "http.response.body", "body": b"data: %d\n\n" % k, "more_body": True})
            await anyio.sleep(0.02)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        STATS["finalized"] += 1


class BadApp:
    """Bad output on purpose (``/bad?case=...``): what tests/test_bad_output.py checks at the ASGI level,
    here next to good streams on a real server."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        case = dict(p.split("=", 1) for p in scope["query_string"].decode().split("&") if "=" in p).get(
            "case"
        )
        STATS["started"] += 1
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")],
                    "trailers": case == "trailers",
                }
            )
            await send({"type": "http.response.body", "body": b"data: ok\n\n", "more_body": True})
            if case == "str_body":
                await send({"type": "http.response.body", "body": "data: str\n\n", "more_body": True})
            elif case == "second_start":
                await send({"type": "http.response.start", "status": 500, "headers": []})
            elif case == "endless":
                await send({"type": "http.response.body", "body": b"data: ", "more_body": True})
                for _ in range(40):
                    await send({"type": "http.response.body", "body": b"z" * 65536, "more_body": True})
                raise RuntimeError("failed inside an endless event")
            elif case == "invalid_utf8":
                await send({"type": "http.response.body", "body": b"data: \xff\xfe\n\n", "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            if case == "after_final":
                await send({"type": "http.response.body", "body": b"data: late\n\n", "more_body": False})
        finally:
            STATS["finalized"] += 1


class QueueingMiddleware:
    """A deliberately bad middleware (the back-pressure control): the app's sends go into an unbounded
    queue that a task drains, so the app never waits for the client."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        tx, rx = anyio.create_memory_object_stream[dict[str, Any]](max_buffer_size=float("inf"))

        async def drain() -> None:
            async with rx:
                async for message in rx:
                    await send(message)

        async def queued(message: dict[str, Any]) -> None:
            tx.send_nowait(message)
            await anyio.lowlevel.checkpoint()  # let the loop turn: the control must starve no one

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            async with tx:
                await self.app(scope, receive, queued)


routes = [
    Route("/stream", stream),
    Route("/gate", gate, methods=["POST"]),
    Route("/burst", burst),
    Route("/huge", huge),
    Route("/stats", stats),
    Route("/raw_forever", RawForever()),
    Route("/bad", BadApp()),
]
api = Starlette(routes=routes)


def build() -> Any:
    app: Any = api
    if os.environ.get("TEST_WRAP", "1") == "1":
        app = StreamingMiddleware(app)
    if os.environ.get("TEST_QUEUE") == "1":
        app = QueueingMiddleware(app)
    return app


app = build()
