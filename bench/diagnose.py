"""Take the middleware's cost apart, feature by feature: ``python bench/diagnose.py [RATE] [SECONDS]``.

The same paced uvicorn measurement as ``run.py`` (server CPU µs per token at RATE tok/s, 5,000 tok/s in
all), for the middleware with features switched off one at a time, next to raw. Differences between
rows are what each feature costs at that rate. Medians of 3 interleaved runs. Takes about a minute.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path.pop(0)
sys.path.insert(0, str(ROOT))

from bench import apps, server  # noqa: E402

VARIANTS = [
    "raw",
    "middleware",
    "middleware_all_no_telemetry",
    "middleware_passthrough",
    "middleware_passthrough_no_telemetry",
]


def main() -> None:
    rate = float(sys.argv[1]) if len(sys.argv) > 1 else 100.0
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    missing = apps.available(VARIANTS)
    names = [n for n in VARIANTS if n not in missing]
    streams = max(2, round(5000 / rate))
    runs: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    with server.uvicorn_server(names) as (pid, port):
        for name in names:
            server.paced_cpu(pid, port, name, 200.0, 4, 0.3)
        for rep in range(3):
            for name in names if rep % 2 == 0 else list(reversed(names)):
                runs[name].append(server.paced_cpu(pid, port, name, rate, streams, seconds))
    out = {}
    for name, rs in runs.items():
        out[name] = {
            "cpu_us_per_token": round(statistics.median(r["cpu_us_per_token"] for r in rs), 2),
            "frames_per_token": round(statistics.median(r["frames_per_token"] for r in rs), 3),
        }
    base = out["raw"]["cpu_us_per_token"]
    print(f"server CPU per token at {rate:g} tok/s x {streams} streams (medians of 3):", file=sys.stderr)
    for name, r in out.items():
        print(
            f"  {name:<38} {r['cpu_us_per_token']:8.2f} us  ({r['cpu_us_per_token'] - base:+7.2f} vs raw)"
            f"  {r['frames_per_token']:.3f} frames/token",
            file=sys.stderr,
        )
    print(json.dumps({"rate": rate, "streams": streams, "server": out, "unavailable": missing}))


if __name__ == "__main__":
    main()
