"""The one workload every contender streams: OpenAI-style chat chunks, one per token.

Payloads are serialized once per process (outside every timed region), so each contender pays only for
what it does itself: raw yields the finished frame bytes, sse-starlette and FastAPI frame the same
pre-serialized JSON string with their own idiom. The wire bytes are identical for all of them:
``data: {json}\\n\\n`` per token, ~4 characters of English text per token, then a finish chunk and
``data: [DONE]``.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Final

# Prose with sentences, paragraphs and a little markdown, so the coalescer's cut rules are exercised the
# way real answers exercise them. Split into ~4-character tokens (word pieces keep their leading space).
_TEXT: Final = (
    "Streaming does not make generation faster; it moves the wait a person feels from the end of the "
    "answer to the first token. A good server sends that token at once, keeps idle connections alive "
    "through long tool calls, and reports errors in band.\n\n"
    "## Why coalesce\n\n"
    "Clients re-render markdown on every frame, so one frame per token costs the reader more than it "
    "gives. Merging tokens into frames of about fifty milliseconds keeps the text smooth and saves "
    "writes: `fewer syscalls` and fewer wakeups for every proxy on the way.\n\n"
    "- first token: never delayed\n- later tokens: at most one window late\n- errors: always in band\n\n"
)


def _split_tokens(text: str) -> list[str]:
    """BPE-like pieces: a word keeps its leading space, long words split every 4 characters."""
    pieces = re.findall(r"\n+| ?[^\s]{1,4}| ", text)
    if "".join(pieces) != text:  # pragma: no cover - a bad edit of _TEXT
        raise ValueError("tokenizer lost text")
    return pieces


TOKENS: Final[list[str]] = _split_tokens(_TEXT)
CHUNK_ID: Final = "chatcmpl-bench0001"
MODEL: Final = "bench-model"


def _chunk(delta: dict[str, str], finish: str | None = None) -> str:
    body = {
        "id": CHUNK_ID,
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return json.dumps(body, separators=(",", ":"))


# Pre-serialized JSON payloads (str) and the matching finished SSE frames (bytes).
ROLE_PAYLOAD: Final = _chunk({"role": "assistant", "content": ""})
TOKEN_PAYLOADS: Final[list[str]] = [_chunk({"content": t}) for t in TOKENS]
FINISH_PAYLOAD: Final = _chunk({}, "stop")
DONE_PAYLOAD: Final = "[DONE]"


def frame(payload: str) -> bytes:
    return b"data: " + payload.encode() + b"\n\n"


ROLE_FRAME: Final = frame(ROLE_PAYLOAD)
TOKEN_FRAMES: Final[list[bytes]] = [frame(p) for p in TOKEN_PAYLOADS]
FINISH_FRAME: Final = frame(FINISH_PAYLOAD)
DONE_FRAME: Final = frame(DONE_PAYLOAD)
MEAN_FRAME_BYTES: Final = sum(map(len, TOKEN_FRAMES)) / len(TOKEN_FRAMES)


def text_chars(n_tokens: int) -> int:
    """Characters of content text in the first ``n_tokens`` tokens (for delivery checks)."""
    full, rest = divmod(n_tokens, len(TOKENS))
    return full * len(_TEXT) + sum(len(t) for t in TOKENS[:rest])


@dataclass(frozen=True, slots=True)
class Pace:
    """How a stream is generated. ``rate`` 0 means as fast as possible (no await between tokens)."""

    tokens: int
    rate: float = 0.0
    prefill: float = 0.0
    """Seconds of silence before the first token (a model's prefill)."""
    idle: bool = False
    """Send the role chunk, then stay silent forever (an idle stream waiting on a tool)."""


async def _pause(deadline: float) -> None:
    delay = deadline - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


async def payloads(pace: Pace) -> AsyncIterator[str]:
    """The generator every contender consumes; yields pre-serialized JSON payloads.

    Pacing is against an absolute schedule (start + i / rate), so late wakeups do not drift the rate.
    """
    yield ROLE_PAYLOAD
    if pace.idle:
        await asyncio.Event().wait()  # until the client leaves (cancelled)
    if pace.prefill > 0:
        await asyncio.sleep(pace.prefill)
    n = len(TOKEN_PAYLOADS)
    if pace.rate <= 0:
        for i in range(pace.tokens):
            yield TOKEN_PAYLOADS[i % n]
    else:
        start = time.perf_counter()
        step = 1.0 / pace.rate
        for i in range(pace.tokens):
            yield TOKEN_PAYLOADS[i % n]
            await _pause(start + (i + 1) * step)
    yield FINISH_PAYLOAD
    yield DONE_PAYLOAD


async def frames(pace: Pace) -> AsyncIterator[bytes]:
    """The same stream as finished SSE frames (what a hand-written endpoint yields).

    Duplicates :func:`payloads` rather than wrapping it, so raw pays for one generator, not two.
    """
    yield ROLE_FRAME
    if pace.idle:
        await asyncio.Event().wait()
    if pace.prefill > 0:
        await asyncio.sleep(pace.prefill)
    n = len(TOKEN_FRAMES)
    if pace.rate <= 0:
        for i in range(pace.tokens):
            yield TOKEN_FRAMES[i % n]
    else:
        start = time.perf_counter()
        step = 1.0 / pace.rate
        for i in range(pace.tokens):
            yield TOKEN_FRAMES[i % n]
            await _pause(start + (i + 1) * step)
    yield FINISH_FRAME
    yield DONE_FRAME
