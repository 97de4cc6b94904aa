"""The sans-I/O pipeline under any chunking and timing, with a fake clock (hypothesis properties)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from sse_middleware import StreamingSettings
from sse_middleware._core.pipeline import Pipeline
from sse_middleware._core.sse import Event, encode, parse

from ..support.apps import anthropic_event, openai_chunk

tokens_st = st.lists(
    st.sampled_from(
        [
            "Hel",
            "lo",
            " ",
            "wor",
            "ld",
            "\n",
            "```",
            "py",
            "\n\n",
            "|a|b|",
            "$$",
            "😀",
            "👨‍👩‍👧",
            "你",
            "好",
            "e\u0301",
            "\u2028",
            '"q"',
            "\\",
            "🇫🇷",
        ]
    ),
    min_size=1,
    max_size=40,
)
gaps_st = st.lists(st.sampled_from([0.0, 0.001, 0.01, 0.04, 0.2]), min_size=40, max_size=40)
cuts_st = st.lists(st.integers(0, 4000), max_size=15)


def drive(stream: bytes, cuts: list[int], gaps: list[float], s: StreamingSettings) -> list[bytes]:
    """Feed ``stream`` cut at ``cuts``, advancing a fake clock by ``gaps``, ticking at every deadline."""
    pipe = Pipeline("sse", s, None)
    frames: list[bytes] = []
    now = 0.0
    bounds = sorted({min(c, len(stream)) for c in cuts} | {len(stream)})
    last = 0
    for i, bound in enumerate(bounds):
        arrive = now + gaps[i % len(gaps)]
        while (due := pipe.deadline()) is not None and due <= arrive:
            frames += pipe.tick(due)
        now = arrive
        frames += pipe.feed(stream[last:bound], now)
        last = bound
    return frames + pipe.close()


def content(frames: list[bytes]) -> tuple[str, list[str]]:
    text, others = "", []
    for event in parse(b"".join(frames)):
        if event.data == "[DONE]":
            others.append("[DONE]")
            continue
        delta = json.loads(event.data)["choices"][0]["delta"]
        if delta.get("content"):
            text += delta["content"]
        others.append("role" if "role" in delta else "content" if delta.get("content") else "finish")
    return text, [o for o in others if o != "content"]


@settings(max_examples=200, deadline=None)
@given(tokens_st, cuts_st, gaps_st)
def test_openai_text_identical_and_other_events_in_order(
    tokens: list[str], cuts: list[int], gaps: list[float]
) -> None:
    stream = (
        openai_chunk(None, role=True)
        + "".join(openai_chunk(t) for t in tokens)
        + openai_chunk(None, finish="stop")
        + "data: [DONE]\n\n"
    ).encode()
    frames = drive(stream, cuts, gaps, StreamingSettings())
    text, others = content(frames)
    assert text == "".join(tokens)
    assert others == ["role", "finish", "[DONE]"]
    assert len(parse(b"".join(frames))) <= len(tokens) + 3


@settings(max_examples=200, deadline=None)
@given(tokens_st, cuts_st, gaps_st)
def test_anthropic_blocks_never_merge_across_keys(
    tokens: list[str], cuts: list[int], gaps: list[float]
) -> None:
    events = [
        anthropic_event("content_block_delta", {"index": i % 2, "delta": {"type": "text_delta", "text": t}})
        for i, t in enumerate(tokens)
    ]
    stream = "".join(events).encode()
    frames = drive(stream, cuts, gaps, StreamingSettings())
    per_block: dict[int, str] = {0: "", 1: ""}
    for event in parse(b"".join(frames)):
        body = json.loads(event.data)
        per_block[body["index"]] += body["delta"]["text"]
    assert per_block[0] == "".join(tokens[0::2]) and per_block[1] == "".join(tokens[1::2])


sse_events_st = st.lists(
    st.builds(
        Event,
        data=st.text(max_size=30).map(lambda s: s.replace("\r", "")),
        event=st.none() | st.just("tick"),
        id=st.none() | st.just("7"),
    ),
    max_size=10,
)


@settings(max_examples=200, deadline=None)
@given(sse_events_st, cuts_st, gaps_st, st.sampled_from(["\n", "\r\n"]))
def test_generic_sse_is_byte_identical_under_any_chunking(
    events: list[Event], cuts: list[int], gaps: list[float], eol: str
) -> None:
    stream = b"".join(encode(e) for e in events).replace(b"\n", eol.encode()) + b": tail comment\n\n"
    frames = drive(stream, cuts, gaps, StreamingSettings())
    assert b"".join(frames) == stream
    assert parse(b"".join(frames)) == events


def test_whole_events_are_forwarded_as_the_apps_own_bytes() -> None:
    pipe = Pipeline("sse", StreamingSettings(), None)
    first = b"data: x\n\n"
    assert pipe.feed(first, 0.0)[0] is first


def test_a_huge_event_streams_through_without_being_held() -> None:
    s = StreamingSettings(max_event_bytes=1000)
    pipe = Pipeline("sse", s, None)
    assert pipe.feed(b"data: a\n\n", 0.0) == [b"data: a\n\n"]
    sent = pipe.feed(b"data: " + b"x" * 600, 0.1)  # under the bound: held
    assert sent == [] and pipe.at_boundary
    sent = pipe.feed(b"x" * 600, 0.2)  # past it: forwarded as it arrives, mid-event
    assert b"".join(sent) == b"data: " + b"x" * 1200 and not pipe.at_boundary
    assert pipe.feed(b"x" * 10, 0.3) == [b"x" * 10]
    assert pipe.feed(b"\n\ndata: b\n\n", 0.4) == [b"\n\ndata: b\n\n"] and pipe.at_boundary


def test_error_frame_drops_a_partial_event_so_it_cannot_swallow_the_error() -> None:
    from sse_middleware._core.errors import ErrorInfo

    pipe = Pipeline("sse", StreamingSettings(), None)
    assert pipe.feed(b"data: half", 0.0) == []
    frame = pipe.error_frame(ErrorInfo("internal_error", "failed", "id"))
    assert frame is not None
    assert [e.event for e in parse(frame)] == ["error"]
