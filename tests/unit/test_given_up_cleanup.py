"""After a stuck write is given up, the app's own cleanup runs at once, not at the next cyclic GC.

A ``StreamingResponse`` whose generator has a ``finally`` (or an ``async with`` around an upstream), a
client that stops reading, ``send_timeout``: the middleware gives the client up and cancels the app. The
app's task is then inside our ``send``, its generator suspended at its ``yield``. Had the cancellation
been raised there, it would pass the generator by (an async generator is closed only when collected),
and on asyncio anyio's task group keeps that cancellation in a reference cycle (``TaskGroup._spawn``'s
``task_done`` callback holds the exception in a local, and the exception's traceback holds that
callback's frame, and the frames of Starlette's ``stream_response``, whose ``self`` holds the generator):
the upstream stays open until a collection. So the writer lets the cut write return, as a write its own
scope cut does, and the app's cancelled scope cancels it at its next checkpoint: inside the generator,
whose ``finally`` runs then.

What remains (not ours): a generator that awaits nothing between its yields is cancelled at its next
``send``, outside it, and on asyncio its ``finally`` still waits for the collector (anyio's cycle).

Killing mutation: ``Writer._given_up`` returning False (the cut write raises the cancellation, as before);
the control below runs exactly that and finds the cleanup not run, on asyncio, until ``gc.collect()``.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from sse_middleware import StreamingMiddleware, StreamingSettings
from sse_middleware._asgi.writer import Writer

from ..support.harness import Wire, run_for
from .test_no_cycles import no_gc  # noqa: F401 - the fixture: the collector off for one test

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_signals", "no_gc")]


class Upstream:
    """An upstream connection the app holds open while it relays: ``async with`` it."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def __aenter__(self) -> Upstream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.log.append("upstream closed")


def app(log: list[str]) -> Starlette:
    async def tokens() -> AsyncIterator[str]:
        try:
            async with Upstream(log):
                n = 0
                while True:
                    yield f'data: {{"n": {n}}}\n\n'
                    n += 1
                    await anyio.sleep(0)  # the upstream's next chunk
        finally:
            log.append("finally")

    async def route(request: Request) -> StreamingResponse:
        return StreamingResponse(tokens(), media_type="text/event-stream")

    return Starlette(routes=[Route("/s", route)])


async def give_up(log: list[str]) -> Wire:
    middleware = StreamingMiddleware(app(log), StreamingSettings(send_timeout=0.5, telemetry=False))
    wire = Wire(block_at=3)  # the client stops reading at the third body
    assert not await run_for(10, middleware, wire)  # the ASGI call returns: the client was given up
    return wire


async def test_the_apps_cleanup_has_run_when_the_stuck_client_is_given_up() -> None:
    log: list[str] = []
    wire = await give_up(log)
    assert wire.bodies == 3 and wire.after_gone == 0
    assert log == ["upstream closed", "finally"]  # right after the give-up, with the collector off


async def test_control_a_cut_write_that_raises_leaves_the_cleanup_to_the_collector(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cycle back: the cut write raises the cancellation where the app's task waits in our send."""

    def never(self: Writer, exc: BaseException) -> bool:
        return False

    monkeypatch.setattr(Writer, "_given_up", never)
    log: list[str] = []
    await give_up(log)
    for _ in range(3):
        await anyio.sleep(0)
    if anyio_backend == "trio":  # trio's nursery keeps no such cycle: the generator is collected at once
        assert log == ["upstream closed", "finally"]
        return
    assert log == []  # held by anyio's reference cycle
    gc.collect()
    for _ in range(3):
        await anyio.sleep(0)  # asyncio closes a collected async generator in a task of its own
    assert log == ["upstream closed", "finally"]
