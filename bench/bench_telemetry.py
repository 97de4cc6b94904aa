"""Micro-benchmark: what sse_middleware._telemetry.recorder adds per event, and per stream at its end.

Why both numbers: the budget (<= 1 us/event) is for the hot path, ``chunk()`` + ``frame()``, which runs
before every forwarded event. ``start()`` and ``end()`` run once per stream, but ``end()`` records one
histogram observation per gap, so its cost grows with the stream and is reported amortized per event.

Modes, same loop and clock arithmetic in each:
  off   no telemetry calls at all (the floor the others are measured against)
  noop  the API's no-op providers (opentelemetry-api alone, no SDK): start() returns None, no recorder
  sdk   SDK TracerProvider + SimpleSpanProcessor(InMemorySpanExporter), MeterProvider + InMemoryMetricReader
  sdk/8 the same with gap_sample_every=8 (one inter-chunk observation per 8 gaps)

Run:  .venv/bin/python bench/bench_telemetry.py [--events 1000] [--streams 200] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from sse_middleware._telemetry.recorder import Telemetry

SCOPE = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": []}
MODES = ("off", "noop", "sdk", "sdk/8")
GAP = 0.02  # 50 tok/s; the value does not change the cost, only the histogram buckets hit


def telemetry(mode: str) -> tuple[Telemetry | None, Callable[[], None]]:
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

    every = int(mode.partition("/")[2] or 1)
    return Telemetry(tp, mp, slo_ttft=1.0, slo_tpot=0.08, gap_sample_every=every), reset


def one_stream(tel: Telemetry | None, events: int) -> tuple[int, int, int]:
    """(start ns, hot-loop ns, end ns) for one stream of ``events`` content events."""
    now = 0.0
    t0 = time.perf_counter_ns()
    if tel is None:
        t1 = time.perf_counter_ns()
        for _ in range(events):
            now += GAP
        t2 = time.perf_counter_ns()
        return t1 - t0, t2 - t1, 0
    stream = tel.start(SCOPE, start_mono=0.0, start_ns=time.time_ns())
    if stream is None:  # no SDK behind either provider: no recorder at all, nothing per event
        t1 = time.perf_counter_ns()
        for _ in range(events):
            now += GAP
        t2 = time.perf_counter_ns()
        return t1 - t0, t2 - t1, 0
    stream.dialect("openai", "chat")
    t1 = time.perf_counter_ns()
    for _ in range(events):
        now += GAP
        stream.chunk(now, True)
        stream.frame(24)
    t2 = time.perf_counter_ns()
    stream.response(model="gpt-x", finish_reason="stop")
    stream.end(now + GAP)
    return t1 - t0, t2 - t1, time.perf_counter_ns() - t2


def measure(mode: str, events: int, streams: int, repeat: int) -> dict[str, float]:
    """Median over ``repeat`` rounds of per-event (hot, end-amortized) and per-stream (start, end) costs."""
    tel, reset = telemetry(mode)
    rounds: list[tuple[float, float, float, float]] = []
    one_stream(tel, events)  # warm up (instrument and attribute-set creation)
    for _ in range(repeat):
        reset()
        gc.collect()
        totals = [0, 0, 0]
        for _ in range(streams):
            for i, ns in enumerate(one_stream(tel, events)):
                totals[i] += ns
        start, hot, end = (t / streams for t in totals)
        rounds.append((hot / events / 1e3, end / events / 1e3, start / 1e3, end / 1e3))
    hot_us, end_us, start_us, end_stream_us = (statistics.median(col) for col in zip(*rounds, strict=True))
    return {"hot": hot_us, "end_per_event": end_us, "start": start_us, "end": end_stream_us}


def worst_chunk(events: int) -> tuple[float, float]:
    """(worst single chunk() in us, end() in ms) for one long SDK stream: the fold every 4096 gaps is
    the only non-constant work on the hot path, and end() runs on the event loop, so both are stalls."""
    tel, _ = telemetry("sdk")
    assert tel is not None
    stream = tel.start(SCOPE, start_mono=0.0, start_ns=time.time_ns())
    assert stream is not None
    worst, now = 0, 0.0
    for i in range(events):
        now += GAP * (0.5 + (i * 7919 % 1000) / 1000)
        t0 = time.perf_counter_ns()
        stream.chunk(now, True)
        worst = max(worst, time.perf_counter_ns() - t0)
    t0 = time.perf_counter_ns()
    stream.end(now + GAP)
    return worst / 1e3, (time.perf_counter_ns() - t0) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, nargs="*", default=[100, 1000])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"streams per round {args.streams}, median of {args.repeat} rounds; us = microseconds")
    header = (f"{'events':>6} {'mode':>5} | {'hot us/event':>12} {'over off':>8} | {'end us/event':>12} "
              f"| {'total over off':>14} | {'start us':>8} {'end us':>8}")
    print(header)
    print("-" * len(header))
    for events in args.events:
        results = {mode: measure(mode, events, args.streams, args.repeat) for mode in MODES}
        floor = results["off"]["hot"]
        for mode, r in results.items():
            over = r["hot"] - floor
            total = over + r["end_per_event"] + r["start"] / events
            print(f"{events:>6} {mode:>5} | {r['hot']:>12.3f} {over:>8.3f} | {r['end_per_event']:>12.3f} "
                  f"| {total:>14.3f} | {r['start']:>8.1f} {r['end']:>8.1f}")
    worst_us, end_ms = worst_chunk(20_000)
    print(f"\nsdk, one stream of 20000 content events: worst single chunk() {worst_us:.1f} us (a fold), "
          f"end() {end_ms:.1f} ms")


if __name__ == "__main__":
    main()
