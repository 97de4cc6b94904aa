"""Where an idle stream's memory goes: tracemalloc over ``count`` idle streams driven in process.

``python bench/memory.py [NAME ...] [--streams N]``. No server: each stream is the contender's app
called with a dict scope, parked after its first body write (as in the idle RSS test), so the numbers
are the app's and the middleware's own Python allocations per stream, attributed to source lines.
uvicorn's per-connection objects are not included (they are the same with or without the middleware).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path.pop(0)
sys.path.insert(0, str(ROOT))

from bench import apps  # noqa: E402
from bench.inproc import _scope, request_then_wait  # noqa: E402


async def _park(app: Any, name: str, count: int) -> tuple[list[asyncio.Task[None]], asyncio.Event]:
    release = asyncio.Event()
    started = 0
    all_started = asyncio.Event()

    def one() -> tuple[Any, Any]:
        first = True
        receive = request_then_wait(release)

        async def send(message: dict[str, Any]) -> None:
            nonlocal first, started
            if message["type"] == "http.response.body" and first:
                first = False
                started += 1
                if started == count:
                    all_started.set()

        return receive, send

    scope = _scope(name, 10)
    scope["query_string"] = b"idle=1"
    tasks = []
    for _ in range(count):
        receive, send = one()
        tasks.append(asyncio.create_task(app(dict(scope), receive, send)))
    await asyncio.wait_for(all_started.wait(), 60)
    return tasks, release


async def measure_one(name: str, count: int, top: int) -> dict[str, Any]:
    app = apps.build(name)
    tasks, release = await _park(app, name, 50)  # warm-up: lazy imports, caches
    release.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    gc.collect()
    tracemalloc.start(16)
    before = tracemalloc.take_snapshot()
    tasks, release = await _park(app, name, count)
    await asyncio.sleep(0.2)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    release.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    total = 0
    by_site: dict[str, list[int]] = {}
    for stat in after.compare_to(before, "traceback"):
        total += stat.size_diff
        site = _responsible(stat.traceback)
        acc = by_site.setdefault(site, [0, 0])
        acc[0] += stat.size_diff
        acc[1] += stat.count_diff
    ranked = sorted(by_site.items(), key=lambda kv: -kv[1][0])[:top]
    sites = [
        {
            "site": site,
            "bytes_per_stream": round(size / count, 1),
            "blocks_per_stream": round(blocks / count, 2),
        }
        for site, (size, blocks) in ranked
        if size > 0
    ]
    return {"kib_per_stream": round(total / count / 1024, 2), "top": sites}


def _responsible(tb: tracemalloc.Traceback) -> str:
    """The innermost line of the middleware, Starlette or the bench on the allocation's stack: who
    caused an allocation made deep inside asyncio, anyio or the OpenTelemetry SDK."""
    frames = list(reversed(tb))  # tracemalloc lists oldest first
    owners = ("/sse_middleware/", "/starlette/", "/bench/", "/fastapi/", "/sse_starlette/")
    chosen = next((f for f in frames if any(o in f.filename for o in owners)), frames[0])
    where = chosen.filename.replace(str(ROOT) + "/", "").split("site-packages/")[-1]
    return f"{where}:{chosen.lineno}"


def measure(names: list[str], count: int = 2000, top: int = 25) -> dict[str, Any]:
    return {name: asyncio.run(measure_one(name, count, top)) for name in names}


def main() -> None:
    args = sys.argv[1:]
    count = 2000
    if "--streams" in args:
        i = args.index("--streams")
        count = int(args[i + 1])
        del args[i : i + 2]
    names = args or ["raw", "middleware_all"]
    result = measure(names, count)
    for name, r in result.items():
        print(f"{name}: {r['kib_per_stream']} KiB per idle stream (tracemalloc, in process)")
        for site in r["top"]:
            print(
                f"  {site['bytes_per_stream']:8.1f} B  {site['blocks_per_stream']:5.2f} blocks  "
                f"{site['site']}"
            )


if __name__ == "__main__":
    main()
