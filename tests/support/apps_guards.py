"""The format app behind a guard that blocks the word ``Here`` (``TEST_WRAP=0``: no guard, the control).

``POST /counted/v1/chat/completions`` streams ``n`` OpenAI chat chunks (``w0 w1 ...``, the word ``Here``
at token ``trip``), ``delay`` seconds apart, counting under its ``run`` id what it produced
(``GET /produced/{run}``), so a test can see the app stop after a trip.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from starlette.types import ASGIApp

from sse_middleware import Blocked, Check, StreamingMiddleware

from .apps_formats import api

counted = FastAPI()
produced: dict[str, int] = {}


@counted.post("/counted/v1/chat/completions")
async def chat(request: Request) -> StreamingResponse:
    query = request.query_params
    run, n, trip = query["run"], int(query.get("n", 100)), int(query.get("trip", 10))
    delay = float(query.get("delay", 0.01))
    produced[run] = 0

    async def gen() -> AsyncIterator[str]:
        for i in range(n):
            token = "Here " if i == trip else f"w{i} "
            choice = {"index": 0, "delta": {"content": token}, "finish_reason": None}
            chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
            yield f"data: {json.dumps(chunk)}\n\n"
            produced[run] += 1
            await anyio.sleep(delay)
        yield "data: [DONE]\n\n"

    return StreamingResponse(gen(), media_type="text/event-stream")


@counted.get("/produced/{run}")
async def produced_by(run: str) -> dict[str, int]:
    return {"produced": produced.get(run, -1)}


counted.mount("/", api)


def no_here(check: Check) -> None:
    if "Here" in check.new:
        raise Blocked("That word is not allowed here.", code="banned_word")


def build(wrap: bool) -> ASGIApp:
    return StreamingMiddleware(counted, guards=[no_here]) if wrap else counted


app = build(os.environ.get("TEST_WRAP", "1") == "1")
