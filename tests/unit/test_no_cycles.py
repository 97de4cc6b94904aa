"""A stream's objects are freed by reference counting the moment its response ends: nothing of ours is
left in a reference cycle for the cyclic GC to find. A server making thousands of streams otherwise
pays for collections that walk its whole heap, and for memory that stays dirty until one runs
(docs/benchmarks.md, "Per one-token stream"). Each case runs one stream with the GC off, then asks a
collection what it would have freed.

Control: the same check finds the cycles of the shell as it was (each stream left ~46 objects, among
them the responder, the stream, its timers, watcher and pipeline), which is what the killing mutations
in the commit message bring back."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from sse_middleware import Blocked, StreamingMiddleware, StreamingSettings

from ..support.harness import Script, Wire, body, run_for, start
from ..support.otel import Otel

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_signals")]

TOKENS = (b'data: {"text":"Hel"}\n\n', b'data: {"text":"lo"}\n\n', b"data: [DONE]\n\n")


def ours_left_in_cycles() -> list[str]:
    """The types of ours that a collection now would free (so: only reachable through a cycle)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return sorted(
            {type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("sse_middleware")}
        )
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


@pytest.fixture
def no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _no_guard(check: Any) -> None:
    return None


def _block_at_lo(check: Any) -> None:
    if "lo" in check.text:
        raise Blocked("no")


class _Raises:
    async def __call__(self, scope_: Any, receive: Any, send: Any) -> None:
        await send(start())
        await send(body(TOKENS[0]))
        raise RuntimeError("boom")


CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "coalesced": ({}, {}),
    "pass-through": ({"coalesce": False}, {}),
    "telemetry": ({}, {"otel": True}),
    "guards": ({"telemetry": False}, {"guards": [_no_guard]}),
    "guard-blocks": ({"telemetry": False}, {"guards": [_block_at_lo]}),
    "guard-hold": ({"telemetry": False, "guard_mode": "hold"}, {"guards": [_no_guard]}),
    "resumable": ({"resume": True, "heartbeat_interval": 0}, {}),
    "app-error": ({}, {"app": _Raises()}),
    "client-leaves": ({}, {"leave_at": 2}),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_finished_stream_leaves_nothing_of_ours_in_a_cycle(case: str, no_gc: None) -> None:
    settings, extra = CASES[case]
    otel = Otel() if extra.get("otel") else None
    providers = {"tracer_provider": otel.tp, "meter_provider": otel.mp} if otel else {}
    app = extra.get("app") or Script(TOKENS)
    middleware = StreamingMiddleware(
        app, StreamingSettings(**settings), guards=extra.get("guards", ()), **providers
    )
    wire = Wire(leave_at=extra.get("leave_at"))
    assert not await run_for(10, middleware, wire)
    await anyio.sleep(0)  # whatever the stream scheduled at its end has run
    assert wire.bodies >= 1
    assert ours_left_in_cycles() == []
    if otel is not None:
        assert otel.spans()  # the telemetry case did make its span
        otel.shutdown()


async def test_control_a_cycle_of_ours_is_found(no_gc: None) -> None:
    """The check itself: a stream object kept only by a cycle is reported."""
    middleware = StreamingMiddleware(Script(TOKENS), StreamingSettings())
    wire = Wire()
    assert not await run_for(10, middleware, wire)
    holder: list[Any] = []
    holder.append(holder)
    holder.append(middleware)  # the middleware object, now only reachable from the cycle
    del middleware, holder
    assert "StreamingMiddleware" in ours_left_in_cycles()
