"""Instructions per event and per stream, in process: ``python bench/instructions.py [CASE ...] [--json]``.

Each case is one contender's app called by a fake server (a dict scope, a ``receive`` that gives the
empty request and then waits, a ``send`` that discards), so raw's own count is small and every
instruction the middleware adds shows. Each case runs in its own process under
``valgrind --tool=callgrind`` with ``PYTHONHASHSEED=0``: after a warm-up, it runs the unit (one stream
of N events, or N one-token streams) N times, then 3N times, and calls ``os.getppid()`` between the
phases, where callgrind dumps and zeroes its counters (``--dump-before=getppid``). The figure is
(count of 3N - count of N) / 2N: start-up, imports, the warm-up and each phase's fixed cost are not in
it, and it does not move with the machine's load.

The stream's clock (``time.monotonic`` as the middleware's modules read it) is frozen for the whole
run: under callgrind the real clock runs ~50 times slower than the code, so coalescing would cut by its
deadline where a native run cuts by ``coalesce_max_bytes``. Frozen, a merged token is cut as "as fast
as the app writes" is natively, and the same on every run. The per-gap sample's phase is seeded.

``--child CASE N`` is the process valgrind runs; ``--tree DIR`` runs another checkout's copy of this
driver on its own package (e.g. a copy with a compiled core).
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path.pop(0)
sys.path.insert(0, str(ROOT))

from bench import apps, inproc, workload  # noqa: E402

# name: (unit, N, what the app is). "events": one stream of N events, per event; "streams": N
# one-token streams (role, one token, finish, [DONE]), per stream.
CASES: dict[str, tuple[str, int, str]] = {
    "event_raw": ("events", 1000, "raw Starlette, a generic SSE event (named, JSON data)"),
    "event_ours": ("events", 1000, "the middleware (defaults, SDK), the same events passed through"),
    "token_raw": ("events", 1000, "raw Starlette, an OpenAI chat chunk"),
    "token_ours": ("events", 1000, "the middleware (defaults, SDK), the chunks merged"),
    "stream_raw": ("streams", 100, "raw Starlette, a one-token OpenAI stream"),
    "stream_ours": ("streams", 100, "the middleware, telemetry off"),
    "stream_ours_sdk": ("streams", 100, "the middleware, the OpenTelemetry SDK (bench.apps providers)"),
    "stream_otel_asgi": ("streams", 100, "the contrib OpenTelemetryMiddleware, the same SDK"),
    "token_recover": ("events", 1000, "token_ours with recover='continue' (nothing fails)"),
    "stream_recover": ("streams", 100, "stream_ours with recover='continue' (nothing fails)"),
}
# ASGI 2.4 (a send to a gone client raises): Starlette then streams without its disconnect-listening
# task group, so raw's own count is small. uvicorn declares 2.3: BENCH_ASGI_SPEC=2.3 counts that path.
SPEC = os.environ.get("BENCH_ASGI_SPEC", "2.4")
WARM_UP = {"events": 1, "streams": 50}  # units before counting: first-call caches, specialization


def _generic_frames(pace: workload.Pace) -> Any:
    """Generic SSE: named events, never merged; the same sizes as the OpenAI chunks."""

    async def gen() -> Any:
        n = len(_GENERIC)
        for i in range(pace.tokens + 3):
            yield _GENERIC[i % n]

    return gen()


_GENERIC_FIELDS = {"id": workload.CHUNK_ID, "object": "progress", "created": 1, "model": workload.MODEL}
_GENERIC = [
    b"event: progress\n" + workload.frame(json.dumps({**_GENERIC_FIELDS, "step": i, "text": t}))
    for i, t in enumerate(workload.TOKENS)
]


def build(case: str) -> Any:
    """The app of one case, routed at ``/x``."""
    from sse_middleware import StreamingMiddleware, StreamingSettings

    source = _generic_frames if case.startswith("event_") else workload.frames
    inner = apps.raw_app("/x", source)
    if case.endswith("_raw"):
        return inner
    if case == "stream_otel_asgi":
        from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

        tracer_provider, meter_provider = apps.sdk_providers()
        return OpenTelemetryMiddleware(inner, tracer_provider=tracer_provider, meter_provider=meter_provider)
    recover = "continue" if case.endswith("_recover") else "off"
    if case in ("stream_ours", "stream_recover"):
        return StreamingMiddleware(inner, StreamingSettings(telemetry=False, recover=recover))
    tracer_provider, meter_provider = apps.sdk_providers()
    return StreamingMiddleware(
        inner,
        StreamingSettings(recover=recover),
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )


_REQUEST = {"type": "http.request", "body": b"", "more_body": False}


async def _discard(message: Any) -> None:
    pass


def _server(tokens: int) -> Callable[[Any], Any]:
    """One request's call of the app: the fake server's whole per-request work (the scope as uvicorn's,
    but for the spec version)."""
    scope = inproc._scope("x", tokens)
    scope["asgi"] = {"version": "3.0", "spec_version": SPEC}
    loop = asyncio.get_running_loop()

    async def call(app: Any, send: Any = _discard) -> None:
        requested = False

        async def receive() -> Any:
            nonlocal requested
            if requested:  # a connected client: no disconnect (a cancelled wait cancels its future)
                return await loop.create_future()
            requested = True
            return _REQUEST

        await app({**scope, "state": {}}, receive, send)

    return call


def _freeze_clock() -> None:
    """``time`` for every loaded module of the middleware: ``monotonic`` returns one instant."""
    frozen = types.ModuleType("time")
    frozen.__dict__.update(time.__dict__)
    frozen.monotonic = itertools.repeat(time.monotonic()).__next__  # type: ignore[attr-defined]
    for name, module in list(sys.modules.items()):
        if name.startswith("sse_middleware") and getattr(module, "time", None) is time:
            module.time = frozen  # type: ignore[attr-defined]


async def _checked(app: Any, call: Callable[..., Any]) -> list[Any]:
    """One unit with a recording ``send``, outside the count: the app must stream and end."""
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    await call(app, send)
    bodies = [m for m in sent if m["type"] == "http.response.body"]
    if sent[0].get("status") != 200 or not bodies or bodies[-1].get("more_body", False):
        raise RuntimeError(f"the app did not stream: {sent[:2]}")
    return bodies


def child(case: str, n: int) -> None:
    """The process valgrind counts: warm-up, marker, N, marker, 3N, marker."""
    unit = CASES[case][0]
    app = build(case)
    _freeze_clock()

    async def main() -> dict[str, Any]:
        events = unit == "events"
        tokens = n if events else 1
        call = _server(tokens)
        bodies = await _checked(app, call)
        for _ in range(WARM_UP[unit]):
            await call(app)
        # one stream of N events, then one of 3N; or N one-token streams, then 3N
        phases = [(1, _server(n)), (1, _server(3 * n))] if events else [(n, call), (3 * n, call)]
        gc.collect()
        gc.freeze()  # the warm-up's objects out of every later collection
        random.seed(0)
        os.getppid()
        for times, phase_call in phases:
            for _ in range(times):
                await phase_call(app)
            os.getppid()
        nonempty = [b for b in bodies if b.get("body")]
        return {"sends_per_unit": round(len(nonempty) / (tokens + 3 if events else 1), 4)}

    print(json.dumps(asyncio.run(main())))


def _parts(out_dir: Path, pid_glob: str) -> list[int]:
    """Instructions of each dump, in order (``.1``, ``.2``, ...; the file without a suffix is last)."""
    found = []
    for path in out_dir.glob(pid_glob):
        suffix = path.name.rsplit(".", 1)[-1]
        order = int(suffix) if path.name.count(".") == 2 and suffix.isdigit() else 1 << 30
        match = re.search(r"^summary: (\d+)", path.read_text(errors="replace"), re.M)
        if match is None:
            raise RuntimeError(f"no summary in {path}")
        found.append((order, int(match.group(1))))
    return [count for _, count in sorted(found)]


def count(case: str, tree: Path = ROOT, python: str = sys.executable) -> dict[str, Any]:
    """One case under callgrind: instructions per unit (3N - N) and what the run checked."""
    unit, n, _ = CASES[case]
    with tempfile.TemporaryDirectory(prefix="cg-") as tmp:
        out = Path(tmp)
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(tree)}
        valgrind = [
            "valgrind",
            "--tool=callgrind",
            "--dump-before=getppid",
            f"--callgrind-out-file={out}/c.%p",
        ]
        proc = subprocess.run(
            [*valgrind, python, str(tree / "bench" / "instructions.py"), "--child", case, str(n)],
            env=env,
            cwd=tree,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{case}: exit {proc.returncode}: {proc.stderr[-2000:]}")
        parts = _parts(out, "c.*")
    # start-up and warm-up, N, 3N, the exit: anything else means something else called getppid
    if len(parts) != 4:
        raise RuntimeError(f"{case}: {len(parts)} callgrind dumps, expected 4")
    first, third = parts[1], parts[2]
    return {
        "per_unit": round((third - first) / (2 * n)),
        "unit": unit,
        "n": n,
        "counts": parts,
        **json.loads(proc.stdout.strip().splitlines()[-1]),
    }


def measure(
    cases: list[str] | None = None,
    tree: Path = ROOT,
    jobs: int = 2,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
) -> dict[str, Any]:
    """``{"instructions": {case: per unit}, "detail": ...}``, or ``{"note": why not}`` without valgrind."""
    if shutil.which("valgrind") is None:
        return {"note": "valgrind not found: instruction counts skipped"}
    names = cases or list(CASES)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        done = dict(zip(names, pool.map(lambda c: count(c, tree), names), strict=True))
    for name, d in done.items():
        log(f"  {name}: {d['per_unit']} instructions per {d['unit'][:-1]}")
    return {"instructions": {n: done[n]["per_unit"] for n in names}, "detail": done}


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["--child"]:
        child(argv[1], int(argv[2]))
        return
    tree = Path(argv[argv.index("--tree") + 1]).resolve() if "--tree" in argv else ROOT
    cases = [a for a in argv if a in CASES]
    result = measure(cases or None, tree)
    if "--json" in argv:
        print(json.dumps(result, indent=1))
        return
    for name, d in result.get("detail", {}).items():
        print(f"{name:18} {d['per_unit']:>10,} per {d['unit'][:-1]:6}  {d['sends_per_unit']:.4f} sends")
    if "note" in result:
        print(result["note"])


if __name__ == "__main__":
    main()
