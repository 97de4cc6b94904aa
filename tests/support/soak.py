"""Soak: open/close churn against one server with heartbeats and coalescing on; RSS and tasks must stay flat.

    python tests/support/soak.py --minutes 30        # uvicorn (httptools), 32 concurrent clients
    python tests/support/soak.py --minutes 5 --server granian --concurrency 64

Each client loops over a mix: a fast OpenAI stream (coalesced), a slow SSE stream with silences
(heartbeats), a client that leaves after the first event, an app failure mid-stream (error event), and
a raw app that never calls ``receive`` left by its client. ``/stats`` is sampled every few seconds.
Every stream must end as its kind must (a read error is a failure). At the end every stream must be
finalized, the task count back at its baseline, no responder alive, and the RSS of the last third
of the run no higher than the first third's (after a warm-up) plus a margin. Exit status 0 when flat,
1 otherwise; the CI test (tests/e2e/test_soak.py) runs it for 30 s.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):  # run as a script: make ``tests`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.servers import SERVERS, raise_fd_limit, serve, settle

SCENARIOS = ("openai", "slow", "leave", "fail", "raw")
ENV = {"SSE_MIDDLEWARE_HEARTBEAT_INTERVAL": "0.05", "SSE_MIDDLEWARE_COALESCE_MAX_DELAY": "0.02"}


async def one(client: httpx.AsyncClient, url: str, kind: str, rng: random.Random) -> bool:
    """One stream of ``kind``; whether it ended as it must (a read error, or a wrong end, is a failure)."""
    sid = rng.randrange(1 << 20)
    path = {
        "openai": f"/stream?id={sid}&n=60&delay=0.002&kind=openai",
        "slow": f"/stream?id={sid}&n=4&delay=0.12&kind=sse",
        "leave": f"/stream?id={sid}&n=50&delay=0.02&kind=sse",
        "fail": f"/stream?id={sid}&n=20&delay=0.005&kind=sse&fail_at={rng.randrange(1, 19)}",
        "raw": "/raw_forever",
    }[kind]
    seen = b""
    try:
        async with client.stream("GET", url + path) as response:
            async for chunk in response.aiter_raw():
                seen += chunk
                if kind in ("leave", "raw") and b"data:" in chunk:
                    return True  # the client leaves: the stream must be stopped and cleaned up server-side
    except httpx.HTTPError:
        return False
    last = {"openai": b"data: [DONE]\n\n", "slow": b"data: <%d:3>\n\n" % sid, "fail": b"event: error\n"}[kind]
    return last in seen and seen.endswith(b"\n\n")  # heartbeats may follow the last event


async def worker(url: str, until: float, seed: int, counts: dict[str, int], failed: dict[str, int]) -> None:
    rng = random.Random(seed)
    async with httpx.AsyncClient(timeout=30) as client:
        while time.monotonic() < until:
            kind = rng.choice(SCENARIOS)
            if not await one(client, url, kind, rng):
                failed[kind] = failed.get(kind, 0) + 1
            counts[kind] = counts.get(kind, 0) + 1


async def churn(
    url: str, seconds: float, concurrency: int, sample_every: float
) -> tuple[list[dict[str, Any]], dict[str, int], dict[str, int]]:
    until = time.monotonic() + seconds
    counts: dict[str, int] = {}
    failed: dict[str, int] = {}
    samples: list[dict[str, Any]] = []
    tasks = [asyncio.create_task(worker(url, until, i, counts, failed)) for i in range(concurrency)]
    async with httpx.AsyncClient(timeout=30) as client:
        while time.monotonic() < until:
            await asyncio.sleep(sample_every)
            sample = (await client.get(url + "/stats?fast=1")).json()
            sample["t"] = seconds - (until - time.monotonic())
            samples.append(sample)
    await asyncio.gather(*tasks)
    return samples, counts, failed


def verdict(
    base: dict[str, Any],
    samples: list[dict[str, Any]],
    end: dict[str, Any],
    failed: dict[str, int],
    *,
    margin_kib: int,
) -> list[str]:
    """What is not flat (empty: all flat). RSS: the last third's mean against the first third's, after a
    warm-up of the first fifth (imports, arenas, caches fill up then)."""
    problems = [f"{n} {kind} streams did not end as they must" for kind, n in sorted(failed.items())]
    warm = samples[len(samples) // 5 :]
    third = max(1, len(warm) // 3)
    first = sum(s["VmRSS"] for s in warm[:third]) / third
    last = sum(s["VmRSS"] for s in warm[-third:]) / third
    if last - first > margin_kib:
        problems.append(f"RSS grew from {first:.0f} to {last:.0f} KiB during the run")
    if end["finalized"] != end["started"]:
        problems.append(f"{end['started'] - end['finalized']} streams never finalized")
    if end["tasks"] != base["tasks"]:
        problems.append(f"tasks {base['tasks']} at start, {end['tasks']} at the end")
    if end["responders"] != base["responders"]:
        problems.append(f"responders alive: {end['responders']} (baseline {base['responders']})")
    return problems


def run(
    seconds: float,
    *,
    server: str = "uvicorn-httptools",
    concurrency: int = 32,
    env: dict[str, str] | None = None,
    margin_kib: int = 6 * 1024,
    log: Any = print,
) -> tuple[list[str], dict[str, Any]]:
    raise_fd_limit(4096)
    with serve(server, env={**ENV, **(env or {})}) as srv:
        base = settle(srv)
        sample_every = max(1.0, min(10.0, seconds / 30))
        samples, counts, failed = asyncio.run(churn(srv.url, seconds, concurrency, sample_every))
        end = settle(srv)
    problems = verdict(base, samples, end, failed, margin_kib=margin_kib)
    summary = {
        "streams": end["started"] - base["started"],
        "by_kind": counts,
        "failed": failed,
        "rss_kib_start": base["VmRSS"],
        "rss_kib_samples": [s["VmRSS"] for s in samples],
        "rss_kib_end": end["VmRSS"],
        "tasks": (base["tasks"], max(s["tasks"] for s in samples), end["tasks"]),
    }
    log(
        f"soak {seconds:.0f} s on {server}: {summary['streams']} streams {counts}, failed {failed}; "
        f"RSS KiB start {base['VmRSS']}, "
        f"samples {summary['rss_kib_samples']}, end {end['VmRSS']}; tasks {summary['tasks']}"
    )
    return problems, summary


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument(
        "--server",
        default="uvicorn-httptools",
        choices=SERVERS,
    )
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    problems, _ = run(args.minutes * 60, server=args.server, concurrency=args.concurrency)
    for problem in problems:
        print("NOT FLAT:", problem)
    print("flat" if not problems else "FAILED")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
