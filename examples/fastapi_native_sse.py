"""FastAPI's native Server-Sent Events (``fastapi.sse``, FastAPI 0.135 or later) behind the middleware.

Run::

    python examples/fastapi_native_sse.py [--port 8000]
    curl -N http://127.0.0.1:8000/tokens
    curl -N 'http://127.0.0.1:8000/tokens?fail=1'    # a StreamError mid-stream: "event: error", verbatim

FastAPI encodes each yielded ``ServerSentEvent`` and already sends keep-alive pings every 15 s and
``X-Accel-Buffering: no``. The middleware adds what it lacks: ``Cache-Control: no-transform`` (so a
compressing proxy leaves the stream alone), an error event instead of a dropped connection when the
generator raises, one span with TTFT and TPOT per stream, and a clean end on server shutdown.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterable

import anyio
import uvicorn
from fastapi import FastAPI
from fastapi.sse import EventSourceResponse, ServerSentEvent

from sse_middleware import StreamError, StreamingMiddleware

app = FastAPI(title="FastAPI native SSE example")
app.add_middleware(StreamingMiddleware)

WORDS = ["FastAPI", "encodes", "every", "yielded", "item", "as", "one", "Server-Sent", "Event."]


@app.get("/tokens", response_class=EventSourceResponse)
async def tokens(fail: bool = False) -> AsyncIterable[ServerSentEvent]:
    for i, word in enumerate(WORDS):
        if fail and i == len(WORDS) // 2:
            # StreamError's message is meant for the client; any other exception's is hidden.
            raise StreamError("the model is overloaded, try again in a minute", type="overloaded")
        await anyio.sleep(0.05)
        yield ServerSentEvent(data={"text": word + " "}, event="token", id=str(i))
    yield ServerSentEvent(raw_data="[DONE]", event="done")


def main() -> None:
    parser = argparse.ArgumentParser(description="FastAPI native SSE example")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    print(f"SSE stream: http://{args.host}:{args.port}/tokens", flush=True)
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
