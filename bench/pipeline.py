"""The sans-I/O pipeline alone, on a simulated clock: ``python bench/pipeline.py [--json] [RATE ...]``.

No event loop, no server: :class:`sse_middleware._core.pipeline.Pipeline` is fed one token frame at a
time at RATE tok/s of simulated time, as the responder feeds it (``feed`` then ``deadline``), and
``tick()`` is called at each coalescing deadline, as the watcher would. Three formats carry the same
tokens: OpenAI chat chunks (the workload's frames), Anthropic ``content_block_delta`` events, and a
text/plain byte stream. What is left is the per-token cost of framing, the dialect's delta match, the
coalescer and the cut at each flush: CPU time (``process_time``), the minimum of interleaved rounds, so
that other processes on the machine move it little.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path.pop(0)
sys.path.insert(0, str(ROOT))

from bench.workload import DONE_FRAME, FINISH_FRAME, ROLE_FRAME, TOKEN_FRAMES, TOKENS  # noqa: E402
from sse_middleware._core import headers  # noqa: E402
from sse_middleware._core.pipeline import Pipeline  # noqa: E402
from sse_middleware._settings import StreamingSettings  # noqa: E402


def _anthropic(text: str) -> bytes:
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}
    return b"event: content_block_delta\ndata: " + json.dumps(delta, separators=(",", ":")).encode() + b"\n\n"


_ANTHROPIC_START = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"bench"}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
)
_ANTHROPIC_END = (
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)
# format -> (response kind, first bytes, token bodies, last bytes)
FORMATS = {
    "openai": (headers.SSE, ROLE_FRAME, TOKEN_FRAMES, FINISH_FRAME + DONE_FRAME),
    "anthropic": (headers.SSE, _ANTHROPIC_START, [_anthropic(t) for t in TOKENS], _ANTHROPIC_END),
    "plain": (headers.TEXT, b"", [t.encode() for t in TOKENS], b""),
}


def per_token(
    fmt: str, rate: float, coalesce: bool, tokens: int = 6000, streams: int = 6
) -> tuple[float, float]:
    """(CPU µs per token, frames per token) for ``streams`` streams at ``rate`` tok/s of simulated time."""
    kind, first, bodies, last = FORMATS[fmt]
    config = StreamingSettings(coalesce=coalesce).core()
    frames = 0
    n = len(bodies)
    per_stream = tokens // streams
    t0 = time.process_time()
    for _ in range(streams):
        pipe = Pipeline(kind, config, None)
        now, step = 1000.0, 1.0 / rate
        if first:
            frames += len(pipe.feed(first, now))
        deadline = pipe.deadline()
        for i in range(per_stream):
            now += step
            while deadline is not None and deadline <= now:  # the watcher wakes at the deadline
                frames += len(pipe.tick(deadline))
                deadline = pipe.deadline()
            frames += len(pipe.feed(bodies[i % n], now))
            deadline = pipe.deadline()
        if last:
            frames += len(pipe.feed(last, now))
        frames += len(pipe.close())
    return (time.process_time() - t0) / tokens * 1e6, frames / tokens


def main() -> None:
    args = sys.argv[1:]
    as_json = "--json" in args
    rates = [float(a) for a in args if a != "--json"] or [25.0, 100.0, 1000.0]
    rounds = 15
    cases = [(fmt, rate, on) for fmt in FORMATS for rate in rates for on in (False, True)]
    for fmt, rate, on in cases:  # warm-up: imports, caches, the CPU's clock
        per_token(fmt, rate, on, tokens=1200)
    runs: dict[tuple[str, float, bool], list[tuple[float, float]]] = {c: [] for c in cases}
    for r in range(rounds):  # interleaved: a burst of load hits every case a little, none a lot
        for case in cases if r % 2 == 0 else reversed(cases):
            runs[case].append(per_token(*case))
    result = {}
    for (fmt, rate, on), got in runs.items():
        us = [g[0] for g in got]
        result[f"{fmt} {rate:g} {'on' if on else 'off'}"] = {
            "us_min": round(min(us), 3),
            "us_median": round(statistics.median(us), 3),
            "frames_per_token": round(got[0][1], 4),
        }
    if as_json:
        print(json.dumps(result))
        return
    for name, r in result.items():
        print(
            f"{name:>22}: {r['us_min']:6.2f} us/token (min; median {r['us_median']:6.2f}), "
            f"{r['frames_per_token']:.3f} frames/token"
        )


if __name__ == "__main__":
    main()
