"""Graceful shutdown at the ASGI level, on asyncio and on trio: ``begin_shutdown``, a cancellation from
outside (what a server's own shutdown timeout does), and the chained SIGTERM handler. Each behaviour is
shown against a control: no shutdown, no grace, the app without the middleware, or a replaced handler."""

from __future__ import annotations

import json
import signal
import time

import anyio
import pytest

from sse_middleware import StreamingMiddleware, StreamingSettings
from sse_middleware._core.sse import Event

from ..support.harness import Apps, Script, Wire, mw, run_all, run_for

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_signals"), pytest.mark.timeout(60)]


# -- draining --------------------------------------------------------------------------------------------


def ends_with_reconnect(client: Wire, retry: int = 1000) -> bool:
    last = client.events()[-1]
    return (
        client.complete
        and last.event == "error"
        and last.retry == retry
        and json.loads(last.data)["error"]["type"] == "server_shutdown"
    )


async def test_begin_shutdown_ends_every_open_stream_with_a_reconnect_hint() -> None:
    apps, clients = Apps(endless=True), [Wire() for _ in range(3)]
    middleware = StreamingMiddleware(apps, StreamingSettings(shutdown_grace=0.3))
    async with anyio.create_task_group() as tg:
        for client in clients:
            tg.start_soon(run_for, 5, middleware, client)
        await anyio.sleep(0.2)
        middleware.begin_shutdown()
        started = time.monotonic()
    assert 0.25 <= time.monotonic() - started < 2.0
    assert all(ends_with_reconnect(c) for c in clients) and all(a.finished for a in apps.made)
    late = Wire()  # a stream that starts once the server is stopping gets the same grace
    assert not await run_for(3, middleware, late) and ends_with_reconnect(late)
    control = Wire()  # control: no shutdown, the endless stream keeps going
    assert await run_for(0.5, StreamingMiddleware(Apps(endless=True)), control)


@pytest.mark.parametrize(("grace", "cut"), [(2.0, False), (0.0, True)])
async def test_a_stream_that_ends_within_the_grace_ends_normally(grace: float, cut: bool) -> None:
    middleware, client = mw(Script((b"data: a\n\n", 0.4, b"data: b\n\n")), shutdown_retry_ms=250), Wire()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_for, 5, middleware, client)
        await anyio.sleep(0.1)
        middleware.begin_shutdown(grace)
    assert client.complete
    assert ends_with_reconnect(client, 250) is cut  # control: no grace, the stream is ended at once
    assert (client.events()[-1] == Event("b")) is not cut


async def test_cancelled_from_outside_the_stream_still_ends_with_a_reconnect_hint() -> None:
    """What uvicorn's --timeout-graceful-shutdown does: cancel the request's task."""
    ours, bare = Wire(), Wire()
    cancelled = await run_all((0.3, mw(Script(endless=True)), ours), (0.3, Script(endless=True), bare))
    assert cancelled == [True, True]
    assert ends_with_reconnect(ours)
    assert not bare.complete and bare.events()[-1].event is None  # control: cut without a word


async def test_signal_drains_streams_and_still_reaches_the_servers_handler() -> None:
    server_saw: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: server_saw.append(signum))  # "the server's"
    # No heartbeat and nothing to merge: no timer until the drain starts one, from the loop callback.
    settings = StreamingSettings(shutdown_grace=0.2, heartbeat_interval=0, coalesce=False)
    clients = [Wire(), Wire()]
    middleware = StreamingMiddleware(Apps(endless=True), settings)
    async with anyio.create_task_group() as tg:
        for client in clients:
            tg.start_soon(run_for, 5, middleware, client)
        await anyio.sleep(0.2)  # the first stream chained our handler in front of the server's
        signal.raise_signal(signal.SIGTERM)
        started = time.monotonic()
    assert time.monotonic() - started < 2.0 and all(ends_with_reconnect(c) for c in clients)
    assert server_saw == [signal.SIGTERM]


async def test_a_server_that_replaces_our_handler_is_chained_again_by_the_next_stream() -> None:
    """Control for the lazy install: a handler set after ours (as uvicorn's ``capture_signals`` does when
    a server starts serving again) replaces it, and a signal then drains nothing, until the next stream
    chains again in front of the new handler."""
    seen: list[str] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: seen.append("first server"))
    middleware = StreamingMiddleware(Apps(endless=True), StreamingSettings(shutdown_grace=0.2))
    first, second = Wire(), Wire()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_for, 5, middleware, first)
        await anyio.sleep(0.2)  # our link is in front of the first server's handler
        signal.signal(signal.SIGTERM, lambda signum, frame: seen.append("second server"))
        signal.raise_signal(signal.SIGTERM)
        await anyio.sleep(0.5)
        assert seen == ["second server"] and not first.complete  # nobody told the stream
        tg.start_soon(run_for, 5, middleware, second)
        await anyio.sleep(0.2)
        signal.raise_signal(signal.SIGTERM)
        signalled = time.monotonic()
    assert time.monotonic() - signalled < 2.0 and seen == ["second server"] * 2
    assert ends_with_reconnect(first) and ends_with_reconnect(second)
