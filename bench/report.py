"""The machine description, the goals (reported, never asserted), and the human table."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "starlette",
    "fastapi",
    "sse-starlette",
    "uvicorn",
    "uvloop",
    "httptools",
    "anyio",
    "opentelemetry-sdk",
    "opentelemetry-instrumentation-asgi",
)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git() -> str:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "sse_middleware"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (rev or "no commit") + (" + uncommitted sse_middleware changes" if dirty else "")


def machine() -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "packages": versions,
        "sse_middleware": _git(),
        "server": "uvicorn, 1 worker, loop=auto (uvloop), http=auto (httptools), 127.0.0.1",
    }


def goals(r: dict[str, Any]) -> dict[str, Any]:
    """Each goal: the measured value, the target, and whether it is met (None: not measured)."""
    ip = r.get("inproc_us_per_event", {})
    out: dict[str, Any] = {}
    if "middleware_passthrough" in ip:
        over = round((ip["middleware_passthrough"] - ip["raw"]) / ip["raw"], 2)
        out["passthrough_over_raw_events"] = {"value": over, "target": "<= 2", "met": over <= 2}
    cpu = r.get("server_cpu_us_per_token", {})
    if "middleware" in cpu:
        fast = {rate: round(cpu["middleware"][rate] / cpu["raw"][rate], 3) for rate in cpu["raw"]}
        fast = {rate: v for rate, v in fast.items() if float(rate) >= 100}
        out["coalesced_cpu_per_token_vs_raw"] = {
            "value": fast,
            "target": "< 1 at 100 and 1000 tok/s",
            "met": all(v < 1 for v in fast.values()),
        }
    if "middleware" in cpu and "middleware_passthrough" in cpu:
        vs = {
            rate: round(cpu["middleware"][rate] / cpu["middleware_passthrough"][rate], 3)
            for rate in cpu["raw"]
        }
        slow = {rate: v for rate, v in vs.items() if float(rate) < 100}
        out["coalesced_cpu_per_token_vs_passthrough"] = {
            "value": vs,
            "target": "<= 1 at 25 tok/s",
            "met": all(v <= 1 for v in slow.values()) if slow else None,
            "unit": "x pass-through",
        }
    per = r.get("per_stream_cpu_us", {})
    if "middleware" in per:
        ratio = round(per["middleware"] / per["raw"], 3)
        out["per_stream_cpu_vs_raw"] = {"value": ratio, "target": "<= 1.5", "met": ratio <= 1.5}
    if "ttft_added_ms" in r:
        p50, p99 = r["ttft_added_ms"]["p50"], r["ttft_added_ms"]["p99"]
        out["ttft_added_p50_ms"] = {"value": p50, "target": "<= 0.3", "met": p50 <= 0.3}
        spread = r.get("ttft_raw_spread_ms", {}).get("p99")
        out["ttft_added_p99_ms"] = {  # read against raw's own spread over the same interleaved runs
            "value": p99,
            "raw_spread": spread,
            "target": "within raw's own run-to-run spread",
            "met": None if spread is None else abs(p99) <= spread,
        }
    kib = r.get("idle_stream_kib", {})
    if "middleware_minus_raw" in kib:
        v = kib["middleware_minus_raw"]
        out["idle_stream_kib_added"] = {"value": v, "target": "<= 8", "met": v <= 8}
    ins = r.get("instructions")
    if ins:  # (goal name, ours, theirs, target ratio); pass-through is counted in raw events over raw
        for name, ours, theirs, limit, unit in (
            ("instructions_passthrough_over_raw_events", "event_ours", "event_raw", 0.5, " raw events"),
            ("instructions_merged_token_vs_raw", "token_ours", "token_raw", 1.5, "x raw"),
            ("instructions_stream_vs_raw", "stream_ours", "stream_raw", 2.0, "x raw"),
            ("instructions_stream_sdk_vs_otel", "stream_ours_sdk", "stream_otel_asgi", 0.4, "x otel-asgi"),
        ):
            v = round(ins[ours] / ins[theirs] - (1 if unit == " raw events" else 0), 3)
            out[name] = {"value": v, "target": f"<= {limit}", "met": v <= limit, "unit": unit}
    return out


def _row(cells: list[str], widths: list[int]) -> str:
    pairs = enumerate(zip(cells, widths, strict=True))
    return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in pairs)


def _fmt(v: Any, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def table(r: dict[str, Any]) -> str:
    """Plain-text summary; the same numbers as ``--json``."""
    m = r["machine"]
    lines = [f"sse_middleware benchmarks ({r['mode']}): {m['nproc']} x {m['cpu']}, Python {m['python']}", ""]
    ip, unp = r.get("inproc_us_per_event", {}), r.get("server_cpu_us_per_event_unpaced", {})
    rows = [["contender", "in-process us/event", "over raw", "uvicorn unpaced us/event"]]
    for name, v in ip.items():
        unp_name = "middleware" if name == "middleware_all" else name
        rows.append([name, _fmt(v), _fmt(v - ip["raw"]), _fmt(unp.get(unp_name))])
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines += [_row(row, widths) for row in rows] + [""]

    cpu, fpt = r.get("server_cpu_us_per_token", {}), r.get("frames_per_token", {})
    if cpu:
        rates = list(next(iter(cpu.values())))
        head = ["uvicorn, paced"] + [f"{rate} tok/s: us/token, frames/token" for rate in rates]
        rows = [head] + [[n] + [f"{cpu[n][rate]:.2f}, {fpt[n][rate]:.3f}" for rate in rates] for n in cpu]
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        lines += [_row(row, widths) for row in rows] + [""]
    for name, t in r.get("ttft_ms", {}).items():
        lines.append(
            f"TTFT {name:<10} p50 {t['p50']:.3f} ms  p99 {t['p99']:.3f} ms  ({t['n']:g} streams, "
            f"server CPU {t['server_cpu']:.0%})"
        )
    if "ttft_added_ms" in r:
        a = r["ttft_added_ms"]
        lines.append(f"TTFT added by the middleware: p50 {a['p50']:+.3f} ms, p99 {a['p99']:+.3f} ms")
        spread = r.get("ttft_raw_spread_ms")
        if spread:
            lines.append(f"raw's own spread: p50 {spread['p50']:.3f} ms, p99 {spread['p99']:.3f} ms")
    kib = r.get("idle_stream_kib", {})
    lines.append("idle stream KiB: " + ", ".join(f"{k} {v:.2f}" for k, v in kib.items()))
    if "heartbeat_cpu_us" in r:
        lines.append(f"heartbeat: {r['heartbeat_cpu_us']:.2f} us server CPU each")
    if "instructions" in r:
        lines.append("instructions: " + ", ".join(f"{k} {v:,}" for k, v in r["instructions"].items()))
    elif "instructions_note" in r:
        lines.append(r["instructions_note"])
    lines.append("")
    for name, g in r.get("goals", {}).items():
        verdict = "not measured" if g["met"] is None else "met" if g["met"] else "MISSED"
        value = _goal_value(g["value"], g.get("unit", "x raw"))
        lines.append(f"goal {name}: {value} (target {g['target']}): {verdict}")
    if r.get("unavailable"):
        lines.append("not measured: " + "; ".join(f"{k} ({v})" for k, v in r["unavailable"].items()))
    load = r.get("foreign_cores", {})
    if load:
        busy = max(load.values()) >= 0.15
        lines.append(
            "other processes' CPU during the run (cores): "
            + ", ".join(f"{k} {v:.2f}" for k, v in load.items())
            + ("  <- machine was shared: numbers are noisy, rerun when idle" if busy else "")
        )
    lines.append(f"elapsed {r.get('elapsed_s', 0):.0f} s")
    return "\n".join(lines)


def _goal_value(v: Any, unit: str = "x raw") -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k} tok/s: {x:.2f}{unit}" for k, x in v.items())
    return f"{v}"


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"] + [
        "| " + " | ".join(r) + " |" for r in rows
    ]


def markdown(r: dict[str, Any]) -> str:
    """The results section of docs/benchmarks.md (between its results markers)."""
    m = r["machine"]
    pk = m["packages"]
    out = [
        f"Measured {r.get('measured_at', '')}: `{r['mode']}` run, {m['nproc']} x {m['cpu']}, "
        f"Python {m['python']}, Linux {m['kernel']}; uvicorn {pk.get('uvicorn')} (uvloop "
        f"{pk.get('uvloop')}, httptools {pk.get('httptools')}), Starlette {pk.get('starlette')}, "
        f"FastAPI {pk.get('fastapi')}, sse-starlette {pk.get('sse-starlette')}, OpenTelemetry SDK "
        f"{pk.get('opentelemetry-sdk')}; sse_middleware at {m['sse_middleware']}.",
        "",
    ]
    ip, unp = r.get("inproc_us_per_event", {}), r.get("server_cpu_us_per_event_unpaced", {})
    rows = []
    for name, v in {**ip, **r.get("inproc_diagnostic_us_per_event", {})}.items():
        u = unp.get("middleware" if name == "middleware_all" else name)
        rows.append([f"`{name}`", f"{v:.2f}", f"{v - ip['raw']:+.2f}", _fmt(u)])
    out += [
        "**In process** (CPU µs per event, median of "
        f"{r['config']['inproc_reps']} runs of {r['config']['events']:,} events), and through uvicorn "
        "unpaced (server CPU µs per event, 4 streams as fast as the client reads):",
        "",
    ]
    out += _md_table(["contender", "in-process µs/event", "over raw", "uvicorn unpaced µs/event"], rows)
    cpu, fpt = r.get("server_cpu_us_per_token", {}), r.get("frames_per_token", {})
    if cpu:
        rates = list(next(iter(cpu.values())))
        out += [
            "",
            f"**Through uvicorn, paced** (server CPU µs per token / frames per token; "
            f"{r['config']['aggregate']:g} tok/s in all, median of {r['config']['server_reps']}):",
            "",
        ]
        out += _md_table(
            ["contender"] + [f"{x} tok/s per stream" for x in rates],
            [[f"`{n}`"] + [f"{cpu[n][x]:.1f} / {fpt[n][x]:.3f}" for x in rates] for n in cpu],
        )
    tt = r.get("ttft_ms", {})
    if tt:
        out += [
            "",
            f"**TTFT** with {r['config']['ttft_users']} concurrent streams (20 tok/s each, "
            "new stream as each ends; ms):",
            "",
        ]
        out += _md_table(
            ["contender", "p50", "p99", "streams", "server CPU"],
            [
                [f"`{n}`", f"{t['p50']:.2f}", f"{t['p99']:.2f}", f"{t['n']:g}", f"{t['server_cpu']:.0%}"]
                for n, t in tt.items()
            ],
        )
    kib = r.get("idle_stream_kib", {})
    if kib:
        hb = ""
        if "heartbeat_cpu_us" in r:
            hb = f"; heartbeat: **{r['heartbeat_cpu_us']:.1f} µs** server CPU each"
        out += [
            "",
            f"**Idle streams** ({r['config']['idle_streams']:,} open, heartbeats armed): "
            + ", ".join(f"{k} **{v:.1f} KiB**" for k, v in kib.items())
            + f" per stream (RSS){hb}.",
            "",
        ]
    out += ["**Goals** (reported, not asserted):", ""]
    out += _md_table(
        ["goal", "target", "measured", ""],
        [
            [
                name,
                g["target"],
                _goal_value(g["value"], g.get("unit", "x raw")),
                "-" if g["met"] is None else "met" if g["met"] else "**missed**",
            ]
            for name, g in r.get("goals", {}).items()
        ],
    )
    load = r.get("foreign_cores", {})
    if load:
        out += [
            "",
            "Other processes' CPU during each phase (cores): "
            + ", ".join(f"{k} {v:.2f}" for k, v in load.items())
            + ".",
        ]
    return "\n".join(out) + "\n"


def write_docs(r: dict[str, Any], path: Path) -> bool:
    """Replace the text between the results markers of ``path``; False if the markers are missing."""
    start, end = "<!-- results:start -->", "<!-- results:end -->"
    text = path.read_text() if path.exists() else ""
    if start not in text or end not in text:
        return False
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    path.write_text(f"{head}{start}\n{markdown(r)}{end}{tail}")
    return True
