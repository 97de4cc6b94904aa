"""Per-append cost of resumable streams, in process: the tagger alone, and a StreamLog over the memory
store and over a real redis-server (started here). ``python bench/resume_append.py [--events N]``.

Two figures per store: the synchronous ``append`` the responder pays in the app's send path, and the
whole CPU of this process per event (for Redis that includes the flusher task batching the events into
pipelines; redis-server's own CPU is not counted). The loop yields to the event loop after every event,
as a real ``send`` does, so the flusher runs as it would under a live stream.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sse_middleware._core.resume import new_stream
from sse_middleware._core.tagger import Tagger
from sse_middleware._resume.log import StreamLog
from sse_middleware._resume.store import Store, StreamInfo, open_store

FRAME = b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" token"}}]}\n\n'  # noqa: E501


async def per_event(store: Store | None, events: int, yield_every: int) -> tuple[float, float]:
    """(µs of append per event, µs of this process's CPU per event)."""
    stream = new_stream()
    if store is None:
        tagger = Tagger(stream, lambda seq, data: None, 1 << 22)
        append = tagger.feed
    else:
        log = StreamLog(stream, await store.create(stream, StreamInfo(b"c"), 60), 1 << 22)
        append = log.append
    in_append = 0.0
    cpu = time.process_time()
    for i in range(events):
        t = time.perf_counter()
        append(FRAME)
        in_append += time.perf_counter() - t
        if i % yield_every == 0:
            await asyncio.sleep(0)
    if store is not None:
        await log.close(True)
    cpu = time.process_time() - cpu
    return in_append / events * 1e6, cpu / events * 1e6


async def paced(store: Store, rate: int, seconds: float = 3.0) -> float:
    """CPU of this process per event at ``rate`` events/s, less the same loop over the memory store."""
    memory = open_store("memory://")
    cpu = []
    for target in (store, memory):
        stream = new_stream()
        log = StreamLog(stream, await target.create(stream, StreamInfo(b"c"), 60), 1 << 22)
        start = time.process_time()
        for _ in range(int(rate * seconds)):
            log.append(FRAME)
            await asyncio.sleep(1 / rate)
        await log.close(True)
        cpu.append(time.process_time() - start)
    return (cpu[0] - cpu[1]) / (rate * seconds) * 1e6


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def main(events: int) -> None:
    print(f"{events} events of {len(FRAME)} bytes; µs per event (append in the send path / all CPU here)")
    base = await per_event(None, events, 1)
    print(f"  tagger alone:            {base[0]:.2f} / {base[1]:.2f}")
    memory = open_store("memory://")
    print("  memory://:               %.2f / %.2f" % await per_event(memory, events, 1))
    binary = shutil.which("redis-server")
    if binary is None:
        print("  redis://: redis-server not installed")
        return
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--dir", tmp, "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
        try:
            await asyncio.sleep(0.3)
            redis = open_store(f"redis://127.0.0.1:{port}/0")
            for every in (1, 64):
                a, c = await per_event(redis, events, every)
                print(f"  redis:// (yield every {every:>2}): {a:.2f} / {c:.2f}")
            for rate in (20, 100, 1000):  # events/s on one stream: a flush's cost per event
                cost = await paced(redis, rate)
                print(f"  redis:// at {rate:>4} events/s: all CPU here {cost:.1f} µs per event")
            await redis.aclose()
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    asyncio.run(main(parser.parse_args().events))
