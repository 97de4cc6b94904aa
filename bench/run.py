"""Benchmark sse_middleware against its peers: ``python bench/run.py [--quick] [--json] [--plots]``.

Progress goes to stderr; stdout gets the table (or, with ``--json``, one JSON object). Every run also
writes the whole result, traces included, to ``bench/results/<mode>.json`` for ``bench/plots.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path.pop(0)  # `python bench/run.py` puts bench/ first; import it as the package instead
sys.path.insert(0, str(ROOT))

from bench import apps, idle, inproc, instructions, memory, report, server  # noqa: E402
from bench.load import Foreign, wait_quiet  # noqa: E402

MODES: dict[str, dict[str, Any]] = {
    "quick": {
        "events": 10_000,
        "inproc_reps": 3,
        "rates": [25.0, 100.0, 1000.0],
        "aggregate": 5000.0,
        "duration": 2.5,
        "server_reps": 1,
        "ttft_users": 200,
        "ttft_window": 3.0,
        "ttft_reps": 3,  # interleaved A/B: raw's own run-to-run spread is reported beside the difference
        "idle_streams": 2000,
        "hb_window": 2.0,
        "settle": 0.7,
        "unpaced_tokens": 5000,
        "quiet_wait": 0.0,
        "retries": 0,
        "per_stream_streams": 400,
    },
    "full": {
        "events": 30_000,
        "inproc_reps": 5,
        "rates": [25.0, 100.0, 250.0, 1000.0],
        "aggregate": 5000.0,
        "duration": 4.0,
        "server_reps": 3,
        "ttft_users": 200,
        "ttft_window": 5.0,
        "ttft_reps": 3,
        "idle_streams": 2000,
        "hb_window": 4.0,
        "settle": 1.0,
        "unpaced_tokens": 20_000,
        "quiet_wait": 60.0,
        "retries": 2,
        "per_stream_streams": 1000,
    },
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(mode: str, plots: bool) -> dict[str, Any]:
    cfg = MODES[mode]
    t_start = time.perf_counter()
    missing = apps.available(list(apps.CONTENDERS))
    has_mw = "middleware_all" not in missing
    if not has_mw:
        log(f"middleware not measured: {missing['middleware_all']}")
    result: dict[str, Any] = {
        "mode": mode,
        "machine": report.machine(),
        "config": cfg,
        "unavailable": missing,
    }

    foreign: dict[str, Any] = {}
    result["foreign_cores"] = foreign  # other processes' CPU during each phase (shared machine)
    result["quiet_before"] = {}

    def start(phase: str) -> Foreign:
        if cfg["quiet_wait"] > 0:
            result["quiet_before"][phase] = wait_quiet(cfg["quiet_wait"], log)
        return Foreign()

    log("in process: CPU µs per event")
    window = start("inproc")
    names = [n for n in apps.CONTENDERS if n not in missing]
    extra = list(apps.DIAGNOSTIC) if has_mw and mode == "full" else []
    ip = inproc.measure(names + extra, cfg["events"], cfg["inproc_reps"], log)
    result["inproc_us_per_event"] = {n: ip["us_per_event"][n] for n in names}
    result["inproc_diagnostic_us_per_event"] = {n: ip["us_per_event"][n] for n in extra}
    result["inproc_detail"] = ip
    foreign["inproc"] = round(window.cores(), 3)

    # pass-through beside coalesced at every rate, in both modes: the coalescing goals are ratios to both
    server_names = ["raw", "middleware", "middleware_passthrough"] if has_mw else ["raw"]
    if mode == "full":
        server_names += [n for n in ("sse_starlette", "fastapi_native", "otel_asgi") if n not in missing]
    log(f"through uvicorn: {', '.join(server_names)}")
    window = start("server")
    with server.uvicorn_server(server_names) as (pid, port):
        sweep = server.cpu_sweep(
            pid,
            port,
            server_names,
            cfg["rates"],
            cfg["aggregate"],
            cfg["duration"],
            cfg["server_reps"],
            log,
            cfg["retries"],
        )
        result["server_cpu_us_per_token"] = {
            n: {f"{r:g}": sweep[n][str(r)]["cpu_us_per_token"] for r in cfg["rates"]} for n in sweep
        }
        result["frames_per_token"] = {
            n: {f"{r:g}": sweep[n][str(r)]["frames_per_token"] for r in cfg["rates"]} for n in sweep
        }
        result["server_detail"] = {
            n: {f"{float(r):g}": v for r, v in per.items()} for n, per in sweep.items()
        }
        result["server_cpu_us_per_event_unpaced"] = server.unpaced(
            pid, port, server_names, cfg["unpaced_tokens"], log
        )
        ttft_names = ["raw", "middleware"] if has_mw else ["raw"]
        log(f"CPU per stream: {cfg['per_stream_streams']} one-token streams")
        result["per_stream_cpu_us"] = server.per_stream(pid, port, ttft_names, cfg["per_stream_streams"], log)
        log(f"TTFT with {cfg['ttft_users']} concurrent streams")
        tt = server.ttft(
            pid,
            port,
            ttft_names,
            cfg["ttft_users"],
            cfg["ttft_window"],
            cfg["ttft_reps"],
            log,
            cfg["retries"],
        )
        result["ttft_ms"] = tt
        if has_mw:
            result["ttft_added_ms"] = {
                q: round(tt["middleware"][q] - tt["raw"][q], 3) for q in ("p50", "p99")
            }
            result["ttft_raw_spread_ms"] = tt["raw"]["spread"]
        result["traces"] = {n: server.trace(port, n, 100.0, 150) for n in ttft_names}
    foreign["server"] = round(window.cores(), 3)

    log(f"idle streams: {cfg['idle_streams']}")
    window = start("idle")
    idl = idle.measure(cfg["idle_streams"], cfg["hb_window"], cfg["settle"], has_mw, log)
    result["idle_stream_kib"] = {"raw": idl["raw"]["kib_per_stream"]}
    if has_mw:
        result["idle_stream_kib"]["middleware"] = idl["middleware"]["kib_per_stream"]
        result["idle_stream_kib"]["middleware_minus_raw"] = idl["middleware_minus_raw"]
        result["heartbeat_cpu_us"] = idl["heartbeat"]["cpu_us_per_heartbeat"]
    result["idle_detail"] = idl
    foreign["idle"] = round(window.cores(), 3)
    if has_mw and mode == "full":
        log("idle stream allocations (tracemalloc, in process)")
        result["idle_alloc"] = memory.measure(["raw", "middleware_all"], cfg["idle_streams"], 15)
    if has_mw:  # last: the callgrind processes would load the CPU measured above
        log("instructions in process (callgrind, 3N minus N)")
        counted = instructions.measure(log=log)
        if "note" in counted:
            log(counted["note"])
            result["instructions_note"] = counted["note"]
        else:
            result["instructions"] = counted["instructions"]
            result["instructions_detail"] = counted["detail"]
    result["goals"] = report.goals(result)
    result["elapsed_s"] = round(time.perf_counter() - t_start, 1)
    result["measured_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())

    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / f"{mode}.json").write_text(json.dumps(result, indent=1))
    if plots:
        from bench import plots as plotting

        for path in plotting.render(result, ROOT / "docs"):
            log(f"wrote {path}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="the short run (~60 s on 2 cores; ~5 min more with valgrind)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--plots", action="store_true", help="also write the PNG plots into docs/")
    parser.add_argument(
        "--docs", action="store_true", help="also rewrite the results section of docs/benchmarks.md"
    )
    parser.add_argument("--results", metavar="JSON", help="render a saved bench/results/*.json instead")
    args = parser.parse_args()
    if args.results:  # re-render a saved run: no measuring
        result = json.loads(Path(args.results).read_text())
        if args.plots:
            from bench import plots as plotting

            plotting.render(result, ROOT / "docs")
    else:
        result = run("quick" if args.quick else "full", args.plots)
    if args.docs and not report.write_docs(result, ROOT / "docs" / "benchmarks.md"):
        log("docs/benchmarks.md has no results markers: not rewritten")
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "traces"}, indent=1))
    else:
        print(report.table(result))


if __name__ == "__main__":
    main()
