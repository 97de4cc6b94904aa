"""Micro-benchmarks: what telemetry costs per event and per stream, in CPU time (``time.process_time``,
the machine being shared), best of interleaved rounds.

1. **The recorder alone** (``sse_middleware._telemetry``), per event and per stream. The hot path is
   ``chunk()`` + ``frame()``, once per forwarded event; ``start()`` and ``end()`` run once per stream,
   and ``end()`` records the per-gap histogram, so its cost grows with the stream and is also given
   amortized per event. Modes, same loop and clock arithmetic in each:

   - ``off``: no telemetry calls at all (the floor the others are measured against)
   - ``noop``: the API's no-op providers (no SDK): ``start()`` returns None, no recorder
   - ``sdk/N``: SDK ``TracerProvider`` + ``SimpleSpanProcessor(InMemorySpanExporter)``, ``MeterProvider``
     + ``InMemoryMetricReader``, recording every Nth gap (``inter_chunk_sample_every``; 32 is the default)

   Each start/end is bracketed by two CPU-clock reads (a system call each, under a microsecond).

2. **Short streams through the middleware** (``--middleware``): role, 3 tokens, finish and ``[DONE]``
   through ``bench.apps``' raw Starlette app, the middleware with telemetry off, and the middleware with
   SDK providers (the ``sdk_providers()`` of the main benchmark): the per-stream setup and teardown.

Run:  python bench/bench_telemetry.py [--events 100 1000] [--streams 200] [--repeat 5] [--middleware 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import sys
import time
from pathlib import Path
from typing import Any

from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path.pop(0)
sys.path.insert(0, str(ROOT))

from bench import apps, inproc  # noqa: E402
from sse_middleware._telemetry.recorder import Telemetry  # noqa: E402

SCOPE = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": []}
MODES = ("off", "noop", "sdk/1", "sdk/8", "sdk/32")
GAP = 0.02  # 50 tok/s; the value does not change the cost, only the histogram buckets hit
cpu_ns = time.process_time_ns


def telemetry(mode: str) -> tuple[Telemetry | None, Any]:
    """The Telemetry for a mode, and a reset that drops what the in-memory exporters accumulated."""
    if mode == "off":
        return None, lambda: None
    if mode == "noop":
        return Telemetry(NoOpTracerProvider(), NoOpMeterProvider(), slo_ttft=1.0, slo_tpot=0.08), lambda: None
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    mp = MeterProvider(metric_readers=[reader])

    def reset() -> None:
        exporter.clear()
        reader.get_metrics_data()

    every = int(mode.partition("/")[2])
    return Telemetry(tp, mp, slo_ttft=1.0, slo_tpot=0.08, gap_sample_every=every), reset


def one_stream(tel: Telemetry | None, events: int) -> tuple[int, int, int]:
    """(start ns, hot-loop ns, end ns) of CPU time for one stream of ``events`` content events."""
    now = 0.0
    t0 = cpu_ns()
    stream = tel.start(SCOPE, start_mono=0.0, start_ns=time.time_ns()) if tel is not None else None
    t1 = cpu_ns()
    if stream is None:  # off, or no SDK behind either provider: no recorder at all, nothing per event
        for _ in range(events):
            now += GAP
        return t1 - t0, cpu_ns() - t1, 0
    stream.dialect("openai", "chat")
    for _ in range(events):
        now += GAP
        stream.chunk(now, True)
        stream.frame(24)
    t2 = cpu_ns()
    stream.response(model="gpt-x", finish_reason="stop")
    stream.end(now + GAP)
    return t1 - t0, t2 - t1, cpu_ns() - t2


def measure(events: int, streams: int, repeat: int) -> dict[str, dict[str, float]]:
    """Per mode, the best round's per-event (hot, end-amortized) and per-stream (start, end) costs, in
    microseconds; the modes' rounds interleaved."""
    made = {mode: telemetry(mode) for mode in MODES}
    best: dict[str, dict[str, float]] = {
        mode: dict.fromkeys(("hot", "end_per_event", "start", "end"), math.inf) for mode in MODES
    }
    for tel, _ in made.values():
        one_stream(tel, events)  # warm up (instrument and attribute-set creation)
    for _ in range(repeat):
        for mode, (tel, reset) in made.items():
            reset()
            gc.collect()
            totals = [0, 0, 0]
            for _ in range(streams):
                for i, ns in enumerate(one_stream(tel, events)):
                    totals[i] += ns
            start, hot, end = (t / streams / 1e3 for t in totals)
            round_ = {"hot": hot / events, "end_per_event": end / events, "start": start, "end": end}
            for key, value in round_.items():
                best[mode][key] = min(best[mode][key], value)
    return best


def worst_chunk(events: int) -> tuple[float, float]:
    """(worst single chunk() in us, end() in ms) for one long SDK stream: the fold every 4096 gaps is
    the only non-constant work on the hot path, and end() runs on the event loop, so both are stalls."""
    tel, _ = telemetry("sdk/32")
    assert tel is not None
    stream = tel.start(SCOPE, start_mono=0.0, start_ns=time.time_ns())
    assert stream is not None
    worst, now = 0, 0.0
    for i in range(events):
        now += GAP * (0.5 + (i * 7919 % 1000) / 1000)
        t0 = time.perf_counter_ns()
        stream.chunk(now, True)
        worst = max(worst, time.perf_counter_ns() - t0)
    t0 = cpu_ns()
    stream.end(now + GAP)
    return worst / 1e3, (cpu_ns() - t0) / 1e6


MIDDLEWARE = ("raw", "middleware_all_no_telemetry", "middleware_all")


async def _short_streams(app: Any, name: str, streams: int) -> float:
    """CPU seconds of ``streams`` short streams, each bracketed alone (no collection in between)."""
    total = 0.0
    for _ in range(streams):
        cpu, _ = await inproc._drive(app, name, 3, collect=False)
        total += cpu
    return total


def per_stream(streams: int, repeat: int) -> dict[str, float]:
    """CPU us per short stream for each of :data:`MIDDLEWARE`, best of ``repeat`` interleaved rounds."""
    built = {name: apps.build(name) for name in MIDDLEWARE}
    best = dict.fromkeys(MIDDLEWARE, math.inf)

    async def main() -> None:
        for name in MIDDLEWARE:
            await _short_streams(built[name], name, 100)
        for rep in range(repeat):
            for name in MIDDLEWARE if rep % 2 == 0 else MIDDLEWARE[::-1]:
                gc.collect()
                cpu = await _short_streams(built[name], name, streams)
                best[name] = min(best[name], cpu / streams * 1e6)

    asyncio.run(main())
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, nargs="*", default=[100, 1000])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--middleware",
        type=int,
        default=0,
        metavar="STREAMS",
        help="also drive this many short streams per round through the middleware",
    )
    args = parser.parse_args()
    print(f"CPU time; streams per round {args.streams}, best of {args.repeat} rounds; us = microseconds")
    header = (
        f"{'events':>6} {'mode':>6} | {'hot us/event':>12} {'over off':>8} | {'end us/event':>12} "
        f"| {'total over off':>14} | {'start us':>8} {'end us':>8}"
    )
    print(header)
    print("-" * len(header))
    for events in args.events:
        results = measure(events, args.streams, args.repeat)
        floor = results["off"]["hot"]
        for mode, r in results.items():
            over = r["hot"] - floor
            total = over + r["end_per_event"] + r["start"] / events
            print(
                f"{events:>6} {mode:>6} | {r['hot']:>12.3f} {over:>8.3f} | {r['end_per_event']:>12.3f} "
                f"| {total:>14.3f} | {r['start']:>8.1f} {r['end']:>8.1f}"
            )
    worst_us, end_ms = worst_chunk(20_000)
    print(
        f"\nsdk/32, one stream of 20000 content events: worst single chunk() {worst_us:.1f} us (a fold), "
        f"end() {end_ms:.1f} ms"
    )
    if args.middleware:
        best = per_stream(args.middleware, args.repeat)
        print(f"\nshort streams through the middleware ({args.middleware} per round), CPU us per stream:")
        for name, us in best.items():
            print(f"  {name:28} {us:8.1f}  (+{us - best['raw']:.1f} over raw)")
        sdk = best["middleware_all"] - best["middleware_all_no_telemetry"]
        print(f"  SDK telemetry per stream: {sdk:.1f}")


if __name__ == "__main__":
    main()
