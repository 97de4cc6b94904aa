"""The check's recorder, measures and report, sans I/O: what counts as a stream, decoding, the numbers."""

from __future__ import annotations

import json
import zlib

import pytest

from sse_middleware._check.cli import _header
from sse_middleware._check.diagnose import diagnose
from sse_middleware._check.fetch import Request, headers_for
from sse_middleware._check.measure import measure
from sse_middleware._check.recorder import CONTENT, END, EVENT, HEARTBEAT, Recorder
from sse_middleware._check.report import as_json, human

from .test_check_diagnose import GOOD, chunk, record, ticks


@pytest.mark.parametrize(
    ("status", "headers", "reason"),
    [
        (404, [("Content-Type", "text/event-stream")], "HTTP 404"),
        (200, [("Content-Type", "application/json")], "not a stream: Content-Type 'application/json'"),
        (200, [("Content-Type", "text/plain"), ("Content-Length", "5")], "with Content-Length 5"),
        (200, [("Content-Type", "text/event-stream"), ("Content-Encoding", "br")], "'br' cannot be decoded"),
    ],
)
def test_no_stream(status: int, headers: list[tuple[str, str]], reason: str) -> None:
    found = Recorder().response(0.01, status, "1.1", headers)
    assert found is not None and reason in found


@pytest.mark.parametrize(
    "headers",
    [
        [("content-type", "text/event-stream; charset=utf-8")],
        [("Content-Type", "text/event-stream"), ("Content-Length", "100")],  # a problem, but a stream
        [("Content-Type", "text/plain")],
        [("Content-Type", "application/x-ndjson")],
        [("Content-Type", "text/event-stream"), ("Content-Encoding", "gzip")],
    ],
)
def test_streams(headers: list[tuple[str, str]]) -> None:
    assert Recorder().response(0.01, 200, "1.1", headers) is None


def test_gzip_is_decoded_across_any_read_boundaries() -> None:
    z = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    body = z.compress(ticks(50)) + z.flush()
    reads = [(0.1 + i * 0.01, body[i : i + 7]) for i in range(0, len(body), 7)]
    tl = record(reads, [*GOOD, ("Content-Encoding", "gzip")])
    assert tl.times(CONTENT) and len(tl.times(CONTENT)) == 50
    m = measure(tl)
    assert (m.wire_bytes, m.body_bytes) == (len(body), len(ticks(50)))


@pytest.mark.parametrize("wbits", [zlib.MAX_WBITS, -zlib.MAX_WBITS], ids=["zlib", "raw"])
def test_deflate_either_way(wbits: int) -> None:
    z = zlib.compressobj(wbits=wbits)
    tl = record([(0.1, z.compress(ticks(5)) + z.flush())], [*GOOD, ("Content-Encoding", "deflate")])
    assert len(tl.times(CONTENT)) == 5


def test_a_corrupt_gzip_body_raises() -> None:
    rec = Recorder()
    rec.response(0.01, 200, "1.1", [*GOOD, ("Content-Encoding", "gzip")])
    with pytest.raises(ValueError, match="corrupt"):
        rec.feed(0.1, b"not gzip at all")


def test_line_streams_count_lines() -> None:
    headers = [("Content-Type", "text/plain")]
    tl = record([(0.1, b"one\ntw"), (0.2, b"o\n\n"), (0.3, b"three")], headers)
    assert tl.times(CONTENT) == [0.1, 0.2, 0.3]  # the blank line is not one; the unfinished last line is


def test_openai_stream_kinds_and_measures() -> None:
    reads = [(0.05, chunk(None, role=True))]
    reads += [(0.5 + i * 0.1, chunk(t)) for i, t in enumerate(["a", "b", "c", "d"])]
    reads += [(0.9, b": ping\n\n"), (1.0, chunk(None, finish="stop") + b"data: [DONE]\n\n")]
    tl = record(reads)
    assert [a.kind for a in tl.arrivals] == [EVENT, CONTENT, CONTENT, CONTENT, CONTENT, HEARTBEAT, EVENT, END]
    assert tl.dialect == "openai" and tl.protocol == "openai"
    m = measure(tl)
    assert m.ttft_s == 0.5  # the role chunk carries no content
    assert (m.events, m.content_events, m.heartbeats, m.frames) == (7, 4, 1, 7)
    assert m.gaps_p50_s == pytest.approx(0.1) and m.gaps_max_s == pytest.approx(0.1)
    assert m.events_per_s == pytest.approx(10.0)
    assert m.silence_s == pytest.approx(0.45) and m.silence_from == 0.05


def test_anthropic_ping_events_are_heartbeats() -> None:
    tl = record([(0.1, b'event: ping\ndata: {"type": "ping"}\n\n')])
    assert [a.kind for a in tl.arrivals] == [HEARTBEAT]


def test_json_has_the_promised_keys() -> None:
    tl = record([(0.1, ticks(3))])
    m = measure(tl)
    out = as_json("http://x/", "GET", tl, m, diagnose(tl, m), 0)
    for key in ("ttft_s", "buffered", "problems", "events", "gaps_p50_s", "gaps_p95_s", "headers"):
        assert key in out
    assert out["events"] == 3 and out["buffered"] is False and out["problems"] == []
    assert out["headers"]["Cache-Control"] == "no-cache, no-transform"
    json.dumps(out)


def test_json_without_a_stream() -> None:
    rec = Recorder()
    reason = rec.response(0.01, 500, "1.1", [("Content-Type", "text/html")])
    assert reason is not None
    out = as_json("http://x/", "GET", rec.timeline, None, None, 2, reason)
    assert out["problems"] == [reason] and out["ttft_s"] is None and out["buffered"] is False
    assert out["status"] == 500


def test_human_report_shows_the_timeline_and_the_problem() -> None:
    tl = record([(2.0, ticks(10))])
    m = measure(tl)
    text = human("http://x/", "GET", tl, m, diagnose(tl, m), 1)
    spark = next(line for line in text.splitlines() if line.startswith("  |"))
    assert spark.strip("| ").endswith("█") and spark.count("█") == 1  # one bar, at the very end
    assert "PROBLEMS" in text and "Buffered" in text and "(exit 1)" in text
    ascii_text = human("http://x/", "GET", tl, m, diagnose(tl, m), 1, ascii=True)
    assert "█" not in ascii_text and "@|" in ascii_text


def test_request_headers() -> None:
    plain = headers_for(Request("http://x/"))
    assert plain["Accept"] == "text/event-stream" and plain["Accept-Encoding"] == "gzip, deflate"
    posted = headers_for(Request("http://x/", "POST", b"{}", [("accept-encoding", ""), ("X-Key", "k")]))
    assert posted["Content-Type"] == "application/json" and posted["X-Key"] == "k"
    assert not any(name.lower() == "accept-encoding" for name in posted)  # 'Name:' drops a default
    assert _header("Authorization: Bearer a:b") == ("Authorization", "Bearer a:b")
    with pytest.raises(SystemExit):
        _header("no colon")
