"""A relay with a second provider: when the first fails mid-answer, the client still reads one whole answer.

It serves ``POST /v1/chat/completions`` (OpenAI) and ``POST /v1/messages`` (Anthropic), and calls the
providers with their official SDKs. When a provider cuts the connection, stalls, or sends its own error
event, the middleware runs the route again (``recover="continue"``); the route sees ``recovery()`` and
asks the fallback to continue the text the client already has, and the middleware splices that onto
the client's stream (docs/recovery.md, "Recipe: a second provider").

The providers are two base URLs serving both APIs, ``RELAY_PRIMARY_URL`` and ``RELAY_FALLBACK_URL``, with
the keys in ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``. Unset, they are the fake provider the tests use
(tests/support/upstream.py: one server plays both, the fallback under ``/fallback``), which fails on
request; no key needed. With the official SDKs installed
(``pip install -e ".[demo]" openai anthropic``), from the repository's root::

    python -m uvicorn tests.support.upstream:app --port 8001 &
    python examples/relay.py [--port 8000]

and ask for a model that fails, here the primary cutting the connection after six tokens::

    from openai import OpenAI
    client = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="unused")
    for chunk in client.chat.completions.create(
        model="fake,primary=cut@6", messages=[{"role": "user", "content": "hi"}], stream=True
    ):
        print(chunk.choices[0].delta.content or "", end="", flush=True)

Recovery is on and a provider silent for 20 s has failed; ``SSE_MIDDLEWARE_*`` variables override these.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator

import uvicorn
from anthropic import AsyncAnthropic
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from openai import AsyncOpenAI

from sse_middleware import StreamingMiddleware, StreamingSettings, recovery

PRIMARY = os.environ.get("RELAY_PRIMARY_URL", "http://127.0.0.1:8001")
FALLBACK = os.environ.get("RELAY_FALLBACK_URL", "http://127.0.0.1:8001/fallback")
OPENAI_KEY = os.environ.get("OPENAI_API_KEY", "unused")
ANTHROPIC_KEY = os.environ.get("ANTHROPIC_API_KEY", "unused")

# max_retries=0: the middleware decides about re-runs; an SDK retrying on its own would multiply them.
gpt = AsyncOpenAI(base_url=f"{PRIMARY}/v1", api_key=OPENAI_KEY, max_retries=0)
gpt_fallback = AsyncOpenAI(base_url=f"{FALLBACK}/v1", api_key=OPENAI_KEY, max_retries=0)
claude = AsyncAnthropic(base_url=PRIMARY, api_key=ANTHROPIC_KEY, max_retries=0)
claude_fallback = AsyncAnthropic(base_url=FALLBACK, api_key=ANTHROPIC_KEY, max_retries=0)

app = FastAPI()


@app.post("/v1/chat/completions")
async def chat(request: Request) -> StreamingResponse:
    body = await request.json()
    client = gpt
    found = recovery(request)  # None on the first run
    if found is not None:
        client = gpt_fallback
        if found.text:  # continue the client's text: a final assistant turn (DeepSeek's, Mistral's prefix)
            prefill = {"role": "assistant", "content": found.text, "prefix": True}
            body["messages"] = [*body["messages"], prefill]
    stream = await client.chat.completions.create(**body)

    async def relay() -> AsyncIterator[str]:
        finished = False
        async for chunk in stream:
            finished = finished or any(choice.finish_reason for choice in chunk.choices)
            yield f"data: {chunk.model_dump_json(exclude_unset=True)}\n\n"
        if finished:  # the SDK's iteration ends at [DONE] and at a body cut short alike: say which
            yield "data: [DONE]\n\n"

    return StreamingResponse(relay(), media_type="text/event-stream")


@app.post("/v1/messages")
async def messages(request: Request) -> StreamingResponse:
    body = await request.json()
    client = claude
    found = recovery(request)
    if found is not None:
        client = claude_fallback
        if found.text:  # the API rejects a final assistant turn that ends in whitespace
            body["messages"] = [*body["messages"], {"role": "assistant", "content": found.text.rstrip()}]
    stream = await client.messages.create(**body)

    async def relay() -> AsyncIterator[str]:
        async for event in stream:
            yield f"event: {event.type}\ndata: {event.model_dump_json(exclude_unset=True)}\n\n"

    return StreamingResponse(relay(), media_type="text/event-stream")


DEFAULTS = {"SSE_MIDDLEWARE_RECOVER": "continue", "SSE_MIDDLEWARE_STALL_TIMEOUT": "20"}
app.add_middleware(StreamingMiddleware, settings=StreamingSettings.from_env({**DEFAULTS, **os.environ}))


def main() -> None:
    parser = argparse.ArgumentParser(description="Relay OpenAI and Anthropic streams, with a fallback")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    print(f"relay: http://{args.host}:{args.port} -> {PRIMARY}, fallback {FALLBACK}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
