"""The check's diagnosis on synthetic timelines: each rule with a case that triggers it and one that must
not. Timelines are built by feeding bytes to the real :class:`Recorder` at made-up times."""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence

import pytest

from sse_middleware._check.diagnose import Diagnosis, diagnose
from sse_middleware._check.measure import measure
from sse_middleware._check.recorder import Ending, Recorder, Timeline

from ..support.apps import anthropic_event, openai_chunk

SSE = [("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked")]
GOOD = [*SSE, ("Cache-Control", "no-cache, no-transform"), ("X-Accel-Buffering", "no")]


def record(
    reads: Sequence[tuple[float, bytes]],
    headers: Sequence[tuple[str, str]] = GOOD,
    *,
    headers_at: float = 0.01,
    end: float | None = None,
    ending: Ending = "end",
) -> Timeline:
    rec = Recorder()
    assert rec.response(headers_at, 200, "1.1", list(headers)) is None
    for at, data in reads:
        rec.feed(at, data)
    last = reads[-1][0] if reads else headers_at
    return rec.close(last if end is None else end, ending, "the connection closed inside the chunked body")


def check(tl: Timeline) -> Diagnosis:
    return diagnose(tl, measure(tl))


def codes(tl: Timeline) -> dict[str, bool]:
    """Each finding's code, and whether it is a problem (True) or a warning (False)."""
    return {f.code: f.problem for f in check(tl).findings}


def ticks(n: int) -> bytes:
    return b"".join(b"data: tick %d\n\n" % i for i in range(n))


def spread(n: int, start: float, gap: float) -> list[tuple[float, bytes]]:
    return [(start + i * gap, b"data: tick %d\n\n" % i) for i in range(n)]


# -- buffering -------------------------------------------------------------------------------------------


def test_everything_in_one_read_at_the_end_is_buffered() -> None:
    tl = record([(2.5, ticks(20))], headers=SSE, headers_at=2.5)
    d = check(tl)
    assert d.buffered and d.problems[0].code == "buffered"
    assert "20 of 20 events arrived in one burst at 2.50 s" in d.problems[0].title
    assert "headers" in d.problems[0].title  # they were held too
    assert "X-Accel-Buffering: no" in d.problems[0].fix


def test_a_few_bursts_are_buffered() -> None:
    tl = record([(1.0, ticks(10)), (2.0, ticks(10)), (3.0, ticks(10))])
    d = check(tl)
    assert d.buffered and "in 3 bursts" in d.problems[0].title


def test_a_burst_split_over_reads_microseconds_apart_is_one_burst() -> None:
    tl = record([(2.0 + i * 50e-6, b"data: x\n\n") for i in range(10)])
    assert check(tl).buffered


def test_a_slow_stream_is_not_buffered() -> None:
    assert not check(record(spread(20, 0.1, 0.1))).buffered


def test_a_fast_short_stream_all_at_once_is_not_buffered() -> None:
    """The robustness the rule needs: a stream done in 50 ms arrives 'at once' without any proxy."""
    tl = record([(0.05, ticks(20))], headers_at=0.04)
    assert not check(tl).buffered
    assert codes(tl) == {}


def test_a_long_prefill_then_a_fast_healthy_stream_is_not_buffered() -> None:
    tl = record(spread(50, 5.0, 0.005))  # 200 events a second after 5 s of thinking
    assert not check(tl).buffered and codes(tl) == {}


def test_a_very_fast_healthy_stream_is_not_buffered() -> None:
    assert not check(record(spread(2000, 0.2, 0.001))).buffered  # 1,000 events a second for 2 s


def test_occasional_events_sharing_a_read_are_not_buffered() -> None:
    reads = [(0.1 + i * 0.05, ticks(3 if i % 10 == 0 else 1)) for i in range(60)]
    assert not check(record(reads)).buffered


def test_only_content_events_count() -> None:
    """Chunks without content sent on time (a role chunk, empty deltas) do not hide held tokens."""
    early = [(0.01, chunk(None, role=True)), *((0.2 * i, chunk(None)) for i in range(1, 11))]
    held = b"".join(chunk(t) for t in "abcdefgh") + chunk(None, finish="stop") + b"data: [DONE]\n\n"
    assert check(record([*early, (3.0, held)])).buffered


def test_too_few_events_at_the_end_is_only_a_warning() -> None:
    tl = record([(2.0, ticks(2))], headers_at=2.0)
    assert codes(tl) == {"maybe_buffered": False}
    assert codes(record([(0.1, ticks(1)), (2.0, b"data: last\n\n")])) == {}


# -- the other problems ----------------------------------------------------------------------------------


def test_a_cut_stream() -> None:
    assert codes(record(spread(5, 0.1, 0.1), ending="cut"))["cut"] is True
    assert "cut" not in codes(record(spread(5, 0.1, 0.1)))


def test_a_cut_after_a_long_silence_names_the_idle_timeout() -> None:
    tl = record(spread(3, 0.1, 0.1), end=60.3, ending="cut")
    cut = next(f for f in check(tl).findings if f.code == "cut")
    assert "idle timeout" in cut.cause


def test_ended_inside_an_event() -> None:
    assert codes(record([(0.1, b"data: a\n\ndata: b\n")]))["unfinished_event"] is True
    assert codes(record([(0.1, b"data: a\n\ndata: b\n\n")])) == {}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'event: error\ndata: {"error": {"type": "x", "message": "quota"}}\n\n', "quota"),
        (b'data: {"error": {"message": "overloaded", "type": "server_error"}}\n\n', "overloaded"),
        (
            b'event: error\ndata: {"type": "error", "error": {"type": "api_error", "message": "boom"}}\n\n',
            "boom",
        ),
        (b'data: {"type":"error","errorText":"tool failed"}\n\n', "tool failed"),
    ],
    ids=["sse", "openai", "anthropic", "ai-sdk"],
)
def test_an_error_event(raw: bytes, message: str) -> None:
    tl = record([(0.1, ticks(2)), (0.2, raw)])
    error = next(f for f in check(tl).findings if f.code == "error_event")
    assert error.problem and error.title.endswith(message)
    assert "error_event" not in codes(record([(0.1, ticks(2)), (0.2, b'data: {"text": "error"}\n\n')]))


def chunk(text: str | None, *, role: bool = False, finish: str | None = None) -> bytes:
    return openai_chunk(text, role=role, finish=finish).encode()


def anthropic(name: str, **body: object) -> bytes:
    return anthropic_event(name, body).encode()


def ai_sdk(part: dict[str, str]) -> bytes:
    return b"data: " + json.dumps(part).encode() + b"\n\n"


OPENAI = [chunk(None, role=True), chunk("Hi"), chunk(" there"), chunk(None, finish="stop")]
ANTHROPIC = [
    anthropic("message_start", message={"id": "m"}),
    anthropic("content_block_delta", index=0, delta={"type": "text_delta", "text": "Hi"}),
    anthropic("message_delta", delta={"stop_reason": "end_turn"}),
]
RESPONSES = [
    b'event: response.created\ndata: {"type":"response.created","response":{}}\n\n',
    b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"Hi"}\n\n',
]
AI_SDK = [ai_sdk({"type": "start"}), ai_sdk({"type": "text-delta", "id": "t", "delta": "Hi"})]


@pytest.mark.parametrize(
    ("events", "end"),
    [
        (OPENAI, b"data: [DONE]\n\n"),
        (ANTHROPIC, anthropic("message_stop")),
        (RESPONSES, b'event: response.completed\ndata: {"type":"response.completed"}\n\n'),
        (AI_SDK, ai_sdk({"type": "finish"}) + b"data: [DONE]\n\n"),
    ],
    ids=["openai", "anthropic", "responses", "ai-sdk"],
)
def test_an_llm_stream_without_its_end_marker(events: list[bytes], end: bytes) -> None:
    reads = [(0.1 + i * 0.1, e) for i, e in enumerate(events)]
    assert codes(record(reads))["no_end_marker"] is True
    assert codes(record([*reads, (1.0, end)])) == {}


def test_generic_sse_owes_no_end_marker() -> None:
    assert codes(record(spread(5, 0.1, 0.1))) == {}


def test_no_end_marker_is_not_reported_when_the_check_stopped_first() -> None:
    reads = [(0.1 + i * 0.1, e) for i, e in enumerate(OPENAI)]
    assert codes(record(reads, end=5.0, ending="timeout")) == {"timeout": False}


def test_a_stream_without_events() -> None:
    assert codes(record([(0.1, b": hello\n\n")]))["no_events"] is True
    assert "no_events" not in codes(record([(0.1, b": hello\n\ndata: x\n\n")]))


def test_a_content_length_on_a_stream() -> None:
    body = ticks(3)
    tl = record([(0.1, body)], [*GOOD, ("Content-Length", str(len(body)))])
    assert codes(tl)["content_length"] is True
    assert "content_length" not in codes(record([(0.1, body)]))


def gzip_stream(pieces: Sequence[bytes]) -> list[bytes]:
    """Gzip with a sync flush per piece, as nginx does with `X-Accel-Buffering: no`."""
    z = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    out = [z.compress(p) + z.flush(zlib.Z_SYNC_FLUSH) for p in pieces]
    out[-1] += z.flush()
    return out


def test_compression_flushed_per_event_is_fine() -> None:
    pieces = gzip_stream([b"data: tick %d\n\n" % i for i in range(10)])
    tl = record([(0.1 * (i + 1), p) for i, p in enumerate(pieces)], [*GOOD, ("Content-Encoding", "gzip")])
    assert codes(tl) == {} and check(tl).buffered is False
    m = measure(tl)
    assert m.encoding == "gzip" and m.split_reads == 0 and m.body_bytes > m.wire_bytes / 2
    z = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)  # the gzip trailer in a read of its own: no split
    trailer = [z.compress(b"data: x\n\n") + z.flush(zlib.Z_SYNC_FLUSH), z.flush()]
    reads = [(0.1, trailer[0]), (0.2, trailer[1])]
    assert measure(record(reads, [*GOOD, ("Content-Encoding", "gzip")])).split_reads == 0


def test_compression_flushed_inside_events_is_a_warning() -> None:
    """Control of the above: the same events, the compressor flushed in the middle of each (by size,
    not by frame): every read stops inside an event. Killed by the recorder not counting split reads."""
    events = [b"data: tick %d\n\n" % i for i in range(10)]
    pieces = gzip_stream([half for e in events for half in (e[:6], e[6:])])
    tl = record([(0.05 * (i + 1), p) for i, p in enumerate(pieces)], [*GOOD, ("Content-Encoding", "gzip")])
    assert codes(tl) == {"compressed": False} and measure(tl).split_reads == 10
    assert "10 of 20 reads stopped inside an event" in check(tl).warnings[0].title


def test_compression_is_a_problem_when_the_stream_was_buffered() -> None:
    (body,) = gzip_stream([ticks(10)])
    tl = record([(2.0, body)], [*GOOD, ("Content-Encoding", "gzip")])
    assert codes(tl) == {"buffered": True, "compressed": True}
    assert "compressed (gzip)" in check(tl).problems[0].cause


def test_missing_anti_buffering_headers() -> None:
    assert codes(record(spread(5, 0.1, 0.1), SSE)) == {"headers": False}
    assert codes(record([(2.0, ticks(5))], SSE)) == {"buffered": True, "headers": True}
    nginx_stripped = [*SSE, ("Cache-Control", "no-cache, no-transform")]  # nginx eats X-Accel-Buffering
    assert codes(record(spread(5, 0.1, 0.1), nginx_stripped)) == {}


def test_a_long_silence_without_heartbeats() -> None:
    quiet = [(0.1, b"data: a\n\n"), (25.1, b"data: b\n\n"), (25.2, b"data: c\n\n")]
    silence = next(f for f in check(record(quiet)).findings if f.code == "silence")
    assert silence.problem and "25.0 s (from 0.1 s)" in silence.title
    pinged = [(0.1, b"data: a\n\n"), *((t, b": ping\n\n") for t in (15.1,)), (25.1, b"data: b\n\n")]
    assert codes(record(pinged)) == {}


def test_a_silence_inside_a_buffered_stream_is_the_buffering() -> None:
    tl = record([(30.0, ticks(10))], headers_at=0.01)
    assert codes(tl) == {"buffered": True}
