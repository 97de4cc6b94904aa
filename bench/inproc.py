"""CPU µs per event in process: drive each contender's ASGI app directly, no server, no socket.

The scope is what uvicorn builds (ASGI spec 2.3). ``receive`` gives the empty request body, then blocks
until cancelled, as a connected client does; ``send`` discards. ``time.process_time`` brackets the whole
request, so per-request setup is included (amortized over ``events``) and nothing is subtracted.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench import apps

Message = dict[str, Any]


def _scope(name: str, events: int) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": "GET",
        "root_path": "",
        "path": "/" + name,
        "raw_path": ("/" + name).encode(),
        "query_string": b"n=%d" % events,
        "headers": [(b"host", b"127.0.0.1:8000"), (b"accept", b"text/event-stream")],
        "state": {},
    }


class _Sink:
    """A client that reads everything at once: ``send`` discards, counting body bytes."""

    def __init__(self) -> None:
        self.bodies = 0
        self.bytes = 0
        self.status = 0

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.body":
            body = message.get("body", b"")
            if body:
                self.bodies += 1
                self.bytes += len(body)
        elif message["type"] == "http.response.start":
            self.status = message["status"]


def request_then_wait(until: asyncio.Event) -> Callable[[], Awaitable[Message]]:
    """A ``receive``: the empty request, then nothing until ``until`` is set, then a disconnect."""
    requested = False

    async def receive() -> Message:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await until.wait()
        return {"type": "http.disconnect"}

    return receive


async def _drive(app: Any, name: str, events: int, *, collect: bool = True) -> tuple[float, _Sink]:
    sink = _Sink()
    receive = request_then_wait(asyncio.Event())
    if collect:  # not for many short streams in a row: a full collection per stream would dominate
        gc.collect()
    start = time.process_time()
    await app(_scope(name, events), receive, sink.send)
    cpu = time.process_time() - start
    if sink.status != 200 or sink.bodies == 0:
        raise RuntimeError(f"{name}: status {sink.status}, {sink.bodies} bodies")
    return cpu, sink


def measure(
    names: list[str], events: int, reps: int, log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)
) -> dict[str, Any]:
    """Median µs/event per contender over ``reps`` interleaved runs, plus frames sent per event."""
    built = {name: apps.build(name) for name in names}
    samples: dict[str, list[float]] = {name: [] for name in names}
    bodies: dict[str, float] = {}
    total = events + 3  # role chunk, finish chunk and [DONE] are events too

    async def main() -> None:
        for name in names:  # warm-up: imports, first-call caches, allocator
            await _drive(built[name], name, min(2000, events))
        for rep in range(reps):
            order = names if rep % 2 == 0 else list(reversed(names))
            for name in order:
                cpu, sink = await _drive(built[name], name, events)
                samples[name].append(cpu / total * 1e6)
                bodies[name] = sink.bodies / total
            log(f"  inproc rep {rep + 1}/{reps}: " + ", ".join(f"{n}={samples[n][-1]:.2f}" for n in names))

    asyncio.run(main())
    med = {name: round(statistics.median(v), 2) for name, v in samples.items()}
    return {
        "us_per_event": med,
        "samples": {n: [round(x, 2) for x in v] for n, v in samples.items()},
        "sends_per_event": {n: round(b, 4) for n, b in bodies.items()},
        "events": events,
        "reps": reps,
    }


if __name__ == "__main__":
    sys.path.insert(0, ".")
    names = [n for n in apps.CONTENDERS if n not in apps.available(apps.CONTENDERS)]
    print(measure(names, int(sys.argv[1]) if len(sys.argv) > 1 else 20000, 3))
