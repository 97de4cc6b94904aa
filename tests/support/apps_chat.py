"""A FastAPI chat backend for the AI SDK's ``useChat`` (``tests/e2e/test_ai_sdk_resume.py``): ``POST
/api/chat`` streams a UI message stream slowly (``WORDS`` words, one every ``TEST_EVERY`` seconds), with
the protocol's header. Nothing else: no resume route, no store; the middleware does the resume
(``TEST_WRAP=1``, its settings from ``SSE_MIDDLEWARE_*``). ``GET /runs`` says how many answers started and
how each ended (``finished`` or ``cancelled``)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from sse_middleware import StreamingMiddleware

WORDS = [f"word{i} " for i in range(30)]
EVERY = float(os.environ.get("TEST_EVERY", "0.1"))
RUNS: list[dict[str, Any]] = []
app = FastAPI()


def part(obj: dict[str, Any]) -> str:
    return f"data: {json.dumps(obj)}\n\n"


@app.post("/api/chat")
async def chat(request: Request) -> StreamingResponse:
    body = await request.json()
    run: dict[str, Any] = {"chat": body.get("id"), "ended": None}
    RUNS.append(run)

    async def answer() -> AsyncIterator[str]:
        try:
            yield part({"type": "start", "messageId": "m-" + str(len(RUNS))})
            yield part({"type": "text-start", "id": "t1"})
            for word in WORDS:
                await anyio.sleep(EVERY)
                yield part({"type": "text-delta", "id": "t1", "delta": word})
            yield part({"type": "text-end", "id": "t1"}) + part({"type": "finish"}) + "data: [DONE]\n\n"
            run["ended"] = "finished"
        except BaseException:
            run["ended"] = "cancelled"
            raise

    headers = {"x-vercel-ai-ui-message-stream": "v1"}
    return StreamingResponse(answer(), media_type="text/event-stream", headers=headers)


@app.get("/runs")
async def runs() -> list[dict[str, Any]]:
    return RUNS


if os.environ.get("TEST_WRAP") == "1":
    app = StreamingMiddleware(app)  # type: ignore[assignment]
