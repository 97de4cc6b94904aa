"""Compressed streams (``compress="auto"``), in process: ``python bench/compression.py [--json]``.

The OpenAI chat stream of :mod:`bench.workload` (one chunk per token) from a raw Starlette app, under
the middleware with ``compress`` off and ``auto`` (the request accepts gzip), called by a fake server
whose ``send`` records the bytes and the time of each body. Three figures:

- **bytes per token** on the wire at 100 tok/s (the real clock: coalescing merges tokens as it does
  live), for the raw app, the coalesced frames uncompressed, and compressed; over ``STREAMS`` streams of
  ``TOKENS`` tokens run together;
- **server CPU per token** at 100 tok/s (``time.process_time`` over those concurrent streams, divided by
  their tokens), off and auto, interleaved ``ROUNDS`` times, medians;
- **the first token's added latency**: from the request to the first body with content at the server's
  ``send``, one-token streams one after another, median of ``FIRSTS``, auto minus off.

Also the compressed size of the same coalesced frames with zlib's default window and memory (32 KiB,
memLevel 8: 256 KiB of state per stream) against the compressor's (4 KiB, memLevel 5: ~16 KiB).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path.pop(0)
sys.path.insert(0, str(ROOT))

from bench import apps, inproc  # noqa: E402

RATE = 100.0
TOKENS = 300
STREAMS = 20
ROUNDS = 3
FIRSTS = 200
_REQUEST = {"type": "http.request", "body": b"", "more_body": False}


def _app(compress: str | None) -> Any:
    from sse_middleware import StreamingMiddleware, StreamingSettings

    inner = apps.raw_app("/x")
    if compress is None:
        return inner
    return StreamingMiddleware(inner, StreamingSettings(telemetry=False, compress=compress))  # type: ignore[arg-type]


async def _stream(app: Any, tokens: int, rate: float) -> tuple[list[bytes], float | None, float]:
    """One request: the bodies the server got, when the first with content came (s after the call)."""
    scope = inproc._scope("x", tokens)
    scope["query_string"] = b"n=%d&rate=%g" % (tokens, rate)
    scope["headers"] = [*scope["headers"], (b"accept-encoding", b"gzip, deflate, br")]
    bodies: list[bytes] = []
    first: list[float] = []
    loop = asyncio.get_running_loop()
    requested = False

    async def receive() -> Any:
        nonlocal requested
        if requested:
            return await loop.create_future()
        requested = True
        return _REQUEST

    async def send(message: Any) -> None:
        if message["type"] == "http.response.body":
            data = message.get("body", b"")
            if data and not first:
                first.append(time.perf_counter())
            bodies.append(data)

    start = time.perf_counter()
    await app(scope, receive, send)
    return bodies, (first[0] - start) if first else None, start


async def _paced(app: Any) -> tuple[list[list[bytes]], float]:
    """``STREAMS`` streams at ``RATE`` together: their bodies, and the process CPU seconds they took."""
    cpu = time.process_time()
    runs = await asyncio.gather(*(_stream(app, TOKENS, RATE) for _ in range(STREAMS)))
    return [bodies for bodies, _, _ in runs], time.process_time() - cpu


def _wire(runs: list[list[bytes]]) -> float:
    return sum(len(b) for bodies in runs for b in bodies) / (len(runs) * TOKENS)


def _decoded(runs: list[list[bytes]]) -> list[bytes]:
    out = []
    for bodies in runs:
        decoder = zlib.decompressobj(16 + 15)
        out.append(b"".join(decoder.decompress(b) for b in bodies))
    return out


def _text(body: bytes) -> str:
    from sse_middleware._core.sse import Event, Parser

    out = []
    for event in Parser().feed(body):
        if isinstance(event, Event) and event.data.startswith("{"):
            out += [c["delta"].get("content") or "" for c in json.loads(event.data)["choices"]]
    return "".join(out)


def _recompressed(runs: list[list[bytes]], wbits: int, mem_level: int) -> float:
    """Bytes per token of the same frames, one sync-flushed gzip stream per stream with these settings."""
    total = 0
    for bodies in runs:
        z = zlib.compressobj(6, zlib.DEFLATED, 16 + wbits, mem_level)
        total += sum(len(z.compress(b) + z.flush(zlib.Z_SYNC_FLUSH)) for b in bodies if b)
        total += len(z.flush(zlib.Z_FINISH))
    return total / (len(runs) * TOKENS)


async def main() -> dict[str, Any]:
    raw, off, auto = _app(None), _app("off"), _app("auto")
    await _stream(off, 5, 0)  # warm-up: imports, first-call caches
    await _stream(auto, 5, 0)
    raw_runs, _ = await _paced(raw)
    cpu: dict[str, list[float]] = {"off": [], "auto": []}
    runs: dict[str, list[list[bytes]]] = {}
    for _ in range(ROUNDS):
        for name, app in (("off", off), ("auto", auto)):
            runs[name], seconds = await _paced(app)
            cpu[name].append(seconds / (STREAMS * TOKENS) * 1e6)
    texts = {_text(b"".join(bodies)) for bodies in runs["off"]} | {_text(b) for b in _decoded(runs["auto"])}
    if len(texts) != 1:
        raise RuntimeError("the compressed streams do not decode to the same text")
    firsts: dict[str, list[float]] = {"off": [], "auto": []}
    for _ in range(FIRSTS):
        for name, app in (("off", off), ("auto", auto)):
            _, first, _ = await _stream(app, 1, 0)
            if first is not None:
                firsts[name].append(first * 1e6)
    off_bytes, auto_bytes = _wire(runs["off"]), _wire(runs["auto"])
    return {
        "rate_tok_s": RATE,
        "tokens": TOKENS,
        "streams": STREAMS,
        "bytes_per_token": {
            "raw": round(_wire(raw_runs), 1),
            "coalesced": round(off_bytes, 1),
            "compressed": round(auto_bytes, 1),
            "compressed_zlib_defaults": round(_recompressed(runs["off"], 15, 8), 1),
        },
        "fewer_bytes_than_coalesced_pct": round(100 * (1 - auto_bytes / off_bytes), 1),
        "frames_per_token": round(
            sum(1 for bodies in runs["off"] for b in bodies if b) / (STREAMS * TOKENS), 3
        ),
        "cpu_us_per_token": {name: round(statistics.median(v), 2) for name, v in cpu.items()},
        "first_body_us": {name: round(statistics.median(v), 1) for name, v in firsts.items()},
        "first_token_added_us": round(
            statistics.median(firsts["auto"]) - statistics.median(firsts["off"]), 1
        ),
    }


if __name__ == "__main__":
    result = asyncio.run(main())
    print(json.dumps(result, indent=1) if "--json" in sys.argv else result)
