"""Idle streams: server memory per open stream, and server CPU per heartbeat.

An idle stream sends its role chunk and then waits forever (a long prefill or a tool call). Each
contender gets a fresh uvicorn process, so the RSS baseline is its own: warm up with a small batch
(allocator, lazy imports), read VmRSS, open ``count`` streams, let them settle, read VmRSS again.
"""

from __future__ import annotations

import asyncio
import resource
import time
from typing import Any

from bench import load, server
from bench.client import SSEClient, open_stream, request_bytes


def raise_fd_limit(need: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, need + 256))
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if want < need + 64:
        raise RuntimeError(f"fd limit {hard} too low for {need} streams")


async def _open_idle(port: int, name: str, count: int, batch: int = 100) -> list[SSEClient]:
    """Open ``count`` idle streams, ``batch`` at a time, each confirmed by its first event."""
    req = request_bytes(port, "/" + name, idle=1)
    protos: list[SSEClient] = []
    for start in range(0, count, batch):
        group = await asyncio.gather(
            *(open_stream(port, req, parse_json=False) for _ in range(min(batch, count - start)))
        )
        await asyncio.wait_for(asyncio.gather(*(p.opened for p in group)), 30)
        protos.extend(group)
    return protos


async def _close(protos: list[SSEClient], settle: float) -> None:
    for p in protos:
        p.close()
    await asyncio.sleep(settle)


async def _idle_rss(pid: int, port: int, name: str, count: int, settle: float) -> dict[str, float]:
    await _close(await _open_idle(port, name, 200), settle)  # warm-up
    before = load.rss_kib(pid)
    protos = await _open_idle(port, name, count)
    await asyncio.sleep(settle)
    after = load.rss_kib(pid)
    cpu0, t0 = load.cpu_seconds(pid), time.perf_counter()
    await asyncio.sleep(settle)  # idle CPU with no heartbeat due: the floor for the heartbeat test
    idle_cpu = (load.cpu_seconds(pid) - cpu0) / (time.perf_counter() - t0)
    await _close(protos, settle)
    return {
        "rss_before_kib": before,
        "rss_after_kib": after,
        "kib_per_stream": round((after - before) / count, 2),
        "idle_cpu_fraction": round(idle_cpu, 5),
    }


async def _heartbeats(
    pid: int, port: int, name: str, count: int, window: float, settle: float
) -> dict[str, float]:
    protos = await _open_idle(port, name, count)
    await asyncio.sleep(settle)
    beats0 = sum(p.stats.heartbeats for p in protos)
    cpu0, t0 = load.cpu_seconds(pid), time.perf_counter()
    await asyncio.sleep(window)
    cpu = load.cpu_seconds(pid) - cpu0
    elapsed = time.perf_counter() - t0
    beats = sum(p.stats.heartbeats for p in protos) - beats0
    await _close(protos, settle)
    return {
        "heartbeats": beats,
        "window_s": round(elapsed, 3),
        "server_cpu_s": round(cpu, 4),
        "cpu_us_per_heartbeat": round(cpu / beats * 1e6, 2) if beats else float("nan"),
        "heartbeats_per_stream_per_s": round(beats / count / elapsed, 3),
    }


def measure(count: int, window: float, settle: float, with_middleware: bool, log: Any) -> dict[str, Any]:
    """``idle_stream_kib`` for raw (and the middleware), plus the heartbeat CPU test."""
    raise_fd_limit(count)
    out: dict[str, Any] = {"streams": count}
    with server.uvicorn_server(["raw"]) as (pid, port):
        out["raw"] = asyncio.run(_idle_rss(pid, port, "raw", count, settle))
    log(f"  idle raw: {out['raw']}")
    if not with_middleware:
        return out
    with server.uvicorn_server(["middleware_all", "middleware_hb"]) as (pid, port):
        out["middleware"] = asyncio.run(_idle_rss(pid, port, "middleware_all", count, settle))
        log(f"  idle middleware: {out['middleware']}")
        out["heartbeat"] = asyncio.run(_heartbeats(pid, port, "middleware_hb", count, window, settle))
        log(f"  heartbeats: {out['heartbeat']}")
    out["middleware_minus_raw"] = round(out["middleware"]["kib_per_stream"] - out["raw"]["kib_per_stream"], 2)
    return out
