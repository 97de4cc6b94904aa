"""A fake LLM provider on 127.0.0.1 that fails on request: OpenAI chat completions and Anthropic messages
over SSE (the streams of :mod:`.upstream_streams`), each able to continue a prefilled assistant turn, and
OpenAI Responses (a path ending in ``/responses``; :mod:`.responses_streams`), without a prefill.

Served with uvicorn (``tests.support.upstream:app``), it plays two providers: a path under
``/fallback/`` is the fallback's, any other the primary's, so that a relay's re-run can go elsewhere. A
request picks its fault in one of two ways:

* its model name, as failoverbench's fake does: comma-separated ``primary=FAULT``, ``fallback=FAULT``
  and ``run=KEY`` (other parts are the name), e.g. ``"fake,primary=cut@6,fallback=no-prefill,run=3f2a"``:
  each provider plays its own, on every request;
* headers, whichever provider: ``x-fault`` (a FAULT), ``x-fault-times`` (how many requests of the same
  ``x-fault-key`` get it; default 1, the first; ``0`` every one), ``x-answer`` (the answer's text),
  ``x-id`` (the response's id prefix).

The faults a middleware can act on (N counts the answer's tokens; a silence lasts until the client
leaves, or SILENCE seconds):

* ``cut@N``: the connection closes after N tokens, without the chunked body's end (a reset);
* ``overload@N``: the provider's own error event after N tokens (Anthropic ``overloaded_error``, OpenAI
  an ``{"error": ...}`` chunk);
* ``stall@N``: silence after N tokens, then (if the client is still there) a cut;
* ``slow``: the response's headers at once, then silence, then the answer (a slow first token);
* ``truncate@N``: a clean end after N tokens, with neither a finish reason nor the end marker;
* ``no-end``: the whole answer and its finish reason, without the end marker (``data: [DONE]``,
  ``message_stop``);
* ``malformed@N``: token N's event is not JSON; the rest of the stream is whole;
* ``no-prefill``: 400 ``invalid_request_error`` "does not support assistant message prefill" when the
  request's last message is an assistant turn (as newer Claude models answer); any other is answered;
* ``status@S``: status S with the provider's error body, before any stream;
* ``rate-limit@S``: 429 with ``Retry-After: S`` to the first request of its run and provider, and to
  every later one within S seconds of it; then answered.

``GET /requests/{key}``: the JSON bodies received for the key (``x-fault-key``, or the model's ``run``);
``GET /attempts/{key}``: which provider each went to, the status it got, and whether it was a prefill.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from typing import Any

from .responses_streams import MIDDLE, responses_error, responses_events
from .upstream_streams import (
    ANSWER,
    anthropic_error,
    anthropic_events,
    chat_chunk,
    chat_error,
    chat_events,
    error_body,
    sse,
    tokens,
)

__all__ = [  # the builders, for the tests that import them from here
    "ANSWER",
    "anthropic_error",
    "anthropic_events",
    "app",
    "chat_chunk",
    "chat_error",
    "chat_events",
    "sse",
    "tokens",
]

SILENCE = 600.0  # longer than any test waits: a stalled run that is never ended fails its test
PREFILL_REFUSED = (
    "This model does not support assistant message prefill: the last message must be the user's."
)
Fault = tuple[str, int]
Refusal = tuple[int, str, str, "int | None"]

_SEEN: dict[str, list[Any]] = {}  # key -> the request bodies received
_ATTEMPTS: dict[str, list[dict[str, Any]]] = {}  # key -> each request's provider, status, prefill
_LIMITED: dict[tuple[str, str], float] = {}  # (key, provider) -> when its rate limit window ends


def _prefilled(request: dict[str, Any], anthropic: bool) -> str:
    """The assistant text a request asks to continue ("" for none)."""
    messages = request.get("messages") or []
    last = messages[-1] if messages else {}
    if last.get("role") != "assistant":
        return ""
    if not anthropic and not (last.get("prefix") or request.get("continue_final_message")):
        return ""
    content = last.get("content")
    if isinstance(content, list):
        return "".join(block.get("text", "") for block in content if isinstance(block, dict))
    return content if isinstance(content, str) else ""


def _continuation(answer: str, prefix: str) -> str:
    """What the model writes after ``prefix``: the rest of the answer (it knows only one answer)."""
    if prefix and answer.startswith(prefix):
        return answer[len(prefix) :]
    return answer


def _parse(spec: str | None) -> Fault | None:
    if not spec:
        return None
    kind, _, at = spec.partition("@")
    return kind, int(at or 0)


def _chosen(headers: dict[str, str], request: dict[str, Any], provider: str) -> tuple[Fault | None, str]:
    """The fault this request gets, and the key its run is logged under."""
    if "x-fault" in headers or "x-fault-key" in headers:
        key = headers.get("x-fault-key", "")
        times = int(headers.get("x-fault-times", "1"))
        if times and len(_SEEN.get(key, ())) >= times:
            return None, key
        return _parse(headers.get("x-fault")), key
    model = request.get("model")
    parts = (
        dict(part.split("=", 1) for part in model.split(",") if "=" in part) if isinstance(model, str) else {}
    )
    return _parse(parts.get(provider)), parts.get("run", "")


def _refusal(fault: Fault | None, request: dict[str, Any], key: str, provider: str) -> Refusal:
    """(status, error type, message, Retry-After) when the request is refused before any stream; status
    200 when it is not."""
    kind, at = fault or ("", 0)
    if kind == "status":
        return at, "invalid_request_error" if at < 500 else "api_error", f"refused with {at}", None
    if kind == "no-prefill":
        messages = request.get("messages") or []
        if messages and messages[-1].get("role") == "assistant":
            return 400, "invalid_request_error", PREFILL_REFUSED, None
    if kind == "rate-limit":  # a window from the first request on: a retry too early gets a 429 again
        now = time.monotonic()
        wait = math.ceil(_LIMITED.setdefault((key, provider), now + at) - now)
        if wait > 0:
            return 429, "rate_limit_error", f"Rate limited: retry after {wait} s", wait
    return 200, "", "", None


async def _json(send: Any, status: int, body: bytes, *extra: tuple[bytes, bytes]) -> None:
    fields = [(b"content-type", b"application/json"), *extra]
    await send({"type": "http.response.start", "status": status, "headers": fields})
    await send({"type": "http.response.body", "body": body})


async def _gone(receive: Any) -> bool:
    """Silence until the client leaves (True) or SILENCE passes (False)."""

    async def leaving() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    try:
        await asyncio.wait_for(leaving(), SILENCE)
    except asyncio.TimeoutError:
        return False
    return True


async def _body(receive: Any) -> bytes:
    raw = b""
    while True:
        message = await receive()
        raw += bytes(message.get("body", b""))
        if not message.get("more_body"):
            return raw


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    if scope["type"] != "http":
        return
    path = scope["path"]
    for prefix, log in (("/requests/", _SEEN), ("/attempts/", _ATTEMPTS)):
        if path.startswith(prefix):
            await _json(send, 200, json.dumps(log.get(path[len(prefix) :], [])).encode())
            return
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    request = json.loads(await _body(receive) or b"{}")
    provider = "fallback" if path.startswith("/fallback/") else "primary"
    fault, key = _chosen(headers, request, provider)
    _SEEN.setdefault(key, []).append(request)
    anthropic = path.endswith("/messages")
    status, kind, message, wait = _refusal(fault, request, key, provider)
    prefill = bool((request.get("messages") or [{}])[-1].get("role") == "assistant")
    _ATTEMPTS.setdefault(key, []).append({"provider": provider, "status": status, "prefill": prefill})
    if status != 200:
        retry = [] if wait is None else [(b"retry-after", str(wait).encode())]
        await _json(send, status, error_body(anthropic, kind, message), *retry)
        return
    responses = path.endswith("/responses")
    await _stream(send, receive, request, headers, anthropic, fault, len(_SEEN[key]), responses=responses)


async def _stream(
    send: Any,
    receive: Any,
    request: dict[str, Any],
    headers: dict[str, str],
    anthropic: bool,
    fault: Fault | None,
    attempt: int,
    *,
    responses: bool = False,
) -> None:
    text = _continuation(headers.get("x-answer", ANSWER), _prefilled(request, anthropic))
    parts = tokens(text)
    ident = f"{headers.get('x-id', 'msg' if anthropic else 'chatcmpl')}-{attempt}"
    if responses:
        events = responses_events(parts, f"resp-{attempt}", usage=(25, len(parts)))
        first_text, error = MIDDLE, responses_error()
    elif anthropic:
        events = anthropic_events(parts, ident, usage=(30 + attempt, len(parts)))
        first_text = 3  # message_start, content_block_start, ping
        error = anthropic_error()
    else:
        usage = (25, len(parts)) if (request.get("stream_options") or {}).get("include_usage") else None
        events = chat_events(parts, ident, usage=usage)
        first_text = 1
        error = chat_error()
    kind, at = fault or ("", 0)
    if kind == "no-end":
        events = events[:-1]  # the end marker is the last event of both
    start = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": start})
    if kind == "slow" and await _gone(receive):
        return
    for i, event in enumerate(events):
        if i == first_text + at:
            if kind == "cut":
                raise ConnectionResetError("the fake upstream cuts the connection")
            if kind == "overload":
                await send({"type": "http.response.body", "body": error, "more_body": True})
                break
            if kind == "stall":
                if await _gone(receive):
                    return
                raise ConnectionResetError("the fake upstream cuts a stalled connection")
            if kind == "truncate":
                break
            if kind == "malformed":  # the JSON loses its end: still one event, no longer JSON
                event = event.rstrip(b"\n")[:-12] + b"\n\n"
        await send({"type": "http.response.body", "body": event, "more_body": True})
        await asyncio.sleep(0.002)
    await send({"type": "http.response.body", "body": b""})
