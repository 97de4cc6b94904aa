"""A fake LLM provider on 127.0.0.1 that fails on request: OpenAI chat completions and Anthropic messages
over SSE, each able to continue a prefilled assistant turn, and the pure stream builders it serves.

Served with uvicorn (``tests.support.upstream:app``). A request picks its fault with headers:

* ``x-fault``: ``cut@N`` (the connection closes after N tokens, without the chunked body's end: what a
  reset looks like to an HTTP client), ``overload@N`` (the provider's own error event after N tokens:
  Anthropic ``overloaded_error``, OpenAI an ``{"error": ...}`` chunk), ``stall@N`` (silence after N tokens,
  until the client leaves), ``truncate@N`` (a clean end after N tokens, without the end marker);
* ``x-fault-times``: how many requests of the same ``x-fault-key`` get the fault (default 1: the first;
  ``0`` every one), so a test's re-run succeeds or fails as it wants;
* ``x-answer``: the answer's text (a default otherwise); ``x-id``: the response's id prefix.

``GET /requests/{key}`` returns the JSON bodies received for ``x-fault-key`` ``key``, so a test can see
what the re-run asked (a prefill, and never a system prompt of ours).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

ANSWER = (
    "Streaming moves the wait a person feels from the end of the answer to its first token. "
    "A proxy that buffers takes that back, and so does a provider that fails half way through: "
    "then the client has part of an answer and an error, unless something continues it."
)
_TOKEN = re.compile(r"\S+\s*|\s+")


def tokens(text: str) -> list[str]:
    """Word-sized tokens (each word with the whitespace after it), joined back to ``text`` exactly."""
    return _TOKEN.findall(text)


def sse(obj: Any, name: str | None = None) -> bytes:
    data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return ((f"event: {name}\n" if name else "") + f"data: {data}\n\n").encode()


# -- OpenAI chat completions ----------------------------------------------------------------------------
def chat_chunk(ident: str, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    body = {"id": ident, "object": "chat.completion.chunk", "created": 1700000000, "model": "fake-gpt"}
    return sse({**body, "choices": [choice], **extra})


def chat_events(
    parts: list[str],
    ident: str = "chatcmpl-1",
    *,
    usage: tuple[int, int] | None = None,
    reasoning: list[str] = (),
) -> list[bytes]:
    """A whole chat stream: the role chunk, reasoning then text deltas, the finish chunk, usage, [DONE]."""
    out = [chat_chunk(ident, {"role": "assistant", "content": ""})]
    out += [chat_chunk(ident, {"reasoning_content": part}) for part in reasoning]
    out += [chat_chunk(ident, {"content": part}) for part in parts]
    out.append(chat_chunk(ident, {}, "stop"))
    if usage is not None:
        counts = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
        out.append(
            sse(
                {
                    "id": ident,
                    "object": "chat.completion.chunk",
                    "created": 1700000000,
                    "model": "fake-gpt",
                    "choices": [],
                    "usage": counts,
                }
            )
        )
    out.append(b"data: [DONE]\n\n")
    return out


def chat_error() -> bytes:
    return sse(
        {"error": {"message": "The server had an error", "type": "server_error", "param": None, "code": None}}
    )


# -- Anthropic messages ---------------------------------------------------------------------------------
def anthropic_events(
    parts: list[str],
    ident: str = "msg_1",
    *,
    usage: tuple[int, int] = (20, 0),
    thinking: list[str] = (),
) -> list[bytes]:
    """A whole Messages stream: message_start, an optional thinking block, one text block, the end."""
    message = {
        "id": ident,
        "type": "message",
        "role": "assistant",
        "model": "fake-claude",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": 1},
    }
    out = [sse({"type": "message_start", "message": message}, "message_start")]
    index = 0
    if thinking:
        out.append(_block_start(index, {"type": "thinking", "thinking": "", "signature": ""}))
        out += [_block_delta(index, {"type": "thinking_delta", "thinking": part}) for part in thinking]
        out.append(_block_delta(index, {"type": "signature_delta", "signature": "c2lnbmVk"}))
        out.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1
    out.append(_block_start(index, {"type": "text", "text": ""}))
    out.append(sse({"type": "ping"}, "ping"))
    out += [_block_delta(index, {"type": "text_delta", "text": part}) for part in parts]
    out.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": usage[1] or len(parts)},
    }
    out.append(sse(delta, "message_delta"))
    out.append(sse({"type": "message_stop"}, "message_stop"))
    return out


def _block_start(index: int, block: dict[str, Any]) -> bytes:
    return sse({"type": "content_block_start", "index": index, "content_block": block}, "content_block_start")


def _block_delta(index: int, delta: dict[str, Any]) -> bytes:
    return sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")


def anthropic_error(kind: str = "overloaded_error") -> bytes:
    return sse({"type": "error", "error": {"type": kind, "message": "Overloaded"}}, "error")


# -- the server -----------------------------------------------------------------------------------------
_SEEN: dict[str, list[Any]] = {}  # x-fault-key -> the request bodies received


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


def _fault(headers: dict[str, str], key: str) -> tuple[str, int] | None:
    spec = headers.get("x-fault")
    if not spec:
        return None
    times = int(headers.get("x-fault-times", "1"))
    if times and len(_SEEN.get(key, ())) > times:
        return None
    kind, _, at = spec.partition("@")
    return kind, int(at or 0)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    if scope["type"] != "http":
        return
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    path = scope["path"]
    if path.startswith("/requests/"):
        body = json.dumps(_SEEN.get(path.rsplit("/", 1)[1], [])).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})
        return
    raw = b""
    while True:
        message = await receive()
        raw += message.get("body", b"")
        if not message.get("more_body"):
            break
    request = json.loads(raw or b"{}")
    key = headers.get("x-fault-key", "")
    _SEEN.setdefault(key, []).append(request)
    anthropic = path.endswith("/messages")
    answer = headers.get("x-answer", ANSWER)
    text = _continuation(answer, _prefilled(request, anthropic))
    parts = tokens(text)
    attempt = len(_SEEN[key])
    prefix = headers.get("x-id", "msg" if anthropic else "chatcmpl")
    ident = f"{prefix}-{attempt}"
    if anthropic:
        events = anthropic_events(parts, ident, usage=(30 + attempt, len(parts)))
        first_text = 3  # message_start, content_block_start, ping
        error = anthropic_error()
    else:
        usage = (25, len(parts)) if (request.get("stream_options") or {}).get("include_usage") else None
        events = chat_events(parts, ident, usage=usage)
        first_text = 1
        error = chat_error()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
        }
    )
    fault = _fault(headers, key)
    for i, event in enumerate(events):
        if fault is not None and i == first_text + fault[1]:
            kind = fault[0]
            if kind == "cut":
                raise ConnectionResetError("the fake upstream cuts the connection")
            if kind == "overload":
                await send({"type": "http.response.body", "body": error, "more_body": True})
                break
            if kind == "stall":  # silence until the client leaves (then the server's send does nothing)
                while (await receive())["type"] != "http.disconnect":
                    pass
            if kind == "truncate":
                break
        await send({"type": "http.response.body", "body": event, "more_body": True})
        await asyncio.sleep(0.002)
    await send({"type": "http.response.body", "body": b""})
