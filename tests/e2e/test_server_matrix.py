"""The ASGI-level behaviour on every server: uvicorn (httptools and h11), hypercorn (asyncio and trio)
and granian, each against the same app without the middleware (the control).

What differs between them, and how the middleware handles it (docs/reliability.md, "Servers"):
uvicorn and granian declare ASGI spec 2.3 and hypercorn 2.1: none of them raises from ``send`` after
the client left (their sends then silently do nothing), so a raw app that never calls ``receive`` runs on
without us. The middleware watches ``receive`` for ``http.disconnect`` (and treats ``OSError`` from
``send`` the same, for servers on spec 2.4) and stops the app on all five. granian answers a *second
concurrent* ``receive()`` with an immediate ``http.disconnect`` (uvicorn and hypercorn queue it), so the
middleware must never have two in flight (its listener and the app's own, e.g. Starlette's).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from ..support.clients import read_stream
from ..support.servers import SERVERS, Server, serve, stats

pytestmark = pytest.mark.timeout(120)
ENV = {"SSE_MIDDLEWARE_HEARTBEAT_INTERVAL": "0.2"}


@pytest.fixture(scope="module", params=SERVERS)
def pair(request: pytest.FixtureRequest) -> Iterator[tuple[Server, Server]]:
    with (
        serve(request.param, env=ENV) as wrapped,
        serve(request.param, env={**ENV, "TEST_WRAP": "0"}) as control,
    ):
        yield wrapped, control


def test_anti_buffering_headers_and_events_unchanged(pair: tuple[Server, Server]) -> None:
    """Three times: on granian the second request is where a competing ``receive`` used to cut streams."""
    wrapped, control = pair
    for _ in range(3):
        ours, theirs = (
            read_stream(s.url + "/stream?id=3&n=5&delay=0.05&kind=sse") for s in (wrapped, control)
        )
        assert ours.headers["x-accel-buffering"] == "no" and "no-transform" in ours.headers["cache-control"]
        assert "x-accel-buffering" not in theirs.headers
        assert (
            [e.data for e in ours.events] == [e.data for e in theirs.events] == [f"<3:{k}>" for k in range(5)]
        )


def test_a_failure_after_the_start_is_an_error_event(pair: tuple[Server, Server]) -> None:
    wrapped, control = pair
    ours = read_stream(wrapped.url + "/stream?id=4&n=6&kind=sse&fail_at=3")
    assert ours.error is None and ours.events[-1].event == "error"
    assert json.loads(ours.events[-1].data)["error"]["type"] == "internal_error"
    assert b"secret-4" not in ours.body
    theirs = read_stream(control.url + "/stream?id=4&n=6&kind=sse&fail_at=3")
    # The control: the same three events, then nothing the client could tell from a dropped connection.
    before = [f"<4:{k}>" for k in range(3)]
    assert [e.data for e in theirs.events] == [e.data for e in ours.events[:-1]] == before
    assert all(e.event != "error" for e in theirs.events)


def test_heartbeats_fill_a_silence(pair: tuple[Server, Server]) -> None:
    wrapped, control = pair
    ours, theirs = (read_stream(s.url + "/stream?id=5&n=2&delay=0.7&kind=sse") for s in (wrapped, control))
    assert ours.comments and not theirs.comments
    assert [e.data for e in ours.events] == [e.data for e in theirs.events]


def test_coalescing_merges_a_fast_openai_stream(pair: tuple[Server, Server]) -> None:
    wrapped, control = pair
    ours, theirs = (read_stream(s.url + "/stream?id=6&n=300&kind=openai") for s in (wrapped, control))

    def text(events: list) -> str:  # type: ignore[type-arg]
        return "".join(
            json.loads(e.data)["choices"][0]["delta"]["content"] for e in events if e.data != "[DONE]"
        )

    assert text(ours.events) == text(theirs.events) == "".join(f"<6:{k}>" for k in range(300))
    assert len(ours.events) * 3 < len(theirs.events)


def raw_forever_after_disconnect(server: Server, wait: float) -> bool:
    """Open the raw app (it never calls receive), read its first event, leave; whether it then ended."""
    before = stats(server)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /raw_forever HTTP/1.1\r\nHost: t\r\n\r\n")
        assert b"data: 0" in sock.recv(4096) or b"data: 0" in sock.recv(4096)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        now = stats(server, fast=True)
        if now["finalized"] - before["finalized"] >= 1 and now["started"] - before["started"] == 1:
            return True
        time.sleep(0.05)
    return False


def test_a_client_that_leaves_stops_even_an_app_that_never_receives(pair: tuple[Server, Server]) -> None:
    wrapped, control = pair
    assert raw_forever_after_disconnect(wrapped, 3.0)
    assert not raw_forever_after_disconnect(control, 1.0)  # the control: the server alone does not stop it
