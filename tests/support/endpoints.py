"""What the apps the e2e tests serve share: a number from the query string, the mark file a generator
writes from its ``finally`` (in ``TEST_MARKS``, so a test sees it was stopped, not abandoned), and the
``/silence`` endpoint."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
from starlette.requests import Request
from starlette.responses import StreamingResponse

from sse_middleware import override

MARKS = Path(os.environ.get("TEST_MARKS", "/tmp/sse-test-marks"))


def number(request: Request, name: str, default: float) -> float:
    return float(request.query_params.get(name, default))


def mark(name: str) -> None:
    MARKS.mkdir(parents=True, exist_ok=True)
    (MARKS / name).write_text("done")


async def silence(request: Request) -> StreamingResponse:
    """Half an event, a silence, the rest (``gap`` seconds each): a heartbeat must never land inside it.
    ``hb`` sets this request's heartbeat_interval."""
    if "hb" in request.query_params:
        override(request.scope, heartbeat_interval=number(request, "hb", 0.2))
    gap = number(request, "gap", 0.6)

    async def gen() -> AsyncIterator[str]:
        yield "data: before\n\n"
        await anyio.sleep(gap)
        yield "data: hel"
        await anyio.sleep(gap)
        yield "lo\n\n"
        await anyio.sleep(gap)
        yield "data: after\n\n"

    return StreamingResponse(gen(), media_type="text/event-stream")
