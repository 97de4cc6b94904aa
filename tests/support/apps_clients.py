"""The raw ASGI app the stuck-client tests serve (``tests/e2e/test_stuck_clients.py``), on uvicorn and
hypercorn. Raw ASGI, so that a cancellation lands in the app's own ``try`` (no generator left to the
garbage collector): what the app did is exactly what it records.

``GET /flood?id=X&size=B&every=S&n=N`` writes ``data: <i> <B bytes>`` events, one every S seconds, N of
them (0: forever). ``GET /state?id=X`` says how many it wrote and how it ended: ``null`` while it runs
(or is held in a ``send``), ``"finished"``, or ``"cancelled"`` (its cleanup ran on a cancellation).
With ``TEST_WRAP=1`` the middleware is in front, its settings from ``SSE_MIDDLEWARE_*``.
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import parse_qs

import anyio

from sse_middleware import StreamingMiddleware

STATE: dict[str, dict[str, Any]] = {}


async def _flood(query: dict[str, str], send: Any) -> None:
    ident = query.get("id", "x")
    size, every, n = (
        int(query.get("size", "16384")),
        float(query.get("every", "0.01")),
        int(query.get("n", "0")),
    )
    state = STATE[ident] = {"sent": 0, "ended": None}
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
    )
    try:
        i = 0
        while n == 0 or i < n:
            i += 1
            await send(
                {
                    "type": "http.response.body",
                    "body": b"data: %d %s\n\n" % (i, b"x" * size),
                    "more_body": True,
                }
            )
            state["sent"] = i
            await anyio.sleep(every)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        state["ended"] = "finished"
    except anyio.get_cancelled_exc_class():
        state["ended"] = "cancelled"
        raise


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
        return
    query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
    if scope["path"] == "/flood":
        await _flood(query, send)
        return
    data = json.dumps(STATE.get(query.get("id", ""))).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": data})


if os.environ.get("TEST_WRAP") == "1":
    app = StreamingMiddleware(app)  # type: ignore[assignment]
