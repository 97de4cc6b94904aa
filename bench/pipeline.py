"""The sans-I/O pipeline alone, on a simulated clock: ``python bench/pipeline.py [RATE ...]``.

No event loop, no server: :class:`sse_middleware._core.pipeline.Pipeline` is fed the workload's frames at
RATE tok/s of simulated time, and ``tick()`` is called at each coalescing deadline, as the timer would.
What is left is the per-token cost of framing, the dialect's delta match, the coalescer and the cut at
each flush, stable to a few % on this machine where server figures move ±20 %. Also times the OpenAI
dialect's ``delta()`` per token frame, the largest single item of the coalescing path.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path.pop(0)
sys.path.insert(0, str(ROOT))

from bench.workload import DONE_FRAME, FINISH_FRAME, ROLE_FRAME, TOKEN_FRAMES  # noqa: E402
from sse_middleware._core import headers  # noqa: E402
from sse_middleware._core.dialects import OpenAIChat  # noqa: E402
from sse_middleware._core.pipeline import Pipeline  # noqa: E402
from sse_middleware._settings import StreamingSettings  # noqa: E402


def per_token(rate: float, coalesce: bool, tokens: int = 6000, streams: int = 6) -> tuple[float, float]:
    """(µs per token, frames per token) for ``streams`` streams at ``rate`` tok/s of simulated time."""
    frames = 0
    settings = StreamingSettings(coalesce=coalesce)
    t0 = time.perf_counter()
    for _ in range(streams):
        pipe = Pipeline(headers.SSE, settings, None)
        now, step = 1000.0, 1.0 / rate
        frames += len(pipe.feed(ROLE_FRAME, now))
        for i in range(tokens // streams):
            now += step
            deadline = pipe.deadline()
            if deadline is not None and deadline <= now:  # the timer fires at the deadline
                frames += len(pipe.tick(deadline))
            frames += len(pipe.feed(TOKEN_FRAMES[i % len(TOKEN_FRAMES)], now))
        frames += len(pipe.feed(FINISH_FRAME + DONE_FRAME, now)) + len(pipe.close())
    return (time.perf_counter() - t0) / tokens * 1e6, frames / tokens


def delta_ns() -> float:
    dialect = OpenAIChat()
    t0 = time.perf_counter()
    for _ in range(10):
        for frame in TOKEN_FRAMES:
            dialect.delta(frame)
    return (time.perf_counter() - t0) / (10 * len(TOKEN_FRAMES)) * 1e9


def main() -> None:
    rates = [float(a) for a in sys.argv[1:]] or [25.0, 100.0, 1000.0]
    rounds = 15
    for rate in rates:  # warm-up: imports, caches, the CPU's clock
        per_token(rate, True)
    ns = [delta_ns() for _ in range(rounds)]
    print(f"OpenAIChat.delta: {min(ns):.0f} ns per token frame (min; median {statistics.median(ns):.0f})")
    for rate in rates:
        for coalesce in (False, True):
            runs = [per_token(rate, coalesce) for _ in range(rounds)]
            us = [r[0] for r in runs]
            print(f"{rate:>6g} tok/s, coalesce {'on ' if coalesce else 'off'}: {min(us):5.2f} us/token "
                  f"(min; median {statistics.median(us):5.2f}), {runs[0][1]:.3f} frames/token")


if __name__ == "__main__":
    main()
