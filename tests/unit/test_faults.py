"""Faults at random points, at the raw ASGI level (hypothesis, derandomized so CI is reproducible), on
asyncio and trio: client disconnects under both server styles, app exceptions, StreamError, the server
cancelling the app mid-send or mid-sleep, an app stall, a client that stops reading for a while, a
shutdown. After every case: the app's generator finalized exactly once, exactly one span ended and one
duration observation recorded, no task left, the wire well-formed, the text complete (or a clean prefix,
or everything before the failure plus the dialect's error event), no secret on the wire, and the same
middleware still serving the next stream.

The controls: the same cases without the middleware break the invariants the middleware provides (a
failure is a cut connection, not an error event; a client that left does not stop a raw app).
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from sse_middleware import StreamError, StreamingMiddleware, StreamingSettings
from sse_middleware._core.sse import parse

from ..support.apps_reliability import openai_chunk, task_count
from ..support.harness import PLAIN, SSE, Wire, body, scope, start, text_of_events
from ..support.otel import Otel

pytestmark = pytest.mark.timeout(240)
METRIC_DURATION = "gen_ai.server.request.duration"  # names fixed by the GenAI conventions
METRIC_TTFT = "gen_ai.server.time_to_first_token"
SECRET = "hunter2-db-password"
WORDS = ["Hello", " wor", "ld", " é", "😀", " 你好", " `x`", "\n\n", " **b", "old**", ".", " ok"]
FAULTS = [
    "none",
    "leave",
    "raise",
    "stream_error",
    "cancel_in_send",
    "cancel_outside",
    "stall",
    "slow_client",
    "shutdown",
    "wire_raises",
]
# Shrinking re-runs failing cases many times (each up to CASE_SECONDS): off in CI, on with FAULTS_SHRINK=1.
PHASES = (
    list(Phase) if os.environ.get("FAULTS_SHRINK") == "1" else [Phase.explicit, Phase.reuse, Phase.generate]
)
CASE_SECONDS = 3.0


def anthropic_event(text: str) -> str:
    body_ = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}
    return f"event: content_block_delta\ndata: {json.dumps(body_)}\n\n"


def encode(dialect: str, tokens: list[str]) -> list[bytes]:
    """One wire unit per token, as the app would produce it."""
    if dialect == "openai":
        return [openai_chunk(t).encode() for t in tokens]
    if dialect == "anthropic":
        head = 'event: message_start\ndata: {"type":"message_start","message":{"id":"m","model":"c"}}\n\n'
        return [head.encode()] + [anthropic_event(t).encode() for t in tokens]
    if dialect == "sse":
        return [f"data: {t.replace(chr(10), ' ')}\n\n".encode() for t in tokens]
    return [t.encode() for t in tokens]  # text/plain


@dataclass
class Plan:
    dialect: str
    tokens: list[str]
    cuts: list[int]  # where the app's byte stream is cut into sends
    sleeps: list[float]
    fault: str
    at: int  # the app send (or wire body) where the fault strikes
    style: str
    coalesce: bool
    heartbeat: float
    sends: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        blob = b"".join(encode(self.dialect, self.tokens))
        points = sorted({c % len(blob) for c in self.cuts} | {0, len(blob)})
        self.sends = [blob[a:b] for a, b in itertools.pairwise(points) if b > a]


@st.composite
def plans(draw: Any) -> Plan:
    tokens = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=24))
    n = len(tokens) * 2
    return Plan(
        dialect=draw(st.sampled_from(["openai", "anthropic", "sse", "plain"])),
        tokens=tokens,
        cuts=draw(st.lists(st.integers(0, 10_000), max_size=n)),
        sleeps=draw(st.lists(st.sampled_from([0.0, 0.0, 0.001, 0.004]), min_size=n + 2, max_size=n + 2)),
        fault=draw(st.sampled_from(FAULTS)),
        at=draw(st.integers(0, n)),
        style=draw(st.sampled_from(["2.3", "2.4"])),
        coalesce=draw(st.booleans()),
        heartbeat=draw(st.sampled_from([0.0, 0.003])),
    )


@dataclass
class Outcome:
    wire: Wire
    finalized: int = 0
    sent: list[bytes] = field(default_factory=list)  # what the app got through its send
    failed_at: int | None = None


def make_app(plan: Plan, out: Outcome) -> Any:
    headers = PLAIN if plan.dialect == "plain" else SSE

    async def app(scope_: Any, receive: Any, send: Any) -> None:
        try:
            await send(start(headers))
            for i, chunk in enumerate(plan.sends):
                if i == plan.at and plan.fault in ("raise", "stream_error", "stall"):
                    out.failed_at = i
                    if plan.fault == "raise":
                        raise RuntimeError(f"connection string postgres://app:{SECRET}@db")
                    if plan.fault == "stream_error":
                        raise StreamError("quota exceeded", type="rate_limit", code="quota")
                    await anyio.sleep_forever()
                await send(body(chunk))
                out.sent.append(chunk)
                if plan.sleeps[i]:
                    await anyio.sleep(plan.sleeps[i])
            await send(body(b"", more=False))
        finally:
            out.finalized += 1

    return app


async def drive(mw: StreamingMiddleware, plan: Plan, out: Outcome) -> None:
    """Run one request like a server would, injecting the plan's fault from outside when it is one."""
    wire = out.wire
    with anyio.CancelScope() as outer:
        async with anyio.create_task_group() as tg:
            if plan.fault == "cancel_outside":
                tg.start_soon(_later, plan.sleeps[-1] + 0.002, outer.cancel)
            elif plan.fault == "shutdown":
                tg.start_soon(_later, plan.sleeps[-2], lambda: mw.begin_shutdown(0.005))
            elif plan.fault == "cancel_in_send":
                tg.start_soon(_when_blocked, wire, outer.cancel)
            try:
                await mw(scope(), wire.receive, wire.send)
            except RuntimeError as exc:  # the server's own error, raised from its send, may come back out
                assert plan.fault == "wire_raises" and "protocol" in str(exc), exc
            tg.cancel_scope.cancel()


async def _later(delay: float, action: Any) -> None:
    await anyio.sleep(delay)
    action()


async def _when_blocked(wire: Wire, action: Any) -> None:
    while not wire.blocked:
        await anyio.sleep(0.001)
    action()


def wire_for(plan: Plan) -> Wire:
    wire = Wire(style=plan.style)
    if plan.fault == "leave":
        wire.leave_at = 1 + plan.at % 3
    elif plan.fault in ("cancel_in_send", "slow_client"):
        wire.block_at = 1 + plan.at % 3
        wire.block_for = 0.02 if plan.fault == "slow_client" else float("inf")
    elif plan.fault == "wire_raises":
        wire.raise_at = 1 + plan.at % 3
    return wire


def check(plan: Plan, out: Outcome) -> None:
    wire, dialect = out.wire, plan.dialect
    assert out.finalized == 1, "the app's generator must be finalized exactly once"
    assert wire.messages and wire.messages[0]["type"] == "http.response.start" and len(wire.starts) == 1
    finals = [
        i for i, m in enumerate(wire.messages) if m["type"] == "http.response.body" and not m.get("more_body")
    ]
    assert len(finals) <= 1 and (not finals or finals[0] == len(wire.messages) - 1), "nothing after the end"
    assert SECRET.encode() not in wire.data
    full = b"".join(plan.sends)
    before = b"".join(out.sent)
    if dialect == "plain":  # bytes: a prefix may end inside a UTF-8 sequence
        got, whole, prior = wire.data, full, before
    else:
        got = text_of_events(wire.events(), dialect)
        whole, prior = text_of_events(parse(full), dialect), text_of_events(parse(before), dialect)
    quiet = ("leave", "cancel_in_send", "wire_raises")
    if plan.fault in ("none", "slow_client") or (plan.fault in quiet and not wire.gone and not wire.raised):
        assert wire.complete and got == whole, "complete and in order"
        return
    if plan.fault in ("raise", "stream_error", "stall") and out.failed_at is not None:
        if dialect == "plain":
            assert not wire.complete, "text/plain has no error channel: the response must not end cleanly"
            assert wire.data == before
            return
        assert got == prior, "everything the app sent before it failed, nothing more"
        last = wire.events()[-1]
        assert "error" in last.data and wire.complete, "the dialect's error event ends the stream"
        return
    if plan.fault != "wire_raises":  # a body the server refused is a hole the client cannot see past
        assert whole.startswith(got), "a clean prefix: nothing reordered, duplicated or invented"


async def one_case(plan: Plan, otel: Otel) -> None:
    settings_ = StreamingSettings(
        coalesce=plan.coalesce,
        coalesce_max_delay=0.003,
        heartbeat_interval=plan.heartbeat,
        stall_timeout=0.02 if plan.fault == "stall" else 0.0,
        shutdown_grace=0.005,
    )
    mw = StreamingMiddleware(
        make_app(plan, Outcome(Wire())), settings_, tracer_provider=otel.tp, meter_provider=otel.mp
    )
    tasks, spans, durations, ttfts = (
        task_count(),
        len(otel.spans()),
        otel.count(METRIC_DURATION),
        otel.count(METRIC_TTFT),
    )
    out = Outcome(wire_for(plan))
    mw.app = make_app(plan, out)
    with anyio.fail_after(CASE_SECONDS):
        await drive(mw, plan, out)
    await anyio.sleep(0)
    check(plan, out)
    new = otel.spans()[spans:]
    assert len(new) == 1 and new[0].end_time is not None, "one span per stream, ended once"
    assert otel.count(METRIC_DURATION) == durations + 1, "one duration observation per stream"
    assert otel.count(METRIC_TTFT) - ttfts <= 1
    assert task_count() == tasks, "no task left behind"
    # The same middleware still serves: a plain stream after the fault is complete.
    again = Outcome(Wire())
    mw.app = make_app(Plan("sse", ["a", "b"], [], [0.0] * 6, "none", 0, "2.3", plan.coalesce, 0.0), again)
    with anyio.fail_after(5):
        await mw(scope(), again.wire.receive, again.wire.send)
    assert again.wire.complete and [e.data for e in again.wire.events()] == ["a", "b"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), phases=PHASES
)
@given(plan=plans())
def test_random_faults_keep_every_invariant(backend: str, plan: Plan, restore_signals: None) -> None:
    otel = Otel()
    anyio.run(one_case, plan, otel, backend=backend)
