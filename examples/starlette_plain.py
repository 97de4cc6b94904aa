"""Plain Starlette: a ``StreamingResponse`` of ``text/event-stream``, wrapped in the middleware.

Run::

    python examples/starlette_plain.py [--port 8000]
    curl -N http://127.0.0.1:8000/stream              # events, then "event: done"
    curl -N 'http://127.0.0.1:8000/stream?fail=1'     # an exception mid-stream becomes "event: error"

Generic SSE events are never merged or altered: the middleware adds the anti-buffering headers, sends a
``: ping`` comment after 15 s of silence, and when the generator raises after the response has
started, ends the stream with an ``event: error`` the client can handle instead of a dropped
connection. The exception's own message stays in the server log (it may hold secrets); raise
``sse_middleware.StreamError`` for a message that is meant for the client.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from sse_middleware import StreamingMiddleware

TEXT = "Server-Sent Events are plain HTTP: one long response, one event per message."
WORDS = TEXT.split(" ")


async def events(fail: bool) -> AsyncIterator[str]:
    for i, word in enumerate(WORDS):
        if fail and i == len(WORDS) // 2:
            raise RuntimeError("database password rejected for user 'admin'")  # never shown to clients
        await anyio.sleep(0.05)
        yield f"data: {json.dumps({'text': word + ' '})}\n\n"
    yield "event: done\ndata: {}\n\n"


async def stream(request: Request) -> StreamingResponse:
    return StreamingResponse(events(request.query_params.get("fail") == "1"), media_type="text/event-stream")


app = Starlette(routes=[Route("/stream", stream)], middleware=[Middleware(StreamingMiddleware)])


def main() -> None:
    parser = argparse.ArgumentParser(description="Plain Starlette SSE example")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    print(f"SSE stream: http://{args.host}:{args.port}/stream", flush=True)
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
