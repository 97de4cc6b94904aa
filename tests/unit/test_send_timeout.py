"""``send_timeout`` at the raw ASGI level, on asyncio and trio: a server ``send`` that blocks forever (a
client that stopped reading) ends the stream as a disconnect would, the app cancelled and its cleanup
run, with nothing written after the stuck write; a resumable stream detaches instead, its app goes on
into the log, and a resume with ``Last-Event-ID`` gets the rest. Each against its control:
``send_timeout=0`` keeps the app held for as long as the test waits."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import anyio
import pytest
from opentelemetry.trace import StatusCode

from sse_middleware import StreamingMiddleware, StreamingSettings
from sse_middleware._core.sse import Parser

from ..support.harness import Message, Script, Wire, body, mw, run_for, scope, start
from ..support.otel import Otel

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_signals"), pytest.mark.timeout(60)]

TIMEOUT = 0.3
HELD = 2.0  # how long a control is watched: several times the timeout


@pytest.mark.parametrize("block_at", [3, 1], ids=["app-write", "first-write"])
@pytest.mark.parametrize("heartbeat", [0.0, 0.05], ids=["no-heartbeat", "heartbeat"])
async def test_a_stuck_write_ends_the_stream_and_cancels_the_app(
    block_at: int, heartbeat: float, caplog: pytest.LogCaptureFixture
) -> None:
    """Heartbeats on or off (then the timeout is the watcher's only deadline); stuck at the first body
    or a later one. The app is an endless writer: only the middleware can end it."""
    app, wire = Script(endless=True, every=0.01), Wire(block_at=block_at)
    caplog.set_level(logging.INFO, logger="sse_middleware")
    held = await run_for(HELD + 3, mw(app, send_timeout=TIMEOUT, heartbeat_interval=heartbeat), wire)
    assert not held and app.finished and app.failed is None  # cancelled (its finally ran), no error
    assert wire.bodies == block_at and wire.after_gone == 0  # not one write after the stuck one
    assert not wire.complete
    stuck = [r for r in caplog.records if "send_timeout" in r.getMessage()]
    assert len(stuck) == 1 and stuck[0].levelno == logging.WARNING and stuck[0].exc_info is None


async def test_control_without_a_send_timeout_the_app_is_held() -> None:
    app, wire = Script(endless=True, every=0.01), Wire(block_at=3)
    assert await run_for(HELD, mw(app, send_timeout=0), wire)  # still running when the test gave up


async def test_a_slow_write_within_the_timeout_is_not_cut() -> None:
    """Every write takes a while (a slow reader), each shorter than the timeout, the stream far longer:
    nothing is cut, every byte arrives (control of the per-write measure: the stream as a whole takes
    several times the timeout)."""

    class Slow(Wire):
        async def send(self, message: Message) -> None:
            if message["type"] == "http.response.body":
                await anyio.sleep(TIMEOUT / 3)
            await super().send(message)

    steps = tuple(b"data: %d\n\n" % i for i in range(12))
    app, wire = Script(steps), Slow()
    assert not await run_for(10, mw(app, send_timeout=TIMEOUT, coalesce=False), wire)
    assert [e.data for e in wire.events()] == [str(i) for i in range(12)] and wire.complete


async def test_a_stuck_final_write_is_given_up_and_the_app_runs_on() -> None:
    """The app's own last body: the write is cut, the app is not cancelled (its background work after
    the response runs, as after a disconnect)."""
    after: list[str] = []

    async def app(scope_: Any, receive: Any, send: Any) -> None:
        await send(start())
        await send(body(b"data: a\n\n"))
        await send(body(b"", more=False))
        await anyio.sleep(0.05)
        after.append("background work")

    wire = Wire(block_at=2)
    assert not await run_for(TIMEOUT + 3, mw(app, send_timeout=TIMEOUT), wire)
    assert after == ["background work"] and wire.bodies == 2


# -- the watcher's own writes: a heartbeat, a flush of merged text ------------------------------------


class HeldOnCue(Wire):
    """A client that stops reading at the first body ``cue`` picks: that send blocks for ``hold`` seconds
    (then the client reads again), or until cancelled. A cancelled send may be half on the wire, so the
    server keeps the connection and records whatever is sent after it (``after_cut``)."""

    def __init__(self, cue: Any, hold: float) -> None:
        super().__init__()
        self.cue, self.hold = cue, hold
        self.cued = self.cut = False
        self.after_cut: list[Message] = []

    async def send(self, message: Message) -> None:
        if self.cut:
            self.after_cut.append(message)
        if message["type"] == "http.response.body" and not self.cued and self.cue(message["body"]):
            self.cued = True
            try:
                await anyio.sleep(self.hold)
            except BaseException:
                self.cut = True
                raise
        self.messages.append(message)


def _chunk(text: str) -> bytes:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": None}
    chunk = {"id": "c1", "object": "chat.completion.chunk", "choices": [choice]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _text(wire: Wire) -> str:
    chunks = [json.loads(e.data) for e in wire.events() if e.data.startswith("{")]
    return "".join(chunk["choices"][0]["delta"]["content"] for chunk in chunks)


class QuietThenTalks:
    """Writes ``first``, is quiet for a while (the watcher writes: a heartbeat, a flush), then writes five
    chunks more and ends."""

    def __init__(self, first: list[bytes]) -> None:
        self.first, self.later, self.finished = first, 0, False

    async def __call__(self, scope_: Any, receive: Any, send: Any) -> None:
        await send(start())
        try:
            for frame in self.first:
                await send(body(frame))
            await anyio.sleep(0.5)
            for i in range(5):
                await send(body(_chunk(f"later {i}")))
                self.later += 1
                await anyio.sleep(0.01)
            await send(body(b"", more=False))
        finally:
            self.finished = True


WATCHER_WRITES = {
    # (the app's first writes, the write the client stops at, settings)
    "heartbeat": (
        [b"data: 0\n\n"],
        lambda data: data.startswith(b":"),
        {"heartbeat_interval": 0.05, "coalesce": False},
    ),
    "flush": (
        [_chunk("a"), _chunk("b")],
        lambda data: b'"b"' in data,
        {"heartbeat_interval": 0, "coalesce_max_delay": 0.05},
    ),  # "b" waits to be merged
}


@pytest.mark.parametrize("write", list(WATCHER_WRITES))
async def test_a_stuck_heartbeat_or_flush_gives_the_client_up(write: str) -> None:
    """The write the client stopped at is the watcher's, not the app's: cut at send_timeout, it gives the
    client up as the app's would (the app cancelled, nothing written after the half-sent write). The
    control: the same write held for less than send_timeout, then the stream writes on to its end."""
    first, cue, settings = WATCHER_WRITES[write]
    app, wire = QuietThenTalks(first), HeldOnCue(cue, hold=math.inf)
    assert not await run_for(5, mw(app, send_timeout=TIMEOUT, **settings), wire)
    assert wire.cut and wire.after_cut == []  # not one message after the cut write
    assert app.finished and app.later == 0  # cancelled while quiet: the client was given up
    app, slow = QuietThenTalks(first), HeldOnCue(cue, hold=TIMEOUT / 3)
    assert not await run_for(5, mw(app, send_timeout=TIMEOUT, **settings), slow)
    assert slow.cued and not slow.cut and app.later == 5 and slow.complete  # the control
    assert _text(slow).endswith("later 3later 4")  # the text as its client reads it (merged or not)


# -- resumable: the stream detaches, the app goes on into the log --------------------------------------


async def test_a_resumable_stream_whose_client_is_stuck_detaches_and_resumes() -> None:
    events = [b"data: %d\n\n" % i for i in range(20)]
    app = Script(tuple(x for e in events for x in (e, 0.02)))
    middleware = mw(app, send_timeout=TIMEOUT, resume=True, heartbeat_interval=0, coalesce=False)
    wire = Wire(block_at=4)
    assert not await run_for(10, middleware, wire)
    assert app.finished and app.failed is None and wire.bodies == 4  # the app ran to its end
    got = wire.events()
    assert [e.data for e in got] == ["0", "1", "2"] and got[-1].id is not None
    # The client reads again: a resume from the last event it got brings the rest, and the end.
    again = Wire()
    resume_scope = scope(headers=[(b"host", b"t"), (b"last-event-id", got[-1].id.encode())])
    with anyio.fail_after(5):
        await middleware(resume_scope, again.receive, again.send)
    assert again.starts[0]["status"] == 200 and again.complete
    assert [e.data for e in Parser().feed(again.data)] == [str(i) for i in range(3, 20)]


async def test_control_a_resumable_stream_without_the_timeout_stays_stuck() -> None:
    app = Script(tuple(x for i in range(20) for x in (b"data: %d\n\n" % i, 0.02)))
    wire = Wire(block_at=4)
    assert await run_for(HELD, mw(app, send_timeout=0, resume=True, coalesce=False), wire)
    assert wire.messages[-1]["body"].startswith(b"data: 2\n")  # held at the stuck write


async def test_the_span_says_send_timeout_and_no_error(otel: Otel) -> None:
    """Like a disconnect: ``client_disconnected`` and ``send_timeout`` on the span, status unset (a
    sleeping laptop is no server error). Control: the same stream whose client reads has neither."""
    for block_at in (3, None):
        settings = StreamingSettings(send_timeout=TIMEOUT, heartbeat_interval=0)
        app = StreamingMiddleware(
            Script(endless=block_at is not None, steps=(b"data: x\n\n",) * 4),
            settings,
            tracer_provider=otel.tp,
            meter_provider=otel.mp,
        )
        assert not await run_for(5, app, Wire(block_at=block_at))
    stuck, fine = otel.ours()
    assert stuck.attributes is not None and fine.attributes is not None
    assert stuck.attributes["sse_middleware.send_timeout"] is True
    assert stuck.attributes["sse_middleware.client_disconnected"] is True
    assert stuck.status.status_code is StatusCode.UNSET and "error.type" not in stuck.attributes
    assert "sse_middleware.send_timeout" not in fine.attributes  # the control
    assert fine.attributes["sse_middleware.client_disconnected"] is False
