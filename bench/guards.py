"""What guards cost, in process: ``python bench/guards.py [--json] [TOKENS]``.

Two measurements, each through the whole middleware (``StreamingMiddleware`` around an ASGI app that
sends the workload's OpenAI chat chunks, one per token), with no server and no socket:

* **CPU per token and per check**: the app sends its tokens as fast as it can, giving the loop one turn
  per token (``sleep(0)``, as any real producer's awaits do); ``process_time`` brackets the request.
  Contenders, interleaved over rounds (the minimum is kept): no guards, a no-op sync guard in hold mode
  and in observe mode, a no-op async guard in hold mode. The cost per check is the extra
  CPU over no guards divided by the checks the guard was called for.
* **TTFT**: tokens 20 ms apart (50 tok/s), wall clock from the request to the first body that carries
  text: no guards, hold with a no-op guard, hold with a guard that takes 5 ms (an async call), observe
  with that same guard. Hold waits for the first whole word and its check; observe waits for nothing.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path.pop(0)
sys.path.insert(0, str(ROOT))

from bench.workload import DONE_FRAME, FINISH_FRAME, ROLE_FRAME, TOKEN_FRAMES  # noqa: E402
from sse_middleware import Check, StreamingMiddleware, StreamingSettings  # noqa: E402

Message = dict[str, Any]
_TEXT = re.compile(rb'"content":"[^"]')  # a chunk with text (the role chunk's content is empty)
SCOPE: Message = {
    "type": "http",
    "asgi": {"version": "3.0", "spec_version": "2.3"},
    "http_version": "1.1",
    "method": "GET",
    "scheme": "http",
    "path": "/bench",
    "raw_path": b"/bench",
    "query_string": b"",
    "root_path": "",
    "headers": [(b"host", b"bench")],
    "client": ("127.0.0.1", 5000),
    "server": ("127.0.0.1", 8000),
}
SSE = [(b"content-type", b"text/event-stream")]
START: Message = {"type": "http.response.start", "status": 200, "headers": SSE}


class App:
    def __init__(self, tokens: int, gap: float = 0.0) -> None:
        self.frames = [TOKEN_FRAMES[i % len(TOKEN_FRAMES)] for i in range(tokens)]
        self.gap = gap

    async def __call__(self, scope: Message, receive: Any, send: Any) -> None:
        await send(START)
        await send({"type": "http.response.body", "body": ROLE_FRAME, "more_body": True})
        for frame in self.frames:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
            await asyncio.sleep(self.gap)  # 0: a turn of the loop per token, as a real app's awaits give
        await send({"type": "http.response.body", "body": FINISH_FRAME + DONE_FRAME, "more_body": False})


class Counting:
    """A no-op guard that counts its checks (sync, or async: ``sleep`` seconds, 0 for a bare await)."""

    def __init__(self, asynchronous: bool = False, sleep: float = 0.0) -> None:
        self.checks = 0
        self.sleep = sleep
        self.asynchronous = asynchronous

    def __call__(self, check: Check) -> Any:
        self.checks += 1
        if not self.asynchronous:
            return None
        return self._wait()

    async def _wait(self) -> None:
        if self.sleep:
            await asyncio.sleep(self.sleep)


async def _receive() -> Message:
    if not getattr(_receive, "sent", False):
        _receive.sent = True  # type: ignore[attr-defined]
        return {"type": "http.request", "body": b"", "more_body": False}
    await asyncio.Event().wait()
    return {"type": "http.disconnect"}


def _middleware(app: App, guard: Counting | None, mode: str = "hold") -> StreamingMiddleware:
    settings = StreamingSettings(telemetry=False, heartbeat_interval=0, guard_mode=mode)  # type: ignore[arg-type]
    return StreamingMiddleware(app, settings, guards=[guard] if guard else [])


async def _one(mw: StreamingMiddleware) -> tuple[float, float | None]:
    """CPU seconds of one request, and the wall time to its first text body."""
    first: list[float] = []
    began = time.monotonic()

    async def send(message: Message) -> None:
        if not first and message["type"] == "http.response.body" and _TEXT.search(message.get("body", b"")):
            first.append(time.monotonic() - began)

    _receive.sent = False  # type: ignore[attr-defined]
    cpu = time.process_time()
    await mw(dict(SCOPE), _receive, send)
    return time.process_time() - cpu, first[0] if first else None


CPU_CONTENDERS = {
    "none": lambda: (None, "hold"),
    "sync no-op, hold": lambda: (Counting(), "hold"),
    "sync no-op, observe": lambda: (Counting(), "observe"),
    "async no-op, hold": lambda: (Counting(asynchronous=True), "hold"),
}
TTFT_CONTENDERS = {
    "none": lambda: (None, "hold"),
    "no-op, hold": lambda: (Counting(), "hold"),
    "5 ms async, hold": lambda: (Counting(asynchronous=True, sleep=0.005), "hold"),
    "5 ms async, observe": lambda: (Counting(asynchronous=True, sleep=0.005), "observe"),
}


async def cpu(tokens: int, rounds: int) -> dict[str, Any]:
    best: dict[str, float] = {}
    checks: dict[str, int] = {}
    names = list(CPU_CONTENDERS)
    for round_ in range(rounds + 1):  # the first round warms up
        for name in names if round_ % 2 else reversed(names):
            guard, mode = CPU_CONTENDERS[name]()
            seconds, _ = await _one(_middleware(App(tokens), guard, mode))
            if round_:
                best[name] = min(best.get(name, seconds), seconds)
                checks[name] = guard.checks if guard else 0
    base = best["none"]
    out: dict[str, Any] = {}
    for name in names:
        extra = best[name] - base
        out[name] = {
            "us_per_token": round(best[name] / tokens * 1e6, 2),
            "extra_us_per_token": round(extra / tokens * 1e6, 2),
            "checks": checks[name],
            "us_per_check": round(extra / checks[name] * 1e6, 1) if checks[name] else None,
        }
    return out


async def ttft(rounds: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = {name: [] for name in TTFT_CONTENDERS}
    for round_ in range(rounds):
        for name in TTFT_CONTENDERS if round_ % 2 else reversed(list(TTFT_CONTENDERS)):
            guard, mode = TTFT_CONTENDERS[name]()
            _, first = await _one(_middleware(App(30, gap=0.02), guard, mode))
            if first is not None:
                samples[name].append(first * 1e3)
    return {name: round(statistics.median(values), 1) for name, values in samples.items()}


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--json"]
    tokens = int(args[0]) if args else 20000
    result: dict[str, Any] = {"tokens": tokens, "cpu": asyncio.run(cpu(tokens, 5))}
    result["ttft_ms"] = asyncio.run(ttft(7))
    if "--json" in sys.argv:
        print(json.dumps(result))
        return
    print(f"CPU, {tokens} tokens, min of 5 interleaved rounds:")
    for name, row in result["cpu"].items():
        print(f"  {name:22} {row['us_per_token']:6.2f} us/token (+{row['extra_us_per_token']:.2f}), "
              f"{row['checks']} checks, {row['us_per_check']} us/check")
    print("TTFT at 50 tok/s, median of 7 (ms):")
    for name, value in result["ttft_ms"].items():
        print(f"  {name:22} {value:6.1f}")


if __name__ == "__main__":
    main()
