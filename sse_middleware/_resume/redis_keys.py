"""The Redis store's keys, timings and round trips, shared by its store, writer and reader (see
:mod:`.redis_store` for what each key holds)."""

from __future__ import annotations

from typing import Any, Final

from .redis_connect import FAILURES
from .store import StoreError

TOUCH: Final = 2.0  # seconds between a live producer's (and a follower's) signs of life
GATHER: Final = 0.05
"""Seconds a flush waits after the one before, so that one round trip carries the events of a whole
coalescing window: a pipeline costs far more CPU than a token's trip through the middleware. Followers
elsewhere see events this much later; a producer host that dies loses at most this much of its log."""
ALIVE_MS: Final = int(TOUCH * 3 * 1000)


def chat_key(chat: str) -> str:
    """A chat's index: the id of its latest stream, kept as long as that stream's keys (a tag of its own:
    it is read alone, before the stream is known)."""
    return f"sse_middleware:chat:{{{chat}}}"


def stop_key(stream: str) -> str:
    return f"sse_middleware:{{{stream}}}:stop"


def request_key(stream: str) -> str:
    """The request kept with a log, apart from its info: only a takeover reads it (it may be 1 MiB)."""
    return f"sse_middleware:{{{stream}}}:request"


def keys(stream: str) -> tuple[str, str, str, str]:
    base = f"sse_middleware:{{{stream}}}"
    return base, base + ":info", base + ":writer", base + ":readers"


def lease_ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def live_ms(ttl: float) -> int:
    """A live log's keys are refreshed every TOUCH seconds; they must outlive a few missed refreshes."""
    return int(max(ttl, 3 * TOUCH) * 1000) + ALIVE_MS


def split_id(entry_id: bytes) -> tuple[int, int]:
    seq, _, kind = entry_id.partition(b"-")
    return int(seq), int(kind or 0)


async def execute(pipe: Any) -> list[Any]:
    try:
        return list(await pipe.execute())
    except FAILURES as exc:
        raise StoreError(f"redis: {type(exc).__name__}: {exc}") from exc
