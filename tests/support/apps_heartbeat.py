"""The app the heartbeat-and-ids tests serve with uvicorn (``tests/e2e/test_heartbeat_ids.py``).

``POST /v1/chat/completions?ids=…&pause=S``: an OpenAI chat stream (role, the tokens, ``stop``,
``[DONE]``) with a silence of ``S`` seconds after the third token, as a tool call or a long prefill
leaves one. ``ids=ours``: the middleware's resume is on, so its log gives every event an id;
``ids=app``: the app writes its own ``id:`` lines (resume off); ``ids=none``: no ids. ``beat=1`` makes
the app write ``: ping`` and a blank line itself during its silence, as a bare server with its own
keep-alive does (the control without the middleware). Heartbeats every 0.2 s (``override``).
``TEST_WRAP=0`` serves it without the middleware.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from starlette.types import ASGIApp

from sse_middleware import StreamingMiddleware, override

from .apps import TOKENS, openai_chunk

api = FastAPI()
BEAT = 0.2


@api.post("/v1/chat/completions")
async def completions(request: Request) -> StreamingResponse:
    query = request.query_params
    ids, pause, beat = query.get("ids", "none"), float(query.get("pause", "0.7")), query.get("beat") == "1"
    override(request.scope, heartbeat_interval=BEAT, resume=ids == "ours")
    frames = [openai_chunk(None, role=True), *map(openai_chunk, TOKENS), openai_chunk(None, finish="stop")]

    async def gen() -> AsyncIterator[str]:
        for i, frame in enumerate(frames):
            yield f"id: {i}\n{frame}" if ids == "app" else frame
            if i == 3:  # the silence: a tool call upstream
                for _ in range(round(pause / BEAT) if beat else 0):
                    await anyio.sleep(BEAT)
                    yield ": ping\n\n"
                await anyio.sleep(0 if beat else pause)
        yield "data: [DONE]\n\n"

    return StreamingResponse(gen(), media_type="text/event-stream")


app: ASGIApp = api if os.environ.get("TEST_WRAP") == "0" else StreamingMiddleware(api)
