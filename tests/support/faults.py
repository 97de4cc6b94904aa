"""Faults at random points for tests/unit/test_faults.py: the plan of one case (an app's stream in a
dialect, cut into sends at random, and one fault at a random point), the app that plays it, the server
side that records it (``FaultWire``) and what happened (``Outcome``), and the text a client reads."""

from __future__ import annotations

import itertools
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
from hypothesis import strategies as st

from sse_middleware import StreamError, StreamingMiddleware, StreamingSettings
from sse_middleware._core.sse import parse

from .apps_reliability import openai_chunk
from .harness import PLAIN, SSE, Message, Wire, body, scope, start, text_of_events

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
GRACE = 0.005  # the shutdown grace of every case


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
class FaultWire(Wire):
    """The wire, noting how many app sends had returned when the fault hit it (the client left, or the
    server refused a body): everything in those was due before it."""

    app_sent: list[bytes] = field(default_factory=list)
    at_fault: int | None = None
    refused_final: bool = False  # the body refused was the response's last

    def leave(self) -> None:
        if not self.gone:
            self.at_fault = len(self.app_sent)
        super().leave()

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.body" and self.bodies + 1 == self.raise_at:
            self.at_fault = len(self.app_sent)
            self.refused_final = not message.get("more_body", False)
        await super().send(message)


@dataclass
class Outcome:
    wire: FaultWire
    finalized: int = 0
    sent: list[bytes] = field(default_factory=list)  # what the app got through its send
    attempted: list[bytes] = field(default_factory=list)  # what it handed to send (the last may be cut)
    ended: bool = False  # its final send returned: it ran to its end
    returned: list[float] = field(default_factory=list)  # when each of its sends returned (monotonic)
    struck: float = math.inf  # when a shutdown began or the server cancelled the request
    failed_at: int | None = None
    escaped: BaseException | None = None  # what came out of the middleware to the server

    def __post_init__(self) -> None:
        self.wire.app_sent = self.sent


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
                out.attempted.append(chunk)
                await send(body(chunk))
                out.sent.append(chunk)
                out.returned.append(time.monotonic())
                if plan.sleeps[i]:
                    await anyio.sleep(plan.sleeps[i])
            await send(body(b"", more=False))
            out.ended = True
        finally:
            out.finalized += 1

    return app


async def drive(target: Any, mw: StreamingMiddleware, plan: Plan, out: Outcome) -> None:
    """Run one request like a server would, injecting the plan's fault from outside when it is one."""
    wire = out.wire
    with anyio.CancelScope() as outer:
        async with anyio.create_task_group() as tg:
            if plan.fault == "cancel_outside":
                tg.start_soon(_later, plan.sleeps[-1] + 0.002, out, outer.cancel)
            elif plan.fault == "shutdown":
                tg.start_soon(_later, plan.sleeps[-2], out, lambda: mw.begin_shutdown(GRACE))
            elif plan.fault == "cancel_in_send":
                tg.start_soon(_when_blocked, wire, outer.cancel)
            try:
                await target(scope(spec=wire.style), wire.receive, wire.send)
            except Exception as exc:  # what the server would see raised from the app
                out.escaped = exc
            tg.cancel_scope.cancel()


async def _later(delay: float, out: Outcome, action: Any) -> None:
    await anyio.sleep(delay)
    out.struck = time.monotonic()
    action()


async def _when_blocked(wire: Wire, action: Any) -> None:
    while not wire.blocked:
        await anyio.sleep(0.001)
    action()


def wire_for(plan: Plan) -> FaultWire:
    wire = FaultWire(style=plan.style)
    if plan.fault == "leave":
        wire.leave_at = 1 + plan.at % 3
    elif plan.fault in ("cancel_in_send", "slow_client"):
        wire.block_at = 1 + plan.at % 3
        wire.block_for = 0.02 if plan.fault == "slow_client" else float("inf")
    elif plan.fault == "wire_raises":
        wire.raise_at = 1 + plan.at % 3
    return wire


def text(plan: Plan, chunks: list[bytes]) -> str | bytes:
    """What a client reads from ``chunks`` of the app's stream: the text of its whole events (bytes, for
    text/plain); an event the chunks end inside does not count."""
    if plan.dialect == "plain":  # bytes: a prefix may end inside a UTF-8 sequence
        return b"".join(chunks)
    return text_of_events(parse(b"".join(chunks)), plan.dialect)


def one_hole(whole: str | bytes, seen: str | bytes) -> bool:
    """Whether ``seen`` is a prefix of ``whole`` then, after at most one gap, a run of it that follows:
    one refused write leaves a hole, and nothing may be reordered, repeated or invented."""
    same = 0
    while same < min(len(whole), len(seen)) and whole[same] == seen[same]:
        same += 1
    rest = seen[same:]
    return not rest or whole.find(rest, same) >= 0  # type: ignore[arg-type]


def got(plan: Plan, wire: Wire) -> str | bytes:
    return wire.data if plan.dialect == "plain" else text_of_events(wire.events(), plan.dialect)


def error_type(wire: Wire) -> str | None:
    """The type of the dialect's error event the stream ends with (None: it ends without one)."""
    events = wire.events()
    if not events:
        return None
    try:
        last = json.loads(events[-1].data)
    except ValueError:
        return None
    error = last.get("error") if isinstance(last, dict) else None
    return str(error["type"]) if isinstance(error, dict) else None


def settings_for(plan: Plan) -> StreamingSettings:
    return StreamingSettings(
        coalesce=plan.coalesce,
        coalesce_max_delay=0.003,
        heartbeat_interval=plan.heartbeat,
        stall_timeout=0.02 if plan.fault == "stall" else 0.0,
        shutdown_grace=GRACE,
    )


def explicit(fault: str, style: str = "2.3", sleep: float = 0.0, at: int = 2) -> Plan:
    """Six tokens, one send each, ``sleep`` after each; the fault at send (or wire body) ``at``."""
    tokens = ["Hello", " wor", "ld", " é", "\n\n", " ok"]
    plan = Plan("openai", tokens, [], [sleep] * 14, fault, at, style, False, 0.0)
    plan.sends = encode(plan.dialect, tokens)
    return plan
