"""Slow clients and huge events: the middleware holds no more than its bounds per stream.

A client reading at a trickle (a small receive buffer, 4 KiB every 50 ms) must stop the app through
back-pressure: what the app has produced beyond what the client read stays at the socket buffers'
size, and the server's memory stays flat. The control puts a queueing middleware in front (it breaks
back-pressure) and the same measurements fail. A 100 MiB event passes through in constant memory; the
control switches the protection off (``max_event_bytes`` above the event size) and the peak grows by
the whole event.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from sse_middleware import StreamingMiddleware, StreamingSettings

from ..support.harness import Wire, body, scope, start
from ..support.servers import Server, reset_peak, serve, stats

pytestmark = pytest.mark.timeout(180)
MIB = 1024 * 1024
AHEAD_MAX = 16 * MIB  # loopback socket buffers hold a few MiB; an unbounded holder passes this in < 1 s


def trickle(port: int, path: str, until: list[float], got: list[int]) -> socket.socket:
    """Read ``path`` at ~80 KB/s; ``got[i]`` is the byte count read by ``until[i]`` seconds."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    start, total = time.monotonic(), 0
    for mark in until:
        while time.monotonic() - start < mark:
            total += len(sock.recv(4096))
            time.sleep(0.05)
        got.append(total)
    return sock


def slow_read(server: Server, kind: str, sid: str) -> tuple[list[dict[str, Any]], list[int]]:
    """Trickle-read ``/burst`` for 3.5 s; server stats at 1.5 s and at 3.5 s, bytes read by then."""
    got: list[int] = []
    box: list[socket.socket] = []
    reader = threading.Thread(
        target=lambda: box.append(
            trickle(server.port, f"/burst?id={sid}&size=1024&kind={kind}", [1.5, 3.5], got)
        )
    )
    reader.start()
    time.sleep(1.5)
    early = stats(server, fast=True)
    reader.join()
    late = stats(server, fast=True)
    box[0].close()
    return [early, late], got


@pytest.fixture(scope="module")
def wrapped() -> Iterator[Server]:
    with serve("uvicorn-httptools") as server:
        yield server


@pytest.mark.parametrize("kind", ["sse", "openai"])
def test_a_trickle_reader_stops_the_app_and_memory_stays_flat(wrapped: Server, kind: str) -> None:
    """``sse``: events forwarded as they come; ``openai``: coalesced (the merge buffer is bounded too)."""
    sid = f"slow-{kind}"
    base = stats(wrapped, fast=True)
    (early, late), got = slow_read(wrapped, kind, sid)
    ahead = [early["produced"][sid] - got[0], late["produced"][sid] - got[1]]
    print(
        f"\n{kind}: read {got} B; app ahead by {ahead} B; RSS KiB {base['VmRSS']} -> {early['VmRSS']} "
        f"-> {late['VmRSS']}"
    )
    assert got[1] > got[0] > 0  # the client really reads, slowly
    assert max(ahead) < AHEAD_MAX  # back-pressure reached the app
    assert late["produced"][sid] - early["produced"][sid] < got[1] - got[0] + MIB  # it waits for the reader
    assert late["VmRSS"] - early["VmRSS"] < 4 * 1024  # flat, however long the stream (KiB)


def test_control_a_queueing_middleware_lets_the_app_run_away() -> None:
    """The control: with an unbounded queue in front, the same reader sees the app run far ahead."""
    with serve("uvicorn-httptools", env={"TEST_QUEUE": "1"}) as server:
        (early, late), got = slow_read(server, "sse", "queued")
    assert late["produced"]["queued"] - got[1] > AHEAD_MAX
    assert late["VmRSS"] - early["VmRSS"] > 4 * 1024


def read_huge(server: Server, query: str) -> tuple[int, int, int]:
    """Read a 100 MiB event as fast as possible; (bytes, peak RSS growth KiB, produced at first read)."""
    stats(server)
    before = stats(server)
    reset_peak(server.proc.pid)
    total, produced_at_first = 0, -1
    with httpx.Client(timeout=120) as client, client.stream("GET", server.url + "/huge?" + query) as response:
        for chunk in response.iter_raw():
            if produced_at_first < 0:
                produced_at_first = stats(server, fast=True)["produced"].get("h", 0)
            total += len(chunk)
    after = stats(server)
    return total, after["VmHWM"] - before["VmRSS"], produced_at_first


HUGE = "mb=100&chunk=1048576&id=h"


def test_a_hundred_mib_event_streams_through_in_constant_memory(wrapped: Server) -> None:
    total, growth, first = read_huge(wrapped, HUGE)
    print(
        f"\n100 MiB event: peak RSS growth {growth} KiB; the client's first read came when the app had "
        f"produced {first / MIB:.1f} MiB"
    )
    assert total == 100 * MIB + 8
    assert growth < 24 * 1024  # KiB: a few chunks, never the event
    assert first < 20 * MIB  # forwarded as it arrives, not at its end


def test_control_holding_the_whole_event_shows_in_the_peak() -> None:
    """The control: with ``max_event_bytes`` above the event, the middleware holds it all."""
    with serve("uvicorn-httptools", env={"SSE_MIDDLEWARE_MAX_EVENT_BYTES": str(200 * MIB)}) as server:
        total, growth, first = read_huge(server, HUGE)
    assert total == 100 * MIB + 8
    assert growth > 100 * 1024 and first >= 100 * MIB


# -- a client that stops reading for good, then a deploy (raw ASGI, asyncio and trio) -------------------

GRACE = 0.05
HARD_BOUND = GRACE + 5.0 + 2.5  # grace, the documented 5 s bound on finalization, scheduling slack


async def stuck_then_drain(
    wrap: bool, block_at: int, heartbeat: float, wait: float = HARD_BOUND
) -> tuple[float, bool]:
    """The client stops reading at wire body ``block_at``; once the send is stuck the server begins its
    shutdown. Returns how long the request then took to end (inf: still running after ``wait``) and
    whether the app's generator was finalized."""
    wire, finalized = Wire(block_at=block_at), []

    async def app(scope_: Any, receive: Any, send: Any) -> None:
        try:
            await send(start())
            for k in range(3):
                await send(body(b"data: %d\n\n" % k))
                await anyio.sleep(0.03)
            await send(body(b"", more=False))
        finally:
            finalized.append(True)

    settings_ = StreamingSettings(heartbeat_interval=heartbeat, shutdown_grace=GRACE, telemetry=False)
    mw = StreamingMiddleware(app, settings_)
    target = mw if wrap else app
    took = float("inf")
    async with anyio.create_task_group() as tg:

        async def serve_one() -> None:
            nonlocal took
            while not wire.blocked:
                await anyio.sleep(0.005)
            await anyio.sleep(0.1)  # stuck for a while: heartbeats come due meanwhile
            began = anyio.current_time()
            mw.begin_shutdown(GRACE)
            with anyio.move_on_after(wait):
                await done.wait()
                took = anyio.current_time() - began
            tg.cancel_scope.cancel()

        done = anyio.Event()
        tg.start_soon(serve_one)
        await target(scope(), wire.receive, wire.send)
        done.set()
    return took, bool(finalized)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize(
    ("block_at", "heartbeat"), [(2, 0.02), (4, 0.0)], ids=["mid-stream+heartbeat", "final-write"]
)
def test_a_client_that_stops_reading_cannot_hold_a_deploy(
    backend: str, block_at: int, heartbeat: float, restore_signals: None
) -> None:
    """Mid-stream with heartbeats on (the timer must not wait behind the stuck send), and the final write
    (the stream has no deadline left): the drain ends both within its grace plus the 5 s bound."""
    took, finalized = anyio.run(stuck_then_drain, True, block_at, heartbeat, backend=backend)
    assert took < HARD_BOUND and finalized, took


def test_control_without_the_middleware_a_stuck_client_holds_the_app() -> None:
    """The control: nothing else ends the app while its client does not read."""
    took, finalized = anyio.run(stuck_then_drain, False, 2, 0.0, 1.0, backend="asyncio")
    assert took == float("inf") and finalized  # finalized only by the test's own cancellation
