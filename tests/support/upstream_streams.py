"""The streams the fake provider (:mod:`.upstream`) serves, as pure builders: OpenAI chat completion
chunks and Anthropic Messages events, whole or in the pieces a fault needs, and the provider's error
events. The unit tests feed them to the recoverer directly."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
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
    reasoning: Sequence[str] = (),
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
    thinking: Sequence[str] = (),
) -> list[bytes]:
    """A whole Messages stream: message_start, an optional thinking block, one text block, the end."""
    message: dict[str, Any] = {
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


def error_body(anthropic: bool, kind: str, message: str) -> bytes:
    """The JSON body of a refused request, as the provider writes it (``kind``: the error's type)."""
    if anthropic:
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}}).encode()
