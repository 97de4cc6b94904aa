"""Resumable streams, the sans-I/O half: ids, Last-Event-ID, the tagger under any chunking, the caller
binding, the log's window."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sse_middleware._core.resume import (
    ENTRY_OVERHEAD,
    Position,
    Window,
    bind,
    default_caller,
    identity,
    last_event_id,
    new_stream,
    parse_id,
    parse_store_url,
    same_caller,
)
from sse_middleware._core.sse import Comment, Event, Parser, parse
from sse_middleware._core.tagger import Tagger

from ..support.tier import examples

STREAM = "q3J0bX6kKp1Jr8yTz1mW0A"
streams = st.binary(min_size=16, max_size=16).map(
    lambda b: __import__("base64").urlsafe_b64encode(b).rstrip(b"=").decode()
)


# -- ids -----------------------------------------------------------------------------------------------


def test_new_streams_are_22_chars_of_128_random_bits() -> None:
    made = {new_stream() for _ in range(1000)}
    assert len(made) == 1000
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22}", s) for s in made)


def written_ids(stream: str, seq: int, count: int = 1) -> list[str]:
    """The ids a stream's tagger writes on its events number ``seq`` to ``seq + count - 1``, as a spec
    parser reads them: how production makes every id a client will send back."""
    tagger = Tagger(stream, lambda seq, event: None, 1 << 20)
    tagger.seq = seq - 1  # as if the stream's first seq - 1 events had gone out
    out = b"".join(tagger.feed(b"data: x\n\n") for _ in range(count))
    return [event.id or "" for event in parse(out)]


@given(streams, st.integers(min_value=1, max_value=10**18 - 3))
def test_the_ids_the_tagger_writes_parse_back_to_their_position(stream: str, seq: int) -> None:
    for n, written in enumerate(written_ids(stream, seq, 3), start=seq):
        assert parse_id(written) == Position(stream, n)
        assert parse_id(written.encode()) == Position(stream, n)
        assert parse_id(b" \t" + written.encode() + b" ") == Position(stream, n)
        assert last_event_id([(b"last-event-id", written.encode())]) == Position(stream, n)


def test_a_fresh_stream_numbers_its_events_from_one() -> None:
    stream = new_stream()
    tagger = Tagger(stream, lambda seq, event: None, 1 << 20)
    out = tagger.feed(b"data: a\n\n") + tagger.feed(b": ping\n\ndata: b\r\n\r\n")
    assert [parse_id(event.id) for event in parse(out)] == [Position(stream, 1), Position(stream, 2)]


@given(st.one_of(st.binary(max_size=64), st.text(max_size=64)))
@settings(max_examples=examples(500))
def test_parse_never_raises_and_accepts_only_our_ids(raw: bytes | str) -> None:
    found = parse_id(raw)
    if found is not None:
        text = raw if isinstance(raw, str) else raw.decode("ascii")
        assert written_ids(found.stream, found.seq) == [text.strip(" \t")]


@pytest.mark.parametrize(
    "raw",
    [
        "", "1", f"{STREAM}", f"{STREAM}.", f"{STREAM}.0", f"{STREAM}.01", f"{STREAM}.-1", f"{STREAM}.1.2",
        f"{STREAM[:-1]}.1", f"{STREAM}x.1", f"{STREAM}.1\x00", f"{STREAM}.1\n", f"{STREAM}.1 x",
        f"{STREAM.replace('q', '+')}.1", f"{STREAM}.{'9' * 19}", f"{STREAM}.\uff11",
    ],
)  # fmt: skip
def test_malformed_ids_are_unknown(raw: str) -> None:
    assert parse_id(raw) is None
    assert parse_id(raw.encode("utf-8")) is None


def test_last_event_id_header() -> None:
    (written,) = written_ids(STREAM, 7)
    good = written.encode()
    assert last_event_id([(b"host", b"x"), (b"Last-Event-ID", good)]) == Position(STREAM, 7)
    assert last_event_id([(b"last-event-id", good), (b"last-event-id", good)]) is None  # two: unknown
    assert last_event_id([(b"last-event-id", b"\xff\xfe")]) is None
    assert last_event_id([(b"host", b"x")]) is None


# -- the tagger ----------------------------------------------------------------------------------------

ends = st.sampled_from([b"\n", b"\r", b"\r\n"])
values = st.binary(max_size=6).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))
lines = st.one_of(
    st.tuples(st.sampled_from([b"data", b"data:", b"data: ", b"event: ", b"id: ", b"id:", b"id", b"retry: ",
                               b": ", b":", b"dat", b"datax: ", b"\xef\xbb\xbfdata: "]), values),
    st.just((b"", b"")),  # a blank line
).map(lambda pair: pair[0] + pair[1])  # fmt: skip
whole_lines = st.tuples(lines, ends).map(lambda p: p[0] + p[1])
stream_bytes = st.tuples(st.booleans(), st.lists(st.one_of(whole_lines, st.binary(max_size=4)))).map(
    lambda t: (b"\xef\xbb\xbf" if t[0] else b"") + b"".join(t[1])
)


Log = list[tuple[int, bytes | None]]


def events_before_an_id_of_the_apps(data: bytes) -> int:
    """How many events come before the first block with an ``id`` field (the tagger's ids stop there),
    read line by line as a WHATWG parser splits them; all of them when there is none."""
    lines = re.split(rb"\r\n|\r|\n", data.removeprefix(b"\xef\xbb\xbf"))[:-1]  # the last is unfinished
    events, has_data, has_id = 0, False, False
    for line in lines:
        if not line:
            if has_id:
                return events
            events += has_data
            has_data = has_id = False
        else:
            name = line.split(b":", 1)[0]
            has_data = has_data or name == b"data"
            has_id = has_id or name == b"id"
    return events


def tag(data: bytes, cuts: list[int], max_event: int = 1 << 20) -> tuple[bytes, Log]:
    log: Log = []
    tagger = Tagger(STREAM, lambda seq, event: log.append((seq, event)), max_event)
    out, last = [], 0
    for cut in [*sorted({min(c, len(data)) for c in cuts}), len(data)]:
        out.append(tagger.feed(data[last:cut]))
        last = cut
    return b"".join(out), log


def items(data: bytes) -> list[Event | Comment]:
    parser = Parser(comments=True)
    return parser.feed(data) + parser.close()


@given(stream_bytes, st.lists(st.integers(min_value=0, max_value=200), max_size=12))
@example(b"data: a\n\n\xef\xbb\xbfdata: q\ndata: b\n\n", [])  # a BOM starts a logged event mid-stream
@example(b"data: a\n\nid\ndata: b\n\n", [9])  # a bare id line (an empty id) in a whole event: the fast path
@settings(max_examples=examples(800))
def test_tagger_adds_one_id_per_event_and_nothing_else_under_any_chunking(
    data: bytes, cuts: list[int]
) -> None:
    out, log = tag(data, cuts)
    assert out == tag(data, [])[0] == tag(data, list(range(len(data))))[0]  # chunking changes nothing
    per_event = [m.end() for m in re.finditer(rb"\n\n", data)]  # a send per event: the fast path
    assert tag(data, per_event)[0] == out
    assert re.sub(rb"id: " + STREAM.encode() + rb"\.[0-9]+\n", b"", out) == data  # insertions only
    seen = items(out)
    expected, n, ours = [], 0, events_before_an_id_of_the_apps(data)
    for item in items(data):
        if isinstance(item, Event):
            n += 1
            if n <= ours:
                item = dataclasses.replace(item, id=f"{STREAM}.{n}")
        expected.append(item)
    # The same events and comments, each event with our id until the app gives ids of its own.
    assert seen == expected
    assert [seq for seq, _ in log] == list(range(1, n + 1))
    # The log replays from any position a client can hold (ids start at 1): exactly the events after it.
    events = [e for e in seen if isinstance(e, Event)]
    entries = [entry or b"" for _, entry in log]
    for k in range(1, len(entries) + 1):
        assert parse(b"".join(entries[k:])) == events[k:]


def test_tagger_fast_path_and_comments() -> None:
    out, log = tag(b"data: a\n\n: ping\n\ndata: b\n\n", [9, 17])
    assert out == f"data: a\nid: {STREAM}.1\n\n: ping\n\ndata: b\nid: {STREAM}.2\n\n".encode()
    assert [seq for seq, _ in log] == [1, 2]


APP_IDS = b"data: a\n\nid: mine-1\ndata: b\n\ndata: c\n\n: ping\n\nid: mine-2\ndata: d\n\n"
PER_EVENT = [9, 29, 38, 46]  # one send per event, as most apps write (the fast path)


@pytest.mark.parametrize(
    "cuts", [[], [9], PER_EVENT, list(range(60))], ids=["whole", "two-chunks", "per-event", "byte-by-byte"]
)
def test_from_the_apps_first_own_id_the_ids_are_the_apps(cuts: list[int]) -> None:
    data = APP_IDS
    out, log = tag(data, cuts)
    # Ours up to the app's first id; then nothing added, so the client's lastEventId is the app's own.
    assert out == f"data: a\nid: {STREAM}.1\n\n".encode() + data[9:]
    assert [e.id for e in parse(out)] == [f"{STREAM}.1", "mine-1", None, "mine-2"]
    # Still logged, as sent: a client holding our id 1 resumes from the log with the app's events.
    assert log == [(1, f"data: a\nid: {STREAM}.1\n\n".encode()), (2, b"id: mine-1\ndata: b\n\n"),
                   (3, b"data: c\n\n"), (4, b"id: mine-2\ndata: d\n\n")]  # fmt: skip
    # A lone id sets the client's lastEventId as well (MCP's priming event has an empty data line).
    lone, _ = tag(b"data: a\n\nid: x\n\ndata: b\n\n", [9, 16])
    assert lone == f"data: a\nid: {STREAM}.1\n\n".encode() + b"id: x\n\ndata: b\n\n"
    lone, _ = tag(b"id: x\n\ndata: a\n\n", cuts)
    assert lone == b"id: x\n\ndata: a\n\n"
    # Control: without ids of the app's, every event gets ours.
    plain, _ = tag(b"data: a\n\ndata: b\n\n", cuts)
    assert [e.id for e in parse(plain)] == [f"{STREAM}.1", f"{STREAM}.2"]


def test_events_over_the_bound_are_not_logged() -> None:
    big = b"data: " + b"x" * 100 + b"\n\n"
    out, log = tag(big + b"data: y\n\n", [30, 60], max_event=64)
    assert [e.data for e in parse(out)] == ["x" * 100, "y"]
    assert log == [(1, None), (2, f"data: y\nid: {STREAM}.2\n\n".encode())]


# -- caller binding ------------------------------------------------------------------------------------


def scope_with(*headers: tuple[bytes, bytes]) -> dict[str, object]:
    return {"type": "http", "headers": list(headers)}


def test_caller_binding_is_keyed_per_stream() -> None:
    alice = identity(default_caller, scope_with((b"authorization", b"Bearer alice")))
    bob = identity(default_caller, scope_with((b"Authorization", b"Bearer bob")))
    other = new_stream()
    assert same_caller(STREAM, alice, bind(STREAM, alice))
    assert not same_caller(STREAM, bob, bind(STREAM, alice))  # control: another caller
    assert bind(STREAM, alice) != bind(other, alice)  # not a plain hash: unrelated digests per stream
    assert alice not in bind(STREAM, alice)
    # The two headers cannot be confused: the same bytes moved from one to the other differ.
    moved = identity(default_caller, scope_with((b"cookie", b"Bearer alice")))
    assert moved != alice


def test_caller_hook() -> None:
    def by_user(scope: dict[str, object]) -> str | None:
        return str(scope.get("user")) if scope.get("user") else None

    assert identity(by_user, {"user": "ann"}) == b"ann"
    assert identity(by_user, {}) == b""


# -- the window ----------------------------------------------------------------------------------------


def test_window_keeps_the_newest_events_within_the_bound() -> None:
    window = Window(10 * (10 + ENTRY_OVERHEAD))
    moved = [window.add(10) for _ in range(25)]
    assert (window.first, window.last) == (16, 25)
    assert moved == [False] * 10 + [True] * 15
    assert window.size == 10 * (10 + ENTRY_OVERHEAD)
    assert window.add(None) and (window.first, window.last, window.size) == (27, 26, 0)
    assert not window.add(1) and window.first == 27


# -- store URLs ----------------------------------------------------------------------------------------


def test_store_urls() -> None:
    assert parse_store_url("memory://").kind == "memory"
    assert parse_store_url("memory://?max_bytes=1000").max_bytes == 1000
    assert parse_store_url("redis://127.0.0.1:6379/2").kind == "redis"
    assert parse_store_url("rediss://cache.internal").kind == "redis"
    for bad in ("", "memcached://x", "redis://", "redis://h:notaport", "redis://h/db1", "memory://host",
                "memory://?max_bytes=0", "memory://?size=1"):  # fmt: skip
        with pytest.raises(ValueError):
            parse_store_url(bad)
