"""The writer's waits, at the raw ASGI level on asyncio and trio: a write of the watcher's that waits for
the lock while the app's write is in flight is woken when that write ends (the harness's ``send`` yields,
as a real server's does under flow control), and a final write that gets stuck after a silence, when the
watcher has nothing else to wake for, is still cut at ``send_timeout``."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from sse_middleware import StreamingMiddleware, StreamingSettings

from ..support.harness import Wire, body, mw, run_for, scope, start

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_signals"), pytest.mark.timeout(60)]

TIMEOUT = 0.3
HOLD = 2.0  # how long the client holds a stuck write: several times the timeout


class Producer:
    """``n`` events ``every`` seconds apart; ``sent``: how many the app has written."""

    def __init__(self, n: int = 40, every: float = 0.05) -> None:
        self.n, self.every, self.sent = n, every, 0

    async def __call__(self, scope_: Any, receive: Any, send: Any) -> None:
        await send(start())
        for i in range(1, self.n + 1):
            await send(body(b"data: %d\n\n" % i))
            self.sent = i
            await anyio.sleep(self.every)
        await send(body(b"", more=False))


async def test_a_shutdown_hands_a_resumable_stream_over_while_the_apps_write_is_in_flight() -> None:
    """The shutdown comes while the app's third write is on its way (the server's send yields for
    0.3 s): the handover's goodbye waits for the lock, and is woken when that write ends, so the client
    gets its reconnect hint and a clean end at once, while the app goes on into the log. Killed by the
    per-token path freeing the lock by its flag only (``lock.busy = False`` in ``Writer.body``'s
    ``finally``): the waiter is never woken, and the client reads to the app's end with no hint."""
    app = Producer()
    settings = StreamingSettings(
        heartbeat_interval=0, coalesce=False, resume=True, shutdown_grace=30, telemetry=False
    )
    m = StreamingMiddleware(app, settings)
    in_flight: list[int] = []

    def at_body(n: int) -> None:
        if n == 3:
            in_flight.append(app.sent)  # the app's third write has not returned yet
            m.begin_shutdown()

    wire = Wire(yield_for=0.3, on_body=at_body)
    async with anyio.create_task_group() as tg:
        tg.start_soon(m, scope(), wire.receive, wire.send)
        with anyio.fail_after(8):  # the app alone would take 40 x 0.35 s
            while not wire.complete:
                await anyio.sleep(0.01)
        handed_over_at = app.sent
        tg.cancel_scope.cancel()
    assert in_flight == [2]
    assert b"retry: 1000\n\n" in wire.data and b"event: error" not in wire.data
    assert handed_over_at < app.n  # the app was still producing: the handover did not wait for it
    assert [e.data for e in wire.events()][:3] == ["1", "2", "3"]


async def test_a_stuck_final_write_after_a_silence_is_cut() -> None:
    """No heartbeats: after the app's first write the watcher wakes once (for that write's stuck time),
    finds nothing due, and sleeps with no deadline. The final body then gets stuck: it is cut at
    ``send_timeout`` (the server gives the connection up), because the write tells the watcher when it
    will be stuck. Killed by ``Writer.put`` not calling ``watcher.want(now + timeout)`` (the final write
    then waits the whole ``HOLD`` and completes). Control: ``send_timeout=0``, the same write completes
    after the client's hold."""

    async def app(scope_: Any, receive: Any, send: Any) -> None:
        await send(start())
        await send(body(b"data: a\n\n"))
        await anyio.sleep(TIMEOUT * 3)  # a silence, past the first write's stuck time
        await send(body(b"", more=False))

    for timeout in (TIMEOUT, 0.0):
        wire = Wire(block_at=2, block_for=HOLD)
        assert not await run_for(HOLD + 5, mw(app, send_timeout=timeout, heartbeat_interval=0), wire)
        assert wire.bodies == 2
        if timeout:
            assert wire.gone and not wire.complete  # cut: the server gave the connection up
        else:
            assert not wire.gone and wire.complete  # control: the client read it after its hold
