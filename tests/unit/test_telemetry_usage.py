"""A stream cut short before its upstream reported usage (a guard's trip, the client gone, a send timeout)
gets an estimated ``gen_ai.usage.output_tokens``, about four characters a token of the text the client
got, marked ``sse_middleware.usage.estimated``. Through the whole middleware, on asyncio and trio, into
the SDK's in-memory exporter. Controls: a stream whose upstream sent usage keeps its figures and no mark,
and one that ended well without usage gets no estimate (nothing was cut short)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from sse_middleware import Blocked, Check, StreamingMiddleware, StreamingSettings
from sse_middleware._core.tokens import estimate_tokens

from ..support.harness import Script, Wire, run_for
from ..support.otel import Otel

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

# Thirteen characters a delta: a count of events (one a delta) would read under a third of the estimate,
# and text of a length that is not a multiple of four tells rounding up from rounding down.
WORDS = [f"word{i:02d} abcde " for i in range(12)]
ESTIMATED = "sse_middleware.usage.estimated"
OUTPUT = "gen_ai.usage.output_tokens"


def _chunk(delta: dict[str, Any], **extra: Any) -> bytes:
    obj = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", **extra}
    obj.setdefault("choices", [{"index": 0, "delta": delta, "finish_reason": None}])
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _script(usage: bool = False, stall: bool = False) -> Script:
    """The words, then the end (with the upstream's usage, if ``usage``); with ``stall``, after the words
    the app waits for longer than any test: only the middleware ends it, before any usage."""
    steps: list[bytes | float] = [_chunk({"role": "assistant", "content": ""})]
    for word in WORDS:
        steps += [_chunk({"content": word}), 0.03]
    if stall:
        steps.append(60.0)
    steps.append(_chunk({}, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    if usage:
        steps.append(_chunk({}, choices=[], usage={"prompt_tokens": 5, "completion_tokens": 42}))
    steps.append(b"data: [DONE]\n\n")
    return Script(tuple(steps))


def _client_text(wire: Wire) -> str:
    text = []
    for event in wire.events():
        if event.data.startswith("{"):
            for choice in json.loads(event.data).get("choices", []):
                text.append(choice["delta"].get("content") or "")
    return "".join(text)


async def _span(otel: Otel, app: Any, wire: Wire, guards: Any = (), **settings: Any) -> dict[str, Any]:
    middleware = StreamingMiddleware(
        app, StreamingSettings(**settings), guards=guards, tracer_provider=otel.tp, meter_provider=otel.mp
    )
    assert not await run_for(10, middleware, wire)
    (span,) = otel.ours()
    otel.exporter.clear()
    return dict(span.attributes or {})


def _block_at(word: str) -> Any:
    def check(c: Check) -> None:
        if word in c.new:
            raise Blocked("Filtered.", code="word")

    return check


@pytest.mark.parametrize("coalesce", [True, False], ids=["merging", "pass-through"])
async def test_a_guard_trip_gets_an_estimate_of_what_went_out(otel: Otel, coalesce: bool) -> None:
    wire = Wire()
    attrs = await _span(otel, _script(usage=True), wire, guards=[_block_at("word06")], coalesce=coalesce)
    sent = _client_text(wire)
    assert attrs["sse_middleware.guard.blocked"] is True and sent and "word06" not in sent
    assert attrs.get(ESTIMATED) is True
    assert len(sent) % 4  # the control: a length where rounding up and down differ (6 words, 78)
    assert attrs[OUTPUT] == math.ceil(len(sent) / 4) > sent.count("word")  # characters, not events
    assert attrs["sse_middleware.token_count_source"] == "chunks"  # the real count never came


async def test_a_client_that_leaves_mid_stream_gets_an_estimate(otel: Otel) -> None:
    wire = Wire(leave_at=4)
    attrs = await _span(otel, _script(usage=True, stall=True), wire)
    assert attrs["sse_middleware.client_disconnected"] is True
    assert attrs.get(ESTIMATED) is True
    # The text the telemetry saw: what the client had, and the delta it left at (read, not delivered).
    sent = _client_text(wire)
    assert math.ceil(len(sent) / 4) <= attrs[OUTPUT] <= math.ceil((len(sent) + 13) / 4)
    assert attrs[OUTPUT] > sent.count("word") + 1  # characters, not events


async def test_text_that_went_by_unread_counts_a_token_an_event(otel: Otel) -> None:
    """Pass-through, two one-character deltas a body: the pipeline forwards the body as it came and
    never reads a text, so the estimate is one token per content event (a quarter of that by
    characters would be too low for the upstream's usual token a delta)."""
    pair = _chunk({"content": "x"}) + _chunk({"content": "y"})
    app = Script(
        (_chunk({"role": "assistant", "content": ""}), *(x for _ in range(10) for x in (pair, 0.03)), 60.0)
    )
    wire = Wire(leave_at=4)
    attrs = await _span(otel, app, wire, coalesce=False)
    assert attrs.get(ESTIMATED) is True
    assert attrs[OUTPUT] >= len(_client_text(wire)) >= 4


async def test_a_send_timeout_gets_an_estimate(otel: Otel) -> None:
    wire = Wire(block_at=4)
    attrs = await _span(otel, _script(usage=True, stall=True), wire, send_timeout=0.3, heartbeat_interval=0)
    assert attrs["sse_middleware.send_timeout"] is True
    assert attrs.get(ESTIMATED) is True
    assert attrs[OUTPUT] >= 3 * 3  # at least the three deltas written before the stuck one


async def test_control_real_usage_is_kept_and_unmarked(otel: Otel) -> None:
    wire = Wire()
    attrs = await _span(otel, _script(usage=True), wire)
    assert _client_text(wire) == "".join(WORDS) and wire.complete
    assert attrs[OUTPUT] == 42 and attrs["gen_ai.usage.input_tokens"] == 5
    assert ESTIMATED not in attrs and attrs["sse_middleware.token_count_source"] == "usage"


def test_control_usage_that_came_before_the_cut_is_kept(otel: Otel) -> None:
    """Usage first, then the client leaves: the real figure stays, unmarked (driven directly: the cut
    must come after the usage, which no wire timing would promise)."""
    stream = otel.tel().start({"type": "http", "path": "/s", "headers": []}, start_mono=1.0, start_ns=1)
    stream.dialect("openai", "chat")
    stream.chunk(1.1, 400)  # 400 characters: an estimate would say 100
    stream.response(output_tokens=42)
    stream.end(1.2, client_disconnected=True)
    (span,) = otel.ours()
    attrs = span.attributes or {}
    assert attrs[OUTPUT] == 42 and ESTIMATED not in attrs


async def test_control_a_whole_stream_without_usage_gets_no_estimate(otel: Otel) -> None:
    attrs = await _span(otel, _script(usage=False), Wire())
    assert ESTIMATED not in attrs and OUTPUT not in attrs


def test_the_estimate_rounds_a_started_token_up() -> None:
    """Four characters a token, a started one counted: 13 characters are 4 tokens (3.25 rounded up),
    one character is one, none is none. Killed by ``math.floor`` (3, 0) or ``round`` (3) in
    ``estimate_tokens``; the control is a multiple of four, which every rounding agrees on."""
    assert [estimate_tokens(n) for n in (0, 1, 13, 14, 15)] == [0, 1, 4, 4, 4]
    assert estimate_tokens(16) == 4 == 16 // 4
