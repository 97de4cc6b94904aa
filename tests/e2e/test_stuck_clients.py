"""``send_timeout`` on real servers (uvicorn and hypercorn, subprocesses): a client that never reads, with a
4 KiB receive buffer, on an endpoint writing 16 KB every 10 ms. Without the middleware the app is held in
its ``send`` for as long as the test watches (the control); with it (``send_timeout=1``) the app is
cancelled, its cleanup run, within a few seconds, with one log line and no traceback. A client that reads
slowly but steadily (4 KiB every 100 ms) is never cut and gets every byte, though its stream lasts several
times the timeout. A resumable stream whose client is stuck detaches: its app runs to the end, and a
resume from the last event the stuck client got brings exactly the rest.
"""

from __future__ import annotations

import contextlib
import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import h11
import httpx
import pytest

from ..support.servers import Server, serve

pytestmark = pytest.mark.timeout(120)
APP = "tests.support.apps_clients:app"
SERVERS = ["uvicorn-httptools", "hypercorn-asyncio"]
TIMEOUT = 1.0
EVENT = re.compile(rb"data: (\d+) x+\n(?:id: ([^\n]+)\n)?\n")


def state(server: Server, ident: str) -> dict[str, Any]:
    with httpx.Client(timeout=10) as client:
        found: dict[str, Any] = client.get(f"{server.url}/state", params={"id": ident}).json()
    return found


@contextlib.contextmanager
def stuck_client(server: Server, path: str) -> Iterator[socket.socket]:
    """A client with a 4 KiB receive buffer (set before connect, so the window is small from the
    handshake on) that sends its request and then reads nothing."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    try:
        yield sock
    finally:
        sock.close()


def stopped_sending(server: Server, ident: str) -> dict[str, Any]:
    """The app's state once its writes stopped (the same count a second apart): the socket buffers full.
    How long they take to fill depends on the machine's load, so no fixed wait."""
    deadline = time.monotonic() + 30
    last = state(server, ident)
    while True:
        time.sleep(1)
        now = state(server, ident)
        if (now and last and now["sent"] == last["sent"]) or time.monotonic() > deadline:
            return now
        last = now


def wait_ended(server: Server, ident: str, seconds: float) -> tuple[dict[str, Any], float]:
    """Poll the app's state until it ended or ``seconds`` passed; (state, seconds it took)."""
    began = time.monotonic()
    while True:
        now = state(server, ident)
        if (now and now["ended"]) or time.monotonic() - began > seconds:
            return now, time.monotonic() - began
        time.sleep(0.1)


def wrapped_server(kind: str, **settings: str) -> contextlib.AbstractContextManager[Server]:
    env = {"TEST_WRAP": "1", "SSE_MIDDLEWARE_SEND_TIMEOUT": str(TIMEOUT), "SSE_MIDDLEWARE_TELEMETRY": "0"}
    return serve(kind, APP, {**env, **{f"SSE_MIDDLEWARE_{k.upper()}": v for k, v in settings.items()}})


@pytest.mark.parametrize("kind", SERVERS)
def test_a_client_that_never_reads_lets_the_app_go(kind: str) -> None:
    with wrapped_server(kind) as server, stuck_client(server, "/flood?id=stuck"):
        ended, took = wait_ended(server, "stuck", 15)
        print(
            f"\n{kind}: app {ended['ended']} {took:.1f} s after the request, having written {ended['sent']}"
        )
        assert ended["ended"] == "cancelled" and took < 10
    log = server.output()
    assert log.count("the client stopped reading") == 1 and "Traceback" not in log, log


@pytest.mark.parametrize("kind", SERVERS)
def test_control_without_the_middleware_the_app_is_held(kind: str) -> None:
    with serve(kind, APP) as server, stuck_client(server, "/flood?id=held"):
        early = stopped_sending(server, "held")
        ended, _ = wait_ended(server, "held", 4)
    assert ended["ended"] is None and ended["sent"] == early["sent"]  # held in its send, not producing


def slow_read(server: Server, path: str) -> tuple[bytes, float]:
    """Read the whole response at 4 KiB every 100 ms; (body bytes, seconds it took)."""
    conn = h11.Connection(h11.CLIENT)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(conn.send(h11.Request(method="GET", target=path, headers=[("Host", "t")])))
    sock.sendall(conn.send(h11.EndOfMessage()))
    began, data = time.monotonic(), bytearray()
    with sock:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(sock.recv(4096))
                time.sleep(0.1)
            elif isinstance(event, h11.Data):
                data += event.data
            elif isinstance(event, h11.EndOfMessage):
                return bytes(data), time.monotonic() - began


@pytest.mark.parametrize("kind", SERVERS)
def test_a_slow_steady_reader_is_never_cut(kind: str) -> None:
    """About 160 KiB at 40 KiB/s: the stream takes ~4 s, four times the timeout, and is never cut. On
    loopback the kernel takes ~3 MB before a write blocks at all (the stuck client above got ~176 events of
    16 KB first), so this shows that a reader that keeps reading is not taken for a stuck one; that the
    timeout counts per write, not per stream, is shown in-process (tests/unit/test_send_timeout.py)."""
    n = 40
    with wrapped_server(kind) as server:
        data, took = slow_read(server, f"/flood?id=slow&size=4096&every=0&n={n}")
        ended = state(server, "slow")
    print(f"\n{kind}: {len(data)} B in {took:.1f} s")
    assert [int(m.group(1)) for m in EVENT.finditer(data)] == list(range(1, n + 1))
    assert ended["ended"] == "finished" and took > 3 * TIMEOUT


def read_what_is_there(sock: socket.socket) -> list[tuple[int, str]]:
    """Everything the stuck client's side holds, read once the server has given up on it: the events it
    got (each went out as one chunk, so the chunked framing never splits one)."""
    sock.settimeout(3)
    data = bytearray()
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            data += chunk
    return [(int(m.group(1)), m.group(2).decode()) for m in EVENT.finditer(data) if m.group(2)]


@pytest.mark.parametrize("kind", SERVERS)
def test_a_resumable_stream_whose_client_is_stuck_detaches_and_resumes(kind: str) -> None:
    n = 300
    path = f"/flood?id=resumable&size=16384&every=0.01&n={n}"
    with wrapped_server(kind, resume="1") as server:
        with stuck_client(server, path) as sock:
            ended, _ = wait_ended(server, "resumable", 20)
            assert ended["ended"] == "finished"  # detached: the app ran to its end, into the log
            got = read_what_is_there(sock)
        assert got and [i for i, _ in got] == list(range(1, len(got) + 1)) and len(got) < n
        headers = {"last-event-id": got[-1][1]}
        with httpx.Client(timeout=20) as client:
            rest = client.get(server.url + path, headers=headers)
        assert rest.status_code == 200
        assert [int(m.group(1)) for m in EVENT.finditer(rest.content)] == list(range(len(got) + 1, n + 1))
        assert state(server, "resumable")["sent"] == n  # the app ran once
    print(f"\n{kind}: the stuck client had {len(got)} of {n} events; the resume brought the rest")
