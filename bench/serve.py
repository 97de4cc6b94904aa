"""The uvicorn process the server benchmarks measure: every contender's app, routed by path.

Run by :mod:`bench.server` as ``python -m bench.serve PORT NAME [NAME ...]``. A plain dict dispatch by
``scope["path"]`` costs the same for every contender, so differences between routes are theirs.
"""

from __future__ import annotations

import os
import resource
import sys
from typing import Any

import uvicorn

from bench import apps


def make(names: list[str]) -> Any:
    routes = {"/" + name: apps.build(name) for name in names}

    async def dispatch(scope: dict[str, Any], receive: Any, send: Any) -> None:
        app = routes.get(scope.get("path", ""))
        if app is None:
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    return dispatch


def main() -> None:
    port = int(sys.argv[1])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    app = make(sys.argv[2:])
    profile_to = os.environ.get("BENCH_PYINSTRUMENT")  # a text report of the whole server run
    profiler = None
    if profile_to:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0005, async_mode="disabled")
        profiler.start()
    cprofile_to = os.environ.get("BENCH_CPROFILE")  # pstats of the whole server run, CPU-time clock
    cprof = None
    if cprofile_to:
        import cProfile
        import time

        cprof = cProfile.Profile(time.process_time)
        cprof.enable()
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        backlog=4096,
        timeout_graceful_shutdown=1,
        loop=os.environ.get("BENCH_LOOP", "auto"),
    )
    if cprof is not None and cprofile_to:
        cprof.disable()
        cprof.dump_stats(cprofile_to)
    if profiler is not None and profile_to:
        profiler.stop()
        with open(profile_to, "w") as f:
            f.write(profiler.output_text(unicode=False, color=False, show_all=False))


if __name__ == "__main__":
    main()
