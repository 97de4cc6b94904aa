"""The two plots in docs/benchmarks.md, from a result file: ``python bench/plots.py [RESULT.json]``.

- ``docs/bench_arrival.png``: content characters at the client over time for one 100 tok/s stream,
  raw (one frame per token) against the middleware (coalesced frames).
- ``docs/bench_cpu_per_token.png``: uvicorn server CPU µs per token against each stream's token rate,
  one line per contender (the same aggregate token rate at every point).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parent.parent
LABELS = {
    "raw": "raw StreamingResponse",
    "middleware": "StreamingMiddleware (coalescing)",
    "middleware_passthrough": "StreamingMiddleware (coalesce=False)",
    "sse_starlette": "sse-starlette",
    "fastapi_native": "FastAPI native SSE",
    "otel_asgi": "OTel ASGI middleware",
}


def arrival(result: dict[str, Any], path: Path) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), dpi=110, gridspec_kw={"width_ratios": [3, 2]})
    for ax, limit in zip(axes, (None, 300.0), strict=True):
        for name, trace in result.get("traces", {}).items():
            times, total = [0.0], [0]
            for t, chars in trace:
                times.append(t * 1e3)
                total.append(total[-1] + chars)
            line = ax.step(
                times,
                total,
                where="post",
                linewidth=1.4,
                label=f"{LABELS.get(name, name)}: {len(trace)} frames",
            )[0]
            ax.plot(times[1:], total[1:], "|", markersize=6, color=line.get_color())
        ax.set_xlabel("ms since the request")
        ax.grid(alpha=0.3)
        if limit is not None:
            ax.set_xlim(0, limit)
            ax.set_ylim(0, 120)
            ax.set_title("first 300 ms")
    axes[0].set_ylabel("content characters received")
    axes[0].set_title("Token arrival at the client, one stream at 100 tok/s")
    axes[0].legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def cpu_per_token(result: dict[str, Any], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.6), dpi=110)
    cpu = result.get("server_cpu_us_per_token", {})
    for name, per_rate in cpu.items():
        rates = sorted(per_rate, key=float)
        ax.plot(
            [float(r) for r in rates],
            [per_rate[r] for r in rates],
            marker="o",
            label=LABELS.get(name, name),
            linewidth=2 if name in ("raw", "middleware") else 1.2,
        )
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel(
        f"tokens/s per stream (aggregate held at {result.get('config', {}).get('aggregate', 0):g} tok/s)"
    )
    ax.set_ylabel("uvicorn server CPU, µs per token")
    ax.set_title("Server CPU per token against token rate")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def render(result: dict[str, Any], docs: Path) -> list[Path]:
    docs.mkdir(exist_ok=True)
    return [
        arrival(result, docs / "bench_arrival.png"),
        cpu_per_token(result, docs / "bench_cpu_per_token.png"),
    ]


if __name__ == "__main__":
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bench" / "results" / "full.json"
    for p in render(json.loads(src.read_text()), ROOT / "docs"):
        print(p)
