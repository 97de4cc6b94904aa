"""The producer side of resumable streams at raw ASGI level, through ``StreamingMiddleware``: a stream
whose client leaves detaches (the app goes on, unaware, into the log), a resume gets the rest exactly
once, nobody resuming ends it, a shutdown hands the live client over at once. Memory (asyncio, trio) and
a real redis-server; each behaviour against ``resume`` off as the control."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from sse_middleware import StreamingMiddleware, StreamingSettings
from sse_middleware._core.sse import parse

from ..support.harness import Wire, scope
from ..support.redis import redis_server  # noqa: F401
from ..support.resume_matrix import _anyio_backend, _backend_and_store, _redis, _store_url  # noqa: F401

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]
ALICE = [(b"authorization", b"Bearer alice")]
SSE = [(b"content-type", b"text/event-stream")]


class Producer:
    """An app that streams ``n`` events ``every`` seconds apart, listening on receive as Starlette does
    (so without resume it hears the disconnect and stops), and records what it got to send."""

    def __init__(self, n: int = 12, every: float = 0.03) -> None:
        self.n, self.every = n, every
        self.sent = 0
        self.heard_disconnect = False
        self.finished = anyio.Event()
        self.calls = 0

    async def __call__(self, scope_: Any, receive: Any, send: Any) -> None:
        self.calls += 1

        async def listen() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            self.heard_disconnect = True
            tg.cancel_scope.cancel()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(listen)
                await send({"type": "http.response.start", "status": 200, "headers": SSE})
                for i in range(1, self.n + 1):
                    await send({"type": "http.response.body", "body": b"data: %d\n\n" % i, "more_body": True})
                    self.sent = i
                    await anyio.sleep(self.every)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                tg.cancel_scope.cancel()
        finally:
            self.finished.set()


def mw(app: Any, store_url: str, *, resume: bool = True, **changes: Any) -> StreamingMiddleware:
    settings = {"heartbeat_interval": 0, "coalesce": False, "resume": resume, "resume_store": store_url}
    return StreamingMiddleware(app, StreamingSettings(**{**settings, **changes}))


def data(wire: Wire) -> list[str]:
    return [e.data for e in wire.events()]


async def first_run(m: StreamingMiddleware, leave_after: int) -> Wire:
    """A client that reads ``leave_after`` events, then leaves."""
    wire = Wire(leave_at=leave_after + 1)
    with anyio.move_on_after(10):
        await m(scope() | {"headers": ALICE}, wire.receive, wire.send)
    return wire


async def test_a_client_that_leaves_does_not_stop_the_app_and_a_resume_gets_the_rest(store_url: str) -> None:
    app = Producer()
    m = mw(app, store_url)
    async with anyio.create_task_group() as tg:
        first = Wire(leave_at=5)
        tg.start_soon(m, scope() | {"headers": ALICE}, first.receive, first.send)
        while not first.gone:
            await anyio.sleep(0.01)
        await app.finished.wait()
    assert data(first) == ["1", "2", "3", "4"] and app.sent == 12 and not app.heard_disconnect
    last = first.events()[-1].id
    assert last is not None and last.endswith(".4")
    again = Wire()
    with anyio.fail_after(10):
        await m(scope() | {"headers": [*ALICE, (b"last-event-id", last.encode())]}, again.receive, again.send)
    assert data(again) == [str(i) for i in range(5, 13)] and app.calls == 1  # the app ran once

    control_app = Producer()  # control: resume off, the app hears the client leave and stops
    control = Wire(leave_at=5)
    with anyio.move_on_after(5):
        await mw(control_app, store_url, resume=False)(scope(), control.receive, control.send)
    assert control_app.heard_disconnect and control_app.sent < 12


async def test_nobody_resuming_ends_the_detached_app(store_url: str) -> None:
    app, patient = Producer(n=200, every=0.02), Producer(n=200, every=0.02)
    async with anyio.create_task_group() as tg:
        tg.start_soon(first_run, mw(app, store_url, resume_abandon_after=0.2), 3)
        tg.start_soon(first_run, mw(patient, store_url, resume_abandon_after=30), 3)
        with anyio.fail_after(5):
            await app.finished.wait()
        assert app.sent < 60 and not app.heard_disconnect  # about 0.2 s after the client left
        await anyio.sleep(0.3)
        assert not patient.finished.is_set()  # control: a longer patience keeps it producing
        tg.cancel_scope.cancel()


async def test_a_shutdown_hands_the_live_client_over_at_once(store_url: str) -> None:
    app = Producer(n=30, every=0.03)
    m = mw(app, store_url, shutdown_grace=10)
    wire = Wire()
    async with anyio.create_task_group() as tg:
        tg.start_soon(m, scope() | {"headers": ALICE}, wire.receive, wire.send)
        while app.sent < 3:
            await anyio.sleep(0.01)
        m.begin_shutdown()
        with anyio.fail_after(2):  # not after the 10 s grace: at once
            while not wire.complete:
                await anyio.sleep(0.01)
        assert b"retry: 1000\n\n" in wire.data and b"event: error" not in wire.data
        await app.finished.wait()  # the app produced into the log meanwhile
    assert app.sent == 30 and not app.heard_disconnect
    last = wire.events()[-1].id
    assert last is not None
    again = Wire()
    m2 = mw(Producer(), store_url)  # another host, the same store (a new middleware, no shutdown)
    if store_url.startswith("redis"):
        resume = scope() | {"headers": [*ALICE, (b"last-event-id", last.encode())]}
        await m2(resume, again.receive, again.send)
        seen = data(wire) + data(again)
        assert seen == [str(i) for i in range(1, 31)]  # one uninterrupted answer, each event once

    control_app, control = Producer(n=30, every=0.03), Wire()  # control: resume off, the grace applies
    m3 = mw(control_app, store_url, resume=False, shutdown_grace=0.3)
    async with anyio.create_task_group() as tg:
        tg.start_soon(m3, scope(), control.receive, control.send)
        while control_app.sent < 3:
            await anyio.sleep(0.01)
        m3.begin_shutdown()
        await anyio.sleep(0.15)
        assert not control.complete  # the grace runs first
    assert control.complete and parse(control.data)[-1].event == "error"
