"""Per-token CPU of resumable streams, in process, through ``StreamingMiddleware``: resume off, on with
``memory://``, on with ``redis://`` (a real redis-server started here). ``python bench/resume_inproc.py``.

Two drives, as ``bench/inproc.py`` drives an app (no server, no socket; ``send`` discards):

- **unpaced**: one stream of ``--events`` OpenAI chunks sent back to back, coalescing off, so every event
  is a frame that gets an id and goes to the log: the cost in the app's send path. The Redis store's
  flusher cannot run before the app yields, so its network work is left out here (see paced).
- **paced**: streams at once, each at one of ``--rates`` tokens/s, ``--total`` tokens/s in all, for
  ``--seconds``, default settings (coalescing on): what a server pays per token, the Redis flusher's
  pipelines included (one per stream every 50 ms at most: the faster a stream, the more tokens share
  one). redis-server's own CPU is read from /proc and reported beside it.

``time.process_time`` brackets each run; the figure is the minimum over ``--reps`` interleaved runs
(other work on the machine only adds). ``--compare REV`` also measures resume off at another commit of
``sse_middleware`` (``git archive``), to show what resume costs a stream that does not use it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.environ.get("BENCH_SSE_PATH") or str(ROOT))
sys.path.append(str(ROOT))  # bench itself; the package above wins when BENCH_SSE_PATH names an old one

from bench.inproc import request_then_wait  # noqa: E402
from sse_middleware import StreamingMiddleware, StreamingSettings  # noqa: E402

CHUNK = b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}\n\n'  # noqa: E501
START = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
PATH = "/v1/chat/completions"
SCOPE = {
    "type": "http",
    "asgi": {"version": "3.0", "spec_version": "2.3"},
    "http_version": "1.1",
    "method": "POST",
    "scheme": "http",
    "path": PATH,
    "raw_path": PATH.encode(),
    "root_path": "",
    "query_string": b"",
    "server": ("127.0.0.1", 8000),
    "client": ("127.0.0.1", 5000),
    "headers": [(b"host", b"127.0.0.1"), (b"authorization", b"Bearer k")],
}


async def app(scope: Any, receive: Any, send: Any) -> None:
    """Sends ``events`` chunks, ``rate`` per second (absolute deadlines) or back to back (``rate`` 0)."""
    events, rate = scope["bench"]
    await send(START)
    start = time.monotonic()
    for i in range(events):
        if rate:
            await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
        await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


async def drive(middleware: Any, events: int, rate: float) -> None:
    receive = request_then_wait(asyncio.Event())

    async def send(message: dict[str, Any]) -> None:
        pass

    await middleware({**SCOPE, "bench": (events, rate)}, receive, send)


def settings(store: str | None, **changes: Any) -> StreamingSettings:
    if store is None:
        return StreamingSettings(**changes)  # resume off: the default (and all an old commit knows)
    return StreamingSettings(resume=True, resume_store=store, **changes)


async def run_once(store: str | None, mode: dict[str, Any]) -> float:
    """CPU µs per token of one run (a new middleware each time: the store's per-run setup is in it)."""
    paced = mode["rate"] > 0
    per_stream = int(mode["rate"] * mode["seconds"]) if paced else mode["events"]
    streams = mode["streams"] if paced else 1
    changes = {} if paced else {"coalesce": False}
    middleware = StreamingMiddleware(app, settings(store, **changes))
    await drive(middleware, 50, 0)  # warm: the store's connection, first-call caches
    start = time.process_time()
    await asyncio.gather(*(drive(middleware, per_stream, mode["rate"]) for _ in range(streams)))
    cpu = time.process_time() - start
    if hasattr(middleware, "resume"):  # not at a commit from before resumable streams
        await middleware.resume.aclose()
    return cpu / (streams * per_stream) * 1e6


def proc_cpu(pid: int) -> float:
    """Seconds of CPU a process has used (utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    stores: dict[str, str | None], mode: dict[str, Any], reps: int, redis_pid: int | None
) -> dict[str, Any]:
    samples: dict[str, list[float]] = {name: [] for name in stores}
    redis_us: list[float] = []
    for rep in range(reps):
        for name in stores if rep % 2 == 0 else list(reversed(stores)):
            before = proc_cpu(redis_pid) if redis_pid and name == "redis" else 0.0
            samples[name].append(asyncio.run(run_once(stores[name], mode)))
            if redis_pid and name == "redis":
                tokens = mode["streams"] * mode["rate"] * mode["seconds"] if mode["rate"] else mode["events"]
                redis_us.append((proc_cpu(redis_pid) - before) / tokens * 1e6)
        print(
            f"  rep {rep + 1}/{reps}: " + ", ".join(f"{n}={v[-1]:.2f}" for n, v in samples.items()),
            file=sys.stderr,
        )
    out: dict[str, Any] = {name: round(min(v), 2) for name, v in samples.items()}
    if redis_us:
        out["redis_server"] = round(min(redis_us), 2)
    return out


def at_commit(rev: str, mode: dict[str, Any], reps: int) -> dict[str, Any]:
    """Resume off, measured with ``sse_middleware`` as it was at ``rev``, in a subprocess."""
    with tempfile.TemporaryDirectory(prefix="bench-rev-") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev, "sse_middleware"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        cmd = [sys.executable, __file__, "--only-off", json.dumps(mode), "--reps", str(reps)]
        done = subprocess.run(
            cmd, env={**os.environ, "BENCH_SSE_PATH": tmp}, check=True, capture_output=True, text=True
        )
        return dict(json.loads(done.stdout))


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--events", type=int, default=20_000, help="unpaced: events in the one stream")
    parser.add_argument("--rates", type=float, nargs="+", default=[25, 100, 1000], help="paced: tok/s each")
    parser.add_argument("--total", type=float, default=2000, help="paced: tokens/s of all streams together")
    parser.add_argument("--seconds", type=float, default=3, help="paced: each stream's length")
    parser.add_argument("--compare", action="append", default=[], help="a git revision: resume off there")
    parser.add_argument("--only-off", metavar="MODE", help=argparse.SUPPRESS)  # --compare's subprocess
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    modes = {"unpaced": {"events": args.events, "rate": 0, "streams": 1, "seconds": 0}}
    for rate in args.rates:
        streams = max(1, round(args.total / rate))  # the same tokens/s in all at every rate
        modes[f"paced {rate:g} tok/s"] = {
            "rate": rate,
            "streams": streams,
            "seconds": args.seconds,
            "events": 0,
        }
    if args.only_off:
        print(json.dumps(measure({"off": None}, json.loads(args.only_off), args.reps, None)))
        return
    from tests.support.redis import redis_server  # the same real redis-server the tests start

    result: dict[str, Any] = {"sse_middleware": str(ROOT), "load_before": load()}
    with redis_server() as redis:
        stores = {"off": None, "memory": "memory://", "redis": redis.url}
        for label, mode in modes.items():
            print(f"{label}: {mode}", file=sys.stderr)
            result[label] = measure(stores, mode, args.reps, redis.proc.pid)
            for rev in args.compare:
                result[label][f"off@{rev}"] = at_commit(rev, mode, args.reps)["off"]
    result["load_after"] = load()
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
