"""Where one short stream's time goes, in process: ``python bench/per_stream.py [STREAMS] [--top N]``.

Drives ``STREAMS`` one-token streams (role, 1 token, finish, ``[DONE]``) through ``raw``,
``middleware_all_no_telemetry`` and ``middleware_all`` (the SDK providers of ``bench.apps``) and prints,
per stream: the Python calls made (cProfile, deterministic), and the functions of ours and of the
OpenTelemetry SDK with their calls and own/cumulative µs per stream. cProfile's µs are inflated by the
profiler itself: read the call counts, and the µs only as shares. For instructions, run it under
``valgrind --tool=callgrind`` twice with different ``STREAMS`` and take the difference.

``--pieces`` instead times the telemetry pieces of one stream's end (span, attributes, records) with
``perf_counter_ns``, min over many repetitions: the per-piece table of docs/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path.pop(0)
sys.path.insert(0, str(ROOT))

from bench import apps, inproc  # noqa: E402

NAMES = ("raw", "middleware_all_no_telemetry", "middleware_all")


async def _streams(app: Any, name: str, streams: int) -> None:
    for _ in range(streams):
        await inproc._drive(app, name, 1, collect=False)


def profile(name: str, streams: int) -> pstats.Stats:
    app = apps.build(name)
    asyncio.run(_streams(app, name, 50))  # warm-up: first-call caches, the SDK's instruments
    prof = cProfile.Profile()

    async def go() -> None:
        prof.enable()
        await _streams(app, name, streams)
        prof.disable()

    asyncio.run(go())
    return pstats.Stats(prof)


def _ours(path: str) -> bool:
    return "sse_middleware" in path or "opentelemetry" in path


def report(name: str, stats: pstats.Stats, streams: int, top: int) -> None:
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    calls = sum(cc for cc, _, _, _, _ in table.values())
    print(f"\n== {name}: {calls / streams:.0f} Python calls per stream")
    rows = []
    for (path, line, func), (cc, _nc, tt, ct, _) in table.items():
        if _ours(path):
            short = path.split("site-packages/")[-1].split("sse_middleware/")[-1]
            rows.append((ct / streams * 1e6, tt / streams * 1e6, cc / streams, f"{short}:{line} {func}"))
    rows.sort(reverse=True)
    print(f"{'cum us':>8} {'own us':>8} {'calls':>6}  function")
    for ct, tt, cc, label in rows[:top]:
        print(f"{ct:8.1f} {tt:8.1f} {cc:6.1f}  {label}")


def pieces(reps: int) -> None:
    """perf_counter_ns of each telemetry piece at a stream's end, min of ``reps``."""
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind

    from sse_middleware._telemetry import semconv as sc

    tracer_provider, meter_provider = apps.sdk_providers()
    tracer = tracer_provider.get_tracer("bench")
    meter = meter_provider.get_meter("bench")
    hist = meter.create_histogram("bench.h", unit="s", explicit_bucket_boundaries_advisory=[0.01, 0.1, 1.0])
    m_attrs = {
        sc.GEN_AI_OPERATION_NAME: "chat",
        sc.GEN_AI_PROVIDER_NAME: "openai",
        sc.GEN_AI_REQUEST_MODEL: "gpt-4o",
        sc.GEN_AI_RESPONSE_MODEL: "gpt-4o-2024",
        sc.HTTP_ROUTE: "/v1/chat",
    }
    attrs = {f"attr.{i}": i for i in range(17)} | m_attrs
    root = trace.set_span_in_context(trace.INVALID_SPAN)
    sampled = trace.set_span_in_context(tracer.start_span("parent"))

    def timed(fn: Any) -> float:
        best = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            fn()
            best = min(best, time.perf_counter_ns() - t0)
        return best / 1000

    results = {
        "start_span, 22 attributes, end": lambda: tracer.start_span(
            "s", root, SpanKind.INTERNAL, attrs
        ).end(),
        "start_span, no attributes, end": lambda: tracer.start_span("s", root).end(),
        "span.add_event": None,
        "histogram record, sampled span in context (exemplar)": lambda: hist.record(0.05, m_attrs, sampled),
        "histogram record, no span in context": lambda: hist.record(0.05, m_attrs, root),
        "trace.set_span_in_context": lambda: trace.set_span_in_context(trace.INVALID_SPAN),
    }
    span = tracer.start_span("e", root)
    results["span.add_event"] = lambda: span.add_event("first", timestamp=1)
    for label, fn in results.items():
        print(f"{timed(fn):8.2f} us  {label}")


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--pieces" in sys.argv:
        pieces(int(args[0]) if args else 2000)
        return
    streams = int(args[0]) if args else 400
    if "--plain" in sys.argv:  # no profiler: for callgrind (run twice with different STREAMS, subtract)
        for name in [n for n in NAMES if n in args[1:]] or list(NAMES):
            app = apps.build(name)
            asyncio.run(_streams(app, name, 50))
            asyncio.run(_streams(app, name, streams))
        return
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 40
    names = [n for n in NAMES if n in args[1:]] or list(NAMES)
    for name in names:
        report(name, profile(name, streams), streams, top)


if __name__ == "__main__":
    main()
