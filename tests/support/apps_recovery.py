"""Apps that relay the fake failing upstream (:mod:`tests.support.upstream`, at ``UPSTREAM_URL``) with the
official SDKs, as a real gateway would, behind the middleware (its settings from ``SSE_MIDDLEWARE_*``;
``TEST_WRAP=0``: without it, the control).

* ``POST /v1/chat/completions``: ``openai.AsyncOpenAI`` streams the request's body and relays each chunk;
* ``POST /v1/messages``: ``anthropic.AsyncAnthropic`` the same for Messages events;
* ``POST /raw/v1/chat/completions``, ``POST /raw/v1/messages``: the upstream's bytes relayed with httpx,
  so the provider's own error event reaches the middleware as it is.

The ``x-fault*`` and ``x-answer`` headers go on to the upstream. Query ``recover``: this route's
``override(scope, recover=...)``. Query ``on_rerun``: what the app does with ``recovery()``: ``same`` (asks
the same again; a restart), ``prefill`` (asks its upstream to continue ``recovery().text``, as the docs'
recipe does), ``fallback`` (the same, from ``UPSTREAM2_URL``, the second provider). ``GET /runs`` counts
the runs of the app per ``x-fault-key`` with the recovery each saw.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import openai
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from starlette.types import ASGIApp

from sse_middleware import StreamingMiddleware, override, recovery

UPSTREAM = os.environ.get("UPSTREAM_URL", "http://127.0.0.1:9")
UPSTREAM2 = os.environ.get("UPSTREAM2_URL", UPSTREAM)
_PASSED = ("x-fault", "x-fault-times", "x-fault-key", "x-answer", "x-id")

api = FastAPI()
runs: dict[str, list[Any]] = {}


def _prepare(request: Request, body: dict[str, Any], anthropic_shape: bool) -> tuple[str, dict[str, str]]:
    """The upstream to call and the headers to pass; the body changed as ``on_rerun`` says."""
    query = request.query_params
    if "recover" in query:
        override(request.scope, recover=query["recover"])  # type: ignore[typeddict-item]
    headers = {name: request.headers[name] for name in _PASSED if name in request.headers}
    headers.update({name: query[name] for name in _PASSED if name in query})  # a client without headers
    found = recovery(request)
    runs.setdefault(headers.get("x-fault-key", ""), []).append(
        None if found is None else {"attempt": found.attempt, "reason": found.reason, "text": found.text}
    )
    on_rerun = query.get("on_rerun", "same")
    if found is None or on_rerun == "same":
        return UPSTREAM, headers
    if found.text:
        prefill: dict[str, Any] = {"role": "assistant", "content": found.text}
        if anthropic_shape:
            prefill["content"] = found.text.rstrip()  # the API rejects a final turn ending in whitespace
        else:
            prefill["prefix"] = True
            body["continue_final_message"], body["add_generation_prompt"] = True, False
        body["messages"] = [*body["messages"], prefill]
    return (UPSTREAM2 if on_rerun == "fallback" else UPSTREAM), headers


@api.post("/v1/chat/completions")
async def chat(request: Request) -> StreamingResponse:
    body = await request.json()
    base, headers = _prepare(request, body, anthropic_shape=False)
    client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="test", max_retries=0)
    extra = {k: body.pop(k) for k in ("continue_final_message", "add_generation_prompt") if k in body}
    extra.update(body.pop("extra_body", None) or {})  # recover_body="prefill" puts vLLM's fields there
    stream = await client.chat.completions.create(**body, extra_headers=headers, extra_body=extra or None)

    async def relay() -> AsyncIterator[str]:
        async for chunk in stream:
            yield f"data: {chunk.model_dump_json(exclude_unset=True)}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(relay(), media_type="text/event-stream")


@api.post("/v1/messages")
async def messages(request: Request) -> StreamingResponse:
    body = await request.json()
    base, headers = _prepare(request, body, anthropic_shape=True)
    client = anthropic.AsyncAnthropic(base_url=base, api_key="test", max_retries=0)
    stream = await client.messages.create(**body, extra_headers=headers)

    async def relay() -> AsyncIterator[str]:
        async for event in stream:
            yield f"event: {event.type}\ndata: {event.model_dump_json(exclude_unset=True)}\n\n"

    return StreamingResponse(relay(), media_type="text/event-stream")


@api.post("/raw/{path:path}")
async def raw(path: str, request: Request) -> StreamingResponse:
    body = await request.json()
    base, headers = _prepare(request, body, anthropic_shape=path.endswith("messages"))
    client = httpx.AsyncClient(base_url=base, timeout=None)
    upstream = await client.send(
        client.build_request("POST", "/" + path, json=body, headers=headers), stream=True
    )

    async def relay() -> AsyncIterator[bytes]:
        try:
            async for chunk in upstream.aiter_raw():
                yield chunk
        finally:
            await upstream.aclose()
            await client.aclose()

    return StreamingResponse(relay(), status_code=upstream.status_code, media_type="text/event-stream")


@api.post("/api/chat")
async def ui_chat(request: Request) -> StreamingResponse:
    """The AI SDK's UI message stream (what ``useChat`` reads), written from the upstream's chat chunks."""
    chat_body = {"model": "fake-gpt", "messages": [{"role": "user", "content": "Why stream?"}]}
    base, headers = _prepare(request, chat_body, anthropic_shape=False)
    client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="test", max_retries=0)
    stream = await client.chat.completions.create(**chat_body, stream=True, extra_headers=headers)

    async def relay() -> AsyncIterator[str]:
        part = '{"type":"text-delta","id":"t0","delta":%s}'
        yield 'data: {"type":"start","messageId":"m1"}\n\ndata: {"type":"start-step"}\n\n'
        yield 'data: {"type":"text-start","id":"t0"}\n\n'
        async for chunk in stream:
            for choice in chunk.choices:
                if choice.delta.content:
                    yield "data: " + part % json.dumps(choice.delta.content) + "\n\n"
        yield 'data: {"type":"text-end","id":"t0"}\n\ndata: {"type":"finish-step"}\n\n'
        yield 'data: {"type":"finish"}\n\ndata: [DONE]\n\n'

    ui = {"x-vercel-ai-ui-message-stream": "v1"}
    return StreamingResponse(relay(), media_type="text/event-stream", headers=ui)


@api.get("/runs/{key}")
async def runs_of(key: str) -> list[Any]:
    return runs.get(key, [])


def build(wrap: bool) -> ASGIApp:
    return StreamingMiddleware(api) if wrap else api


app = build(os.environ.get("TEST_WRAP", "1") == "1")
