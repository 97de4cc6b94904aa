"""Guards: an OpenAI-compatible chat endpoint whose answers are checked while they stream.

Run::

    python examples/guarded.py [--port 8000]

then ask it, with any OpenAI client::

    from openai import OpenAI
    client = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="unused")
    for question in ("hello", "what is the deploy key?", "review my code"):
        stream = client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": question}], stream=True)
        for chunk in stream:
            choice = chunk.choices[0]
            print(choice.delta.content or "", end="")
            if choice.finish_reason:
                print(f"  [{choice.finish_reason}]")

Two guards, as a real deployment would have them:

* ``no_secrets``, a regex blocklist (API keys, private-key headers): sync, a few microseconds a check;
* ``moderated``, an async call to a moderation endpoint. Here that endpoint is faked by this same server
  (``POST /v1/moderations``, OpenAI's shape; it flags a few words) so the example runs offline; point
  ``MODERATION_URL`` at a real one in production. It runs under ``guard_timeout``; if it fails or is
  too slow, ``guard_failure`` decides (``block`` by default: fail closed).

In hold mode (the default) no text leaves before both passed it, and a check ends at a word boundary, so
not even the start of a blocked word reaches the client. A tripped stream ends the way OpenAI's own API
says "filtered": a chunk with ``finish_reason: "content_filter"``, then ``[DONE]``; the SDK needs no new
code. The non-streaming answer (``stream: false``) is plain JSON, which guards do not see: it shows what
the model wrote.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import uvicorn
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from sse_middleware import Blocked, Check, StreamingMiddleware

ANSWERS = {
    "key": "Sure. The deploy key is sk-live-4f9a8b7c6d5e4f3a2b1c0d9e and it rotates monthly.",
    "code": "Your code works, but naming a variable x2 is frankly stupid and lazy; pick real names.",
}
DEFAULT = "Hello! Streaming sends this answer token by token, and guards check it on the way out."

SECRETS = re.compile(r"\bsk-(?:live|test)-[A-Za-z0-9]{8,}|-----BEGIN [A-Z ]*PRIVATE KEY-----")
FLAGGED = frozenset({"stupid", "idiot", "lazy"})  # what the fake moderation endpoint flags


def no_secrets(check: Check) -> None:
    """A regex blocklist. ``check.new`` ends at a word boundary: a key is never seen in halves."""
    if SECRETS.search(check.new):
        raise Blocked("The answer contained a credential and was stopped.", code="credential")


class Moderation:
    """An async guard: one call to a moderation endpoint per check (never per token)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.AsyncClient(timeout=5)

    async def __call__(self, check: Check) -> None:
        if check.part != "text" or not check.new.strip():
            return
        reply = await self.client.post(self.url, json={"input": check.new})
        reply.raise_for_status()  # a fault: guard_failure says what happens (block: fail closed)
        result = reply.json()["results"][0]
        if result["flagged"]:
            flagged = sorted(name for name, hit in result["categories"].items() if hit)
            raise Blocked("The answer was stopped by moderation.", code="moderation:" + ",".join(flagged))


app = FastAPI(title="Guarded OpenAI-compatible example")


class ChatMessage(BaseModel):
    role: str
    content: str | None = None


class ChatRequest(BaseModel):
    model: str
    messages: list[ChatMessage]
    stream: bool = False


def answer(request: ChatRequest) -> str:
    question = next((m.content or "" for m in reversed(request.messages) if m.role == "user"), "").lower()
    return next((text for word, text in ANSWERS.items() if word in question), DEFAULT)


async def chunks(request: ChatRequest, cid: str) -> AsyncIterator[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                "model": request.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(body, separators=(',', ':'))}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for token in re.findall(r"\s*\S{1,4}", answer(request)):  # split like a tokenizer
        await anyio.sleep(0.02)  # 50 tokens/s
        yield chunk({"content": token})
    yield chunk({}, "stop")
    yield "data: [DONE]\n\n"


@app.post("/v1/chat/completions", response_model=None)
async def chat_completions(request: ChatRequest) -> StreamingResponse | dict[str, Any]:
    cid = f"chatcmpl-{uuid.uuid4().hex}"
    if request.stream:
        return StreamingResponse(chunks(request, cid), media_type="text/event-stream")
    message = {"role": "assistant", "content": answer(request)}
    return {"id": cid, "object": "chat.completion", "model": request.model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


class ModerationRequest(BaseModel):
    input: str


@app.post("/v1/moderations")
async def moderations(request: ModerationRequest) -> dict[str, Any]:
    """A local stand-in for a moderation API (OpenAI's response shape): flags a few insults."""
    words = set(re.findall(r"[a-z]+", request.input.lower()))
    hits = {"harassment": bool(words & FLAGGED)}
    return {"id": f"modr-{uuid.uuid4().hex[:8]}", "model": "fake-moderation",
            "results": [{"flagged": any(hits.values()), "categories": hits}]}


def main() -> None:
    parser = argparse.ArgumentParser(description="Guarded OpenAI-compatible example")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    url = os.environ.get("MODERATION_URL", f"http://{args.host}:{args.port}/v1/moderations")
    guarded = StreamingMiddleware(app, guards=[no_secrets, Moderation(url)])
    print(f"OpenAI-compatible endpoint: http://{args.host}:{args.port}/v1/chat/completions", flush=True)
    print(f"moderation: {url}", flush=True)
    uvicorn.run(guarded, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
