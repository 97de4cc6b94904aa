"""The sans-I/O pipeline under any chunking and timing, with a fake clock (hypothesis properties)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sse_middleware import StreamingSettings
from sse_middleware._core.dialects import RelayMemory, RouteRelay
from sse_middleware._core.pipeline import Pipeline
from sse_middleware._core.sse import Event, encode, parse

from ..support.apps import anthropic_event, openai_chunk
from ..support.formats import (
    ARGS_TEXT,
    FORMATS,
    TOOL_ARGS,
    ascii_json,
    chat,
    read,
    sse,
    tool_args,
    tool_head,
)
from ..support.formats import stream as format_stream
from ..support.tier import examples

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


def drive(
    stream: bytes, cuts: list[int], gaps: list[float], s: StreamingSettings, **pipeline: Any
) -> list[bytes]:
    """Feed ``stream`` cut at ``cuts``, advancing a fake clock by ``gaps``, ticking at every deadline."""
    pipe = Pipeline("sse", s.core(), None, **pipeline)
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


@settings(max_examples=examples(200), deadline=None)
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


@settings(max_examples=examples(200), deadline=None)
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


def chat_choice(text: str | None, index: int, *, spaced: bool, finish: str | None = None) -> str:
    """One chunk of an ``n > 1`` completion: compact (the dialect's fast path) or spaced (its full parse)."""
    chunk = json.loads(openai_chunk(text, index=index, finish=finish)[6:])
    return f"data: {json.dumps(chunk, separators=None if spaced else (',', ':'))}\n\n"


def text_per_choice(frames: list[bytes]) -> tuple[dict[int, str], int]:
    """Each choice's text as a client joins it, and how many events carried text."""
    texts: dict[int, str] = {0: "", 1: ""}
    carrying = 0
    for event in parse(b"".join(frames)):
        if event.data != "[DONE]":
            (choice,) = json.loads(event.data)["choices"]
            if choice["delta"].get("content"):
                texts[choice["index"]] += choice["delta"]["content"]
                carrying += 1
    return texts, carrying


def n_choices_stream(pieces: list[tuple[int, str]], spaced: bool) -> bytes:
    return "".join(
        [
            *(chat_choice(text, index, spaced=spaced) for index, text in pieces),
            *(chat_choice(None, index, spaced=spaced, finish="stop") for index in (0, 1)),
            "data: [DONE]\n\n",
        ]
    ).encode()


@pytest.mark.parametrize("spaced", [False, True])
@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), st.sampled_from(["Hel", "lo", " ", "wor", "ld"]))), cuts_st, gaps_st
)
def test_openai_choices_of_one_completion_never_mix(
    spaced: bool, pieces: list[tuple[int, str]], cuts: list[int], gaps: list[float]
) -> None:
    """``n > 1``: the choices interleave under one chunk id; only the choice index tells them apart."""
    frames = drive(n_choices_stream(pieces, spaced), cuts, gaps, StreamingSettings())
    texts, _ = text_per_choice(frames)
    assert texts == {index: "".join(t for i, t in pieces if i == index) for index in (0, 1)}


@pytest.mark.parametrize("spaced", [False, True])
def test_openai_choices_merge_within_each_run(spaced: bool) -> None:
    """The control: runs of one choice's chunks do merge (so the property above sees merged frames)."""
    pieces = [(0, "a"), (0, "b"), (0, "c"), (1, "A"), (1, "B"), (0, "d"), (0, "e"), (1, "C")]
    frames = drive(n_choices_stream(pieces, spaced), [], [0.0], StreamingSettings())
    texts, carrying = text_per_choice(frames)
    assert texts == {0: "abcde", 1: "ABC"}
    assert carrying == 5  # the first chunk at once (the leading edge), then one event per run


sse_events_st = st.lists(
    st.builds(
        Event,
        data=st.text(max_size=30).map(lambda s: s.replace("\r", "")),
        event=st.none() | st.just("tick"),
        id=st.none() | st.just("7"),
    ),
    max_size=10,
)


@settings(max_examples=examples(200), deadline=None)
@given(sse_events_st, cuts_st, gaps_st, st.sampled_from(["\n", "\r\n"]))
def test_generic_sse_is_byte_identical_under_any_chunking(
    events: list[Event], cuts: list[int], gaps: list[float], eol: str
) -> None:
    stream = b"".join(encode(e) for e in events).replace(b"\n", eol.encode()) + b": tail comment\n\n"
    frames = drive(stream, cuts, gaps, StreamingSettings())
    assert b"".join(frames) == stream
    assert parse(b"".join(frames)) == events


def test_whole_events_are_forwarded_as_the_apps_own_bytes() -> None:
    pipe = Pipeline("sse", StreamingSettings().core(), None)
    first = b"data: x\n\n"
    assert pipe.feed(first, 0.0)[0] is first


def test_a_huge_event_streams_through_without_being_held() -> None:
    s = StreamingSettings(max_event_bytes=1000)
    pipe = Pipeline("sse", s.core(), None)
    assert pipe.feed(b"data: a\n\n", 0.0) == [b"data: a\n\n"]
    sent = pipe.feed(b"data: " + b"x" * 600, 0.1)  # under the bound: held
    assert sent == [] and not pipe.mid_event
    sent = pipe.feed(b"x" * 600, 0.2)  # past it: forwarded as it arrives, mid-event
    assert b"".join(sent) == b"data: " + b"x" * 1200 and pipe.mid_event
    assert pipe.feed(b"x" * 10, 0.3) == [b"x" * 10]
    assert pipe.feed(b"\n\ndata: b\n\n", 0.4) == [b"\n\ndata: b\n\n"] and not pipe.mid_event


def test_error_frame_drops_a_partial_event_so_it_cannot_swallow_the_error() -> None:
    from sse_middleware._core.errors import ErrorInfo

    pipe = Pipeline("sse", StreamingSettings().core(), None)
    assert pipe.feed(b"data: half", 0.0) == []
    frame = pipe.error_frame(ErrorInfo("internal_error", "failed", "id"))
    assert frame is not None
    assert [e.event for e in parse(frame)] == ["error"]


# -- Every dialect ------------------------------------------------------------------------------------


def learned(field: str = "text", path: str = "/relay") -> RouteRelay:
    """A route whose earlier stream proved it a relay."""
    route = RelayMemory().for_route({"method": "POST", "path": path})
    route.learn(field)
    return route


def format_case(fmt: str, tokens: list[str]) -> tuple[bytes, StreamingSettings, dict[str, Any]]:
    """A stream of ``fmt``, with the settings and pipeline arguments the format is merged under."""
    if fmt == "json":
        return format_stream(fmt, tokens), StreamingSettings(dialect="json", json_text_field="payload.t"), {}
    return format_stream(fmt, tokens), StreamingSettings(), {"relay": learned()} if fmt == "relay" else {}


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(sorted(FORMATS)), tokens_st, cuts_st, gaps_st)
def test_every_dialect_keeps_the_text_per_key_and_the_order_of_everything(
    fmt: str, tokens: list[str], cuts: list[int], gaps: list[float]
) -> None:
    """Text, reasoning and tool-call arguments per key identical; every other event in its place, with
    exactly the text before it that it had; under any chunking and timing."""
    stream, s, pipeline = format_case(fmt, tokens)
    frames = drive(stream, cuts, gaps, s, **pipeline)
    texts, others = read(fmt, b"".join(frames))
    assert (texts, others) == read(fmt, stream)


def lockstep(bodies: list[bytes], gaps: list[float], fast: Pipeline, full: Pipeline) -> list[bytes]:
    """Feed both pipelines the same bodies and ticks; ``full`` never takes the fast lane. Step by step,
    they must send the same frames and want the same deadlines. Returns the frames."""
    now, frames = 0.0, []
    for i, body in enumerate(bodies):
        arrive = now + gaps[i % len(gaps)]
        while (due := fast.deadline()) is not None and due <= arrive:
            assert full.deadline() == due
            out = fast.tick(due)
            assert out == full.tick(due)
            frames += out
        now = arrive
        full._lane = None  # type: ignore[attr-defined]
        out = fast.feed(body, now)
        assert out == full.feed(body, now)
        assert fast.deadline() == full.deadline()
        frames += out
    out = fast.close()
    assert out == full.close()
    return frames + out


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(sorted(FORMATS)), tokens_st, cuts_st, gaps_st, st.booleans())
def test_the_fast_lane_sends_what_the_full_path_sends(
    fmt: str, tokens: list[str], cuts: list[int], gaps: list[float], escaped: bool
) -> None:
    """An event in the last merged delta's envelope takes a fast lane (no framer, no search for events,
    no key comparison): under any chunking and timing, it sends what the full path sends."""
    stream, s, pipeline = format_case(fmt, tokens)
    stream = ascii_json(stream) if escaped else stream
    bounds = [0, *sorted({min(c, len(stream)) for c in cuts} | {len(stream)})]
    bodies = [stream[a:b] for a, b in itertools.pairwise(bounds)]
    full = Pipeline("sse", s.core(), None, **format_case(fmt, tokens)[2])  # its own relay route
    lockstep(bodies, gaps, Pipeline("sse", s.core(), None, **pipeline), full)


def test_the_fast_lane_is_left_at_anything_but_a_merged_delta_that_ends_a_body() -> None:
    """Taken by consecutive deltas; not while the framer holds part of an event (a comment line the next
    body's data line joins), nor after an event that turned a relay off."""
    bodies = [openai_chunk(None, role=True), openai_chunk("Hel"), openai_chunk("lo"), openai_chunk("!")[:-1]]
    bodies += ["\n", openai_chunk("a") + ": note\n", openai_chunk("b"), openai_chunk("c")]
    fast = Pipeline("sse", StreamingSettings().core(), None)
    full = Pipeline("sse", StreamingSettings().core(), None)
    frames = lockstep([b.encode() for b in bodies], [0.01], fast, full)
    assert fast._lane is not None  # type: ignore[attr-defined]
    assert content(frames) == ("Hello!abc", ["role"])
    assert b": note\n" + openai_chunk("b").encode() in b"".join(frames)  # one event, forwarded as it came
    relay = [sse({"text": "a"}), sse({"text": "b"}) + sse({"n": 1}), sse({"text": "c"}), sse({"text": "d"})]
    frames = lockstep(
        [b.encode() for b in relay],
        [0.01],
        Pipeline("sse", StreamingSettings().core(), None, relay=learned()),
        Pipeline("sse", StreamingSettings().core(), None, relay=learned()),
    )
    assert b"".join(frames) == "".join(relay).encode()  # after the break, nothing merges


class Observed:
    """What a pipeline tells its stream's telemetry, in order: the calls StreamTelemetry gets per event."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def chunk(self, now: float, content: bool) -> None:
        self.calls.append(("chunk", now, content))

    def dialect(self, provider: str, operation: str) -> None:
        self.calls.append(("dialect", provider, operation))

    def response(self, **info: Any) -> None:
        self.calls.append(("response", info))


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(sorted(FORMATS)), tokens_st, cuts_st, st.booleans(), st.booleans())
def test_pass_through_telemetry_sees_on_the_fast_lane_what_it_sees_on_the_full_path(
    fmt: str, tokens: list[str], cuts: list[int], escaped: bool, per_event: bool
) -> None:
    """Coalescing off, telemetry on: an event in the last content event's envelope takes the fast lane;
    telemetry hears the same content flags and the same response info, and the bytes pass unchanged.
    Sent an event per body (as apps do: the lane's case) or cut anywhere."""
    stream, s, pipeline = format_case(fmt, tokens)
    stream = ascii_json(stream) if escaped else stream
    s = StreamingSettings(coalesce=False, dialect=s.dialect, json_text_field=s.json_text_field)
    if per_event:
        cuts = [i for i in range(len(stream)) if stream[i - 2 : i] == b"\n\n"]
    bounds = [0, *sorted({min(c, len(stream)) for c in cuts} | {len(stream)})]
    bodies = [stream[a:b] for a, b in itertools.pairwise(bounds)]
    fast_rec, full_rec = Observed(), Observed()
    fast = Pipeline("sse", s.core(), fast_rec, **pipeline)  # type: ignore[arg-type]
    full = Pipeline("sse", s.core(), full_rec, **format_case(fmt, tokens)[2])  # type: ignore[arg-type]
    assert b"".join(lockstep(bodies, [0.01], fast, full)) == stream
    assert fast_rec.calls == full_rec.calls


def test_pass_through_telemetry_takes_the_fast_lane_between_content_events_only() -> None:
    """The lane opens at a content event with nothing to parse, and the finish chunk leaves it: its info
    (finish reason, usage) is read."""
    rec = Observed()
    p = Pipeline("sse", StreamingSettings(coalesce=False).core(), rec)  # type: ignore[arg-type]
    p.feed(openai_chunk(None, role=True).encode(), 0.0)
    assert p._lane is None  # type: ignore[attr-defined]
    for i, token in enumerate(["Hel", "lo", "!"]):
        p.feed(openai_chunk(token).encode(), float(i))
        assert p._lane is not None  # type: ignore[attr-defined]
    p.feed(openai_chunk(None, finish="stop").encode(), 9.0)
    assert p._lane is None  # type: ignore[attr-defined]
    assert [c[2] for c in rec.calls if c[0] == "chunk"] == [False, True, True, True, False]
    assert [c[1].get("finish_reason") for c in rec.calls if c[0] == "response"][-1] == "stop"
    # Usage on every content chunk (the same object each time): each one is read, none takes the lane.
    rec = Observed()
    p = Pipeline("sse", StreamingSettings(coalesce=False).core(), rec)  # type: ignore[arg-type]
    p.feed(openai_chunk(None, role=True).encode(), 0.0)
    usage = ',"usage":{"prompt_tokens":5}}'
    for i, token in enumerate(["Hel", "lo", "!"]):
        p.feed(openai_chunk(token)[: -len("}\n\n")].encode() + usage.encode() + b"\n\n", float(i))
    assert sum(c[1].get("input_tokens") == 5 for c in rec.calls if c[0] == "response") == 3


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_dialect_merges_a_fast_stream_several_fold(fmt: str) -> None:
    """Events 1 ms apart (a fast API): several-fold fewer events; the control, coalescing off, forwards
    every event as it came."""
    stream, s, pipeline = format_case(fmt, ["Hel", "lo", " wor", "ld", "!\n"] * 20)
    cuts = [i for i in range(len(stream)) if stream[i - 2 : i] == b"\n\n"]
    merged = b"".join(drive(stream, cuts, [0.001], s, **pipeline))
    assert len(parse(merged)) * 4 <= len(parse(stream)), (len(parse(merged)), len(parse(stream)))
    control = StreamingSettings(coalesce=False, dialect=s.dialect, json_text_field=s.json_text_field)
    assert b"".join(drive(stream, cuts, [0.001], control, **pipeline)) == stream


def test_tool_call_arguments_merge_into_their_first_fragment() -> None:
    """After the leading edge (the text before), a call's first fragment is the envelope of its arguments."""
    head = chat(tool_head(0, "get_weather", ARGS_TEXT[:2]))
    rest = "".join(chat(tool_args(0, c)) for c in ARGS_TEXT[2:])
    frames = drive((chat({"content": "Let me look."}) + head + rest).encode(), [], [0.0], StreamingSettings())
    text, call = parse(b"".join(frames))
    assert json.loads(text.data)["choices"][0]["delta"]["content"] == "Let me look."
    fragment = json.loads(call.data)["choices"][0]["delta"]["tool_calls"][0]
    assert (fragment["id"], fragment["function"]["name"]) == ("call_0", "get_weather")
    assert json.loads(fragment["function"]["arguments"]) == TOOL_ARGS


def test_an_empty_delta_goes_out_as_it_is() -> None:
    """A tool call's first fragment with empty arguments (it carries the call's id and name), Anthropic's
    first empty ``partial_json``, an empty AI SDK delta: nothing to merge, but never dropped."""
    cases = [
        chat({"content": "Hi"}) + chat(tool_head(0, "f")) + chat(tool_args(0, "{}")),
        anthropic_event(
            "content_block_delta", {"index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}
        ),
        sse({"type": "start"}) + sse({"type": "text-delta", "id": "0", "delta": ""}),
    ]
    for stream in cases:
        assert b"".join(drive(stream.encode(), [], [0.0], StreamingSettings())) == stream.encode()


json_messages_st = st.lists(  # what a relay sends: merged only once its route proved it
    st.builds(lambda t: {"text": t}, st.text(max_size=5)), min_size=1, max_size=8
) | st.lists(
    st.dictionaries(
        st.sampled_from(["text", "content", "id", "type", "n"]), st.text(max_size=5) | st.integers()
    ),
    min_size=1,
    max_size=8,
)
fast_gaps_st = st.lists(st.sampled_from([0.0, 0.001, 0.01]), min_size=40, max_size=40)  # where merging would


@settings(max_examples=examples(300), deadline=None)
@given(json_messages_st, cuts_st, fast_gaps_st, st.booleans(), st.booleans())
def test_json_messages_stay_byte_identical_unless_a_route_proved_a_relay(
    messages: list[dict[str, Any]], cuts: list[int], gaps: list[float], done: bool, compact: bool
) -> None:
    """Arbitrary JSON messages, relay-looking ones included, up to a [DONE] or not, on a route that has
    proven nothing: byte-identical. The stream that proves the route is byte-identical too."""
    stream = (
        "".join(sse(m, compact=compact) for m in messages) + ("data: [DONE]\n\n" if done else "")
    ).encode()
    memory = RelayMemory()
    route = memory.for_route({"method": "GET", "path": "/m"})
    assert b"".join(drive(stream, cuts, gaps, StreamingSettings(), relay=route)) == stream


def test_a_relay_merges_from_the_stream_after_the_one_that_proved_it() -> None:
    memory = RelayMemory()
    stream = format_stream("relay", ["a", "b", "c", "d"] * 10)
    runs = [
        drive(stream, [], [0.001], StreamingSettings(), relay=memory.for_route({"path": "/r"})) for _ in "12"
    ]
    assert b"".join(runs[0]) == stream  # the first stream proves the route, unchanged
    assert len(parse(b"".join(runs[1]))) * 4 <= len(parse(stream))
    assert read("relay", b"".join(runs[1])) == read("relay", stream)


@settings(max_examples=examples(200), deadline=None)
@given(
    tokens_st, st.lists(st.integers(0, 400), max_size=15), gaps_st, st.sampled_from([b"", "你".encode()[:2]])
)
def test_text_plain_bytes_are_never_altered_under_any_chunking(
    tokens: list[str], cuts: list[int], gaps: list[float], unfinished: bytes
) -> None:
    """Cuts inside multi-byte characters, and a last character the app never finished: what goes out,
    joined, is exactly what came in."""
    body = "".join(tokens).encode() + unfinished
    pipe, out, now, last = Pipeline("text", StreamingSettings().core(), None), [], 0.0, 0
    for i, bound in enumerate(sorted({min(c, len(body)) for c in cuts} | {len(body)})):
        now += gaps[i % len(gaps)]
        while (due := pipe.deadline()) is not None and due <= now:
            out += pipe.tick(due)
        out += pipe.feed(body[last:bound], now)
        last = bound
    assert b"".join(out + pipe.close()) == body


def test_text_plain_that_breaks_utf8_after_a_held_lead_byte_is_forwarded_as_it_came() -> None:
    """A chunk ends in a lead byte (held for its character) and the next starts with ASCII: not UTF-8,
    so from there on the bytes go out as they came, the held byte first."""
    pipe, chunks = Pipeline("text", StreamingSettings().core(), None), [b"ab", b"cd\xc3", b"ef", b"gh"]
    out = [frame for i, chunk in enumerate(chunks) for frame in pipe.feed(chunk, i * 0.01)]
    assert b"".join(out + pipe.close()) == b"".join(chunks)


@settings(max_examples=examples(200), deadline=None)
@given(tokens_st, cuts_st, gaps_st)
def test_the_text_dialect_keeps_the_text_per_event_name(
    tokens: list[str], cuts: list[int], gaps: list[float]
) -> None:
    names = ["a", None, "a", "b"]
    events = [Event(t, names[i % 4]) for i, t in enumerate(tokens) if "\r" not in t]
    stream = b"".join(encode(e) for e in events)
    frames = drive(stream, cuts, gaps, StreamingSettings(dialect="text"))
    per_name: dict[str | None, list[str]] = {}
    for event in parse(b"".join(frames)):
        per_name.setdefault(event.event, []).append(event.data)
    assert {k: "".join(v) for k, v in per_name.items()} == {
        name: "".join(e.data for e in events if e.event == name) for name in {e.event for e in events}
    }


def test_a_slow_streams_deltas_go_out_as_the_apps_own_bytes() -> None:
    """At 25 tok/s the coalescer sends each delta as it came: the frame is the app's body object itself
    (so the shell forwards the app's own message), not a rebuild of it. Control: at 1,000 tok/s the
    deltas merge into rebuilt frames."""
    bodies = [openai_chunk(t).encode() for t in ("Hel", "lo", " wor", "ld", "!", " Bye", " now")]
    for gap, same in ((0.04, True), (0.001, False)):
        pipe, now, out = Pipeline("sse", StreamingSettings().core(), None), 100.0, []
        for body in bodies:
            now += gap
            out.append((body, pipe.feed(body, now)))
        later = out[3:]  # past the first gaps that teach the coalescer the pace
        assert all(len(got) == 1 and got[0] is body for body, got in later) is same
