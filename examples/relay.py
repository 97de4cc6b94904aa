"""Relay an upstream LLM stream (Anthropic or OpenAI) through your own endpoint with httpx.

Run::

    python examples/relay.py [--port 8000]

It serves ``POST /v1/messages`` (Anthropic Messages API) and ``POST /v1/chat/completions`` (OpenAI),
forwarding each request upstream and relaying the stream back as it arrives. With
``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY`` set the upstream is the real API; without a key, a small
fake upstream starts in this process on 127.0.0.1, so the example works offline::

    from anthropic import Anthropic
    client = Anthropic(base_url="http://127.0.0.1:8000", api_key="unused")
    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=200,
                                messages=[{"role": "user", "content": "hi"}]) as stream:
        for text in stream.text_stream:
            print(text, end="", flush=True)

The relay adds nothing of its own: ``StreamingMiddleware`` coalesces the provider's per-token events,
keeps the client connection alive while upstream is silent, and if upstream breaks mid-stream the client
gets the provider's own error event (``event: error`` for Anthropic, ``{"error": ...}`` for OpenAI)
instead of a dropped connection.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from sse_middleware import StreamingMiddleware

ANSWER = "Relayed token by token from upstream, then coalesced by the middleware on the way out. ✅"

# --- a fake upstream, used when no API key is set -------------------------------------------------


def _sse(event: str | None, data: object) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def _fake_anthropic(request: Request) -> StreamingResponse:
    body = await request.json()
    words = [w + " " for w in ANSWER.split()]

    async def events() -> AsyncIterator[bytes]:
        usage = {"input_tokens": 12, "output_tokens": 1}
        message = {"id": "msg_fake", "type": "message", "role": "assistant", "content": [],
                   "model": body.get("model", "fake"), "stop_reason": None, "stop_sequence": None,
                   "usage": usage}
        yield _sse("message_start", {"type": "message_start", "message": message})
        yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}})
        yield _sse("ping", {"type": "ping"})
        for word in words:
            await anyio.sleep(0.02)
            yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": word}})
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        yield _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                   "stop_sequence": None}, "usage": {"output_tokens": len(words)}})
        yield _sse("message_stop", {"type": "message_stop"})

    return StreamingResponse(events(), media_type="text/event-stream")


async def _fake_openai(request: Request) -> StreamingResponse:
    body = await request.json()
    created = int(time.time())

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        return _sse(None, {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": created,
                           "model": body.get("model", "fake"),
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    async def events() -> AsyncIterator[bytes]:
        yield chunk({"role": "assistant", "content": ""})
        for word in ANSWER.split():
            await anyio.sleep(0.02)
            yield chunk({"content": word + " "})
        yield chunk({}, "stop")
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


fake_upstream = Starlette(routes=[Route("/v1/messages", _fake_anthropic, methods=["POST"]),
                                  Route("/v1/chat/completions", _fake_openai, methods=["POST"])])


@contextlib.contextmanager
def running_fake_upstream() -> Iterator[str]:
    """Serve ``fake_upstream`` from a thread on a free 127.0.0.1 port; yield its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(fake_upstream, lifespan="off", log_config=None))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()


# --- the relay ----------------------------------------------------------------------------------


def upstreams(fake_base: str | None) -> dict[str, tuple[str, dict[str, str]]]:
    """Path -> (upstream URL, auth headers): the real provider when its key is set, else the fake."""
    anthropic_key, openai_key = os.environ.get("ANTHROPIC_API_KEY"), os.environ.get("OPENAI_API_KEY")
    anthropic_base = "https://api.anthropic.com" if anthropic_key else fake_base
    openai_base = "https://api.openai.com" if openai_key else fake_base
    return {
        "/v1/messages": (f"{anthropic_base}/v1/messages",
                         {"x-api-key": anthropic_key or "fake", "anthropic-version": "2023-06-01"}),
        "/v1/chat/completions": (f"{openai_base}/v1/chat/completions",
                                 {"authorization": f"Bearer {openai_key or 'fake'}"}),
    }


async def relay(request: Request) -> Response:
    url, auth = request.app.state.upstreams[request.url.path]
    client: httpx.AsyncClient = request.app.state.client
    upstream_request = client.build_request("POST", url, content=await request.body(), headers={
        **auth, "content-type": "application/json", "accept-encoding": "identity"})
    upstream = await client.send(upstream_request, stream=True)
    media_type = upstream.headers.get("content-type", "application/json")
    if upstream.status_code != 200 or not media_type.startswith("text/event-stream"):
        content = await upstream.aread()  # an error or a non-streaming answer: relay it whole
        await upstream.aclose()
        return Response(content, status_code=upstream.status_code, media_type=media_type)
    # httpx raises if upstream breaks mid-stream; the middleware turns that into the dialect's error event.
    return StreamingResponse(upstream.aiter_bytes(), media_type=media_type,
                             background=BackgroundTask(upstream.aclose))


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    needs_fake = not (os.environ.get("ANTHROPIC_API_KEY") and os.environ.get("OPENAI_API_KEY"))
    with contextlib.ExitStack() as stack:
        fake_base = stack.enter_context(running_fake_upstream()) if needs_fake else None
        app.state.upstreams = upstreams(fake_base)
        timeout = httpx.Timeout(connect=10, read=300, write=30, pool=10)
        async with httpx.AsyncClient(timeout=timeout) as client:
            app.state.client = client
            yield


app = Starlette(
    routes=[Route(path, relay, methods=["POST"]) for path in ("/v1/messages", "/v1/chat/completions")],
    middleware=[Middleware(StreamingMiddleware)],
    lifespan=lifespan,
)


def main() -> None:
    parser = argparse.ArgumentParser(description="Relay an Anthropic or OpenAI stream")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        upstream = "set: relaying to the real API" if os.environ.get(name) else "not set: using a local fake"
        print(f"{name} {upstream}")
    print(f"relay: http://{args.host}:{args.port}/v1/messages and /v1/chat/completions", flush=True)
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
