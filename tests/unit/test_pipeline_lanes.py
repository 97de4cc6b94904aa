"""The pipeline's short ways through ``feed`` against its full path, step by step.

Each lane skips work the full path does (the framer's search, the split into events, the dialect's
reads); under any chunking it must send the same frames and tell the telemetry the same things.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from sse_middleware import StreamingSettings
from sse_middleware._core.pipeline import Pipeline
from sse_middleware._core.sse import Event, encode

from ..support.tier import examples
from .test_pipeline import Observed, cuts_st, sse_events_st


@settings(max_examples=examples(300), deadline=None)
@given(sse_events_st, cuts_st, st.sampled_from(["\n", "\r\n"]), st.booleans(), st.booleans())
def test_generic_events_pass_the_opaque_lane_as_the_full_path_sends_them(
    events: list[Event], cuts: list[int], eol: str, per_event: bool, comments: bool
) -> None:
    """Generic SSE reads nothing in an event: a body of whole events goes out as it came without being
    split; the bytes, the frames per body and the telemetry's calls (one per event) are the full path's.
    Bodies of one event each (the lane's case), or cut anywhere (several events per body, a partial one,
    an event past ``max_event_bytes`` streamed through)."""
    raw = [encode(e) for e in events]
    if comments:
        raw = [r + b": c\n\n" for r in raw]
    stream = b"".join(raw).replace(b"\n", eol.encode())
    if per_event:
        cuts = list(itertools.accumulate(len(r.replace(b"\n", eol.encode())) for r in raw))
    bounds = [0, *sorted({min(c, len(stream)) for c in cuts} | {len(stream)})]
    bodies = [stream[a:b] for a, b in itertools.pairwise(bounds)]
    s = StreamingSettings(dialect="sse", max_event_bytes=40)
    fast_rec, full_rec = Observed(), Observed()
    fast = Pipeline("sse", s.core(), fast_rec)  # type: ignore[arg-type]
    full = Pipeline("sse", s.core(), full_rec)  # type: ignore[arg-type]
    sent = []
    for i, body in enumerate(bodies):
        full._opaque = False  # type: ignore[attr-defined]
        out = fast.feed(body, float(i))
        assert out == full.feed(body, float(i))
        sent += out
    assert fast.close() == full.close()
    assert b"".join(sent) == b"".join(bodies)
    assert fast_rec.calls == full_rec.calls
    assert fast._opaque or not sent  # type: ignore[attr-defined]  # from the body after the first events


def test_the_opaque_lane_is_for_formats_that_read_nothing() -> None:
    """Detected generic SSE takes it; a merging format, and a stream whose output is checked, do not."""
    core = StreamingSettings().core()
    auto = Pipeline("sse", core, None)
    assert not auto._opaque  # type: ignore[attr-defined]
    auto.feed(b"event: progress\ndata: {}\n\n", 0.0)
    assert auto._opaque  # type: ignore[attr-defined]
    assert not Pipeline("sse", StreamingSettings(dialect="openai").core(), None)._opaque  # type: ignore[attr-defined]
    named = Pipeline("sse", StreamingSettings(dialect="sse").core(), None)  # named: its first events first
    named.feed(b"id: 1\ndata: {}\n\n", 0.0)  # (where an id is looked for: see Pipeline.ids)
    assert named._opaque and named.ids  # type: ignore[attr-defined]


def test_the_opaque_lane_waits_for_the_end_of_an_event_streamed_through() -> None:
    """A huge event is forwarded in pieces (mid-event); the body that ends it leaves that state, so the
    next partial event is held again, as on the full path."""
    s = StreamingSettings(dialect="sse", max_event_bytes=100)
    bodies = [b"data: " + b"x" * 200, b"x\n\n", b"data: half", b" done\n\n"]
    fast, full = Pipeline("sse", s.core(), None), Pipeline("sse", s.core(), None)
    sent = []
    for i, body in enumerate(bodies):
        full._opaque = False  # type: ignore[attr-defined]
        out = fast.feed(body, float(i))
        assert out == full.feed(body, float(i))
        sent.append(out)
    assert sent[2] == [] and sent[3] == [b"data: half done\n\n"]


def _same_text_by_slices(raw: bytes, before: bytes, after: bytes) -> str | None:
    """The envelope check as it was written before removeprefix(): the oracle."""
    from sse_middleware._core.wire import unescape

    if not (raw.endswith(after) and raw.startswith(before)):
        return None
    contents = raw[len(before) : -len(after)]
    if not contents or b"\n" in contents or b"\r" in contents:
        return None
    if b"\\" in contents:
        return unescape(contents)
    if b'"' in contents:
        return None
    try:
        return contents.decode()
    except UnicodeDecodeError:
        return None


_PIECES = st.sampled_from([b"a", b" ", b'"', b"\\", b"\\n", b'\\"', b"\n", b"\r", b"\xc3\xa9", b"\xff", b"}"])


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(_PIECES, max_size=8), st.integers(0, 3), st.integers(0, 3))
def test_same_text_answers_what_the_slice_check_answered(pieces: list[bytes], head: int, tail: int) -> None:
    """Any bytes between the learned envelope's halves, and events whose halves differ from it (one
    cut short, or overlapping when the text is empty): the same text, or None, as the slice check."""
    from sse_middleware._core.dialects.openai_chat import OpenAIChat

    dialect = OpenAIChat()
    first = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n'
    assert dialect.learn(first) is not None
    before, after = dialect.envelope
    raw = before[head:] + b"".join(pieces) + after[: len(after) - tail]
    assert dialect.same_text(raw) == _same_text_by_slices(raw, before, after)
