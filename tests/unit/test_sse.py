"""The sans-I/O event-stream codec: the WHATWG rules, under any chunking."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sse_middleware._core.sse import Comment, Event, Framer, Parser, comment, encode, parse

from ..support.tier import examples


def feed_all(data: bytes, cuts: list[int], *, comments: bool = False) -> list[Event | Comment]:
    parser = Parser(comments=comments)
    out: list[Event | Comment] = []
    last = 0
    for cut in sorted({min(c, len(data)) for c in cuts}):
        out += parser.feed(data[last:cut])
        last = cut
    out += parser.feed(data[last:])
    return out + parser.close()


def one_byte_chunks(data: bytes) -> list[Event | Comment]:
    return feed_all(data, list(range(len(data))))


def test_basic_fields() -> None:
    stream = b"event: add\nid: 7\nretry: 1500\ndata: a\ndata:b\n\n: comment\n\ndata\n\n"
    assert parse(stream) == [Event("a\nb", "add", "7", 1500), Event("", None, None, None)]


def test_line_endings_crlf_cr_lf_mixed_and_cut() -> None:
    stream = b"data: one\r\n\r\ndata: two\r\rdata: three\n\ndata: four\r\n\n"
    expected = [Event("one"), Event("two"), Event("three"), Event("four")]
    assert parse(stream) == expected
    assert one_byte_chunks(stream) == expected


def test_cr_at_chunk_end_is_half_a_crlf() -> None:
    parser = Parser()
    assert parser.feed(b"data: x\r") == []
    assert parser.feed(b"\n\r") == [Event("x")]  # the LF completed the CRLF; the CR ended the event
    assert parser.feed(b"\n") == []  # ...and this LF completes that CR: no second blank line


def test_bom_stripped_once_even_when_cut() -> None:
    stream = b"\xef\xbb\xbfdata: x\n\n"
    assert one_byte_chunks(stream) == [Event("x")]
    assert parse(b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n") == []  # a second BOM makes a bad field name
    assert parse(b"\xef\xbb\xbf") == []


def test_utf8_cut_across_chunks_and_invalid_bytes() -> None:
    stream = "data: 你好😀\n\n".encode()
    assert one_byte_chunks(stream) == [Event("你好😀")]
    assert parse(b"data: \xff\xfeok\n\n") == [Event("\ufffd\ufffdok")]


def test_id_with_nul_ignored_and_retry_digits_only() -> None:
    parser = Parser()
    events = parser.feed(b"id: 1\ndata: a\n\nid: 2\x003\nretry: 12a\ndata: b\n\nretry: 300\n\n")
    assert events == [Event("a", id="1"), Event("b")]
    assert parser.last_event_id == "1"
    assert parser.retry == 300


def test_unterminated_event_discarded_at_eof() -> None:
    assert parse(b"data: done\n\ndata: partial") == [Event("done")]
    assert parse(b"data: partial\n") == [Event("done")][:0]


def test_u2028_in_data_is_not_a_line_break() -> None:
    text = 'data: {"t": "a\u2028b\u0085c"}\n\n'.encode()
    assert parse(text) == [Event('{"t": "a\u2028b\u0085c"}')]


def test_comments_reported_on_request() -> None:
    assert feed_all(b": ping\n\ndata: x\n\n", [], comments=True) == [Comment("ping"), Event("x")]


def test_one_megabyte_event_in_small_chunks() -> None:
    big = "x" * (1 << 20)
    stream = f"data: {big}\n\n".encode()
    parser = Parser()
    events: list[Event | Comment] = []
    for i in range(0, len(stream), 4096):
        events += parser.feed(stream[i : i + 4096])
    assert events == [Event(big)]


def test_encode_rejects_what_would_break_framing() -> None:
    for bad in (Event("x", event="a\nb"), Event("x", id="a\rb"), Event("x", id="a\x00")):
        try:
            encode(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad} encoded")
    assert comment("ping") == b": ping\n\n"


line_text = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=20)
events_st = st.builds(
    Event,
    data=st.lists(line_text, min_size=1, max_size=3).map("\n".join),
    event=st.none() | line_text.filter(bool),
    id=st.none() | line_text.filter(lambda s: "\x00" not in s),
    retry=st.none() | st.integers(0, 10**6),
)


@settings(max_examples=examples(300))
@given(
    st.lists(events_st, max_size=6),
    st.lists(st.integers(0, 400), max_size=12),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_same_events_under_any_chunking_and_line_ending(
    events: list[Event], cuts: list[int], eol: str
) -> None:
    stream = b"".join(encode(e) for e in events).replace(b"\n", eol.encode())
    parsed = [e for e in feed_all(stream, cuts) if isinstance(e, Event)]
    assert parsed == events


@given(st.binary(max_size=300), st.lists(st.integers(0, 300), max_size=10))
def test_parser_never_raises_and_chunking_never_matters(data: bytes, cuts: list[int]) -> None:
    assert feed_all(data, cuts) == feed_all(data, [])


@settings(max_examples=examples(300))
@given(
    st.lists(events_st, max_size=6),
    st.lists(st.integers(0, 400), max_size=12),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_framer_cuts_only_on_event_boundaries(events: list[Event], cuts: list[int], eol: str) -> None:
    stream = b"".join(encode(e) for e in events).replace(b"\n", eol.encode())
    framer = Framer()
    pieces: list[bytes] = []
    last = 0
    for cut in [*sorted({min(c, len(stream)) for c in cuts}), len(stream)]:
        out = framer.feed(stream[last:cut])
        last = cut
        if out:
            pieces.append(out)
    assert b"".join(pieces) + framer.take() == stream  # byte-identical, nothing lost or added
    whole = [e for p in pieces for e in parse(p)]
    assert whole == events


def test_framer_forwards_whole_events_as_the_same_object() -> None:
    chunk = b"data: a\n\ndata: b\n\n"
    assert Framer().feed(chunk) is chunk
