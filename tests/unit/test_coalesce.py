"""The coalescer against a fake clock: unit tests per rule, and properties over random token streams
driven the way the middleware's timer drives it (the clock jumps to min(next arrival, deadline)))."""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sse_middleware._core.coalesce import Coalescer
from sse_middleware._core.markdown import is_grapheme_boundary

from ..support.text_samples import CLUSTERS, FAMILY, SIMPLE

D = 0.0625  # max_delay of the unit tests: a binary fraction, so deadlines are exact floats


def deadline(c: Coalescer[Any, Any]) -> float | None:
    """When the timer must tick ``c``, read as the shell reads it after every token (``due``); None when
    nothing is buffered. ``due`` is inf exactly then: the shell's only test before it wants a wake."""
    assert (c.due == math.inf) == (not c._parts)
    return None if c.due == math.inf else c.due


def test_leading_edge_then_merge_then_deadline() -> None:
    c: Coalescer[str, int] = Coalescer(D, 4096)
    assert deadline(c) is None
    assert c.feed("k", 0, "Hello", 0.0) == [(0, "Hello")]  # first text: at once, whole
    assert c.feed("k", 1, " wor", 0.03125) == []
    assert c.feed("k", 2, "ld and", 0.0625) == []
    assert deadline(c) == 0.09375
    assert c.tick(0.09) == []
    assert c.tick(0.09375) == [(1, " world ")]  # " wor" was due; the cut extends to the last space
    assert deadline(c) == 0.125  # "and" keeps its own arrival time and its own envelope
    assert c.tick(0.125) == [(2, "and")]
    assert deadline(c) is None


def test_silence_restarts_the_leading_edge() -> None:
    c: Coalescer[str, int] = Coalescer(D, 4096)
    c.feed("k", 0, "a", 0.0)
    c.feed("k", 1, "b", 0.03125)
    assert c.tick(0.09375) == [(1, "b")]
    assert c.feed("k", 2, "c", 0.09375 + D - 0.001) == []  # just under max_delay since the last emit
    assert c.tick(deadline(c) or 0) == [(2, "c")]
    assert c.feed("k", 3, "d", 0.5) == [(3, "d")]  # max_delay of silence: at once


def test_at_a_steady_rate_the_sends_carry_every_cut() -> None:
    """Tokens 10 ms apart with a little jitter, the deadline 50 ms after the first buffered one: the send
    that comes just before (or after) that deadline takes the cut with it, so the timer never has to run
    one. Every character still goes out within max_delay. (Without the early window, the jitter decides
    and about half the cuts need the timer.)"""
    delay, gap = 0.05, 0.01
    c: Coalescer[str, int] = Coalescer(delay, 4096)
    arrivals = [i * gap + (0.0002 if i % 2 else 0.0) for i in range(200)]
    sent_at: list[float] = []
    for i, now in enumerate(arrivals):
        sent_at += [now] * sum(len(text) for _, text in c.feed("k", i, "ab ", now))
        due = deadline(c)
        if i + 1 < len(arrivals):
            assert due is None or due > arrivals[i + 1], (i, due)  # nothing for a timer to do
    waits = [sent - arrivals[i // 3] for i, sent in enumerate(sent_at)]
    assert len(waits) < 600 and max(waits) <= delay  # the tail is still buffered; none waited too long
    assert len(set(sent_at)) < 60  # and it merges: about one frame per 50 ms, not one per token


def test_key_change_flushes_and_empty_text_is_a_no_op() -> None:
    c: Coalescer[tuple[int, str], int] = Coalescer(D, 4096)
    c.feed((0, "text"), 0, "a", 0.0)
    c.feed((0, "text"), 1, "b c", 0.01)
    assert c.feed((1, "text"), 2, "", 0.02) == []
    assert c.feed((1, "text"), 3, "x", 0.02) == [(1, "b c")]  # only consecutive same-key events merge
    assert c.flush() == [(3, "x")]
    assert c.flush() == []
    assert deadline(c) is None


def test_max_bytes_cuts_at_once_in_the_second_half() -> None:
    c: Coalescer[str, int] = Coalescer(D, 64)
    c.feed("k", 0, "start", 0.0)
    out: list[tuple[int, str]] = []
    for i in range(1, 40):
        out += c.feed("k", i, "word ", 0.001 * i)
    assert out and all(len(t.encode()) <= 64 + 5 and t.endswith(" ") for _, t in out)
    assert sum(len(t) for _, t in out + c.flush()) == 39 * 5


def test_max_bytes_counts_utf8() -> None:
    c: Coalescer[str, int] = Coalescer(D, 30)
    c.feed("k", 0, "x", 0.0)
    out = [p for i in range(1, 6) for p in c.feed("k", i, "\u4f60\u597d", 0.001 * i)]  # 6 bytes each
    assert [t for _, t in out] == ["\u4f60\u597d" * 5]  # 30 bytes reached: all of it (CJK cuts anywhere)


def test_markdown_state_follows_what_was_emitted() -> None:
    fenced: Coalescer[str, int] = Coalescer(D, 4096)
    plain: Coalescer[str, int] = Coalescer(D, 4096)
    fenced.feed("k", 0, "```\n", 0.0)
    plain.feed("k", 0, "ok\n", 0.0)
    for c in (fenced, plain):
        c.feed("k", 1, "a", 0.03125)
        c.feed("k", 2, "\n\nb\nc d", 0.0625)
    assert fenced.tick(0.09375) == [(1, "a\n\nb\n")]  # in code a blank line is no block end
    assert plain.tick(0.09375) == [(1, "a\n\n")]  # in prose it is, and it beats a later newline


def test_each_key_has_its_own_markdown_context() -> None:
    c: Coalescer[str, int] = Coalescer(D, 4096)
    c.feed("code", 0, "```\n", 0.0)  # one content block opens a fence ...
    c.feed("prose", 1, "a", 0.03125)  # ... another, interleaved, does not continue it
    c.feed("prose", 2, "\n\nb\nc d", 0.0625)
    assert c.tick(0.09375) == [(1, "a\n\n")]


def test_trailing_marker_is_held_only_until_the_deadline() -> None:
    c: Coalescer[str, int] = Coalescer(D, 4096)
    c.feed("k", 0, "x", 0.0)
    c.feed("k", 1, "very", 0.03125)
    c.feed("k", 2, " **", 0.0625)
    assert c.tick(0.09375) == [(1, "very ")]
    assert c.tick(0.125) == [(2, "**")]  # its own deadline: the bound wins over cut quality


def test_incomplete_grapheme_gets_one_grace_period() -> None:
    c: Coalescer[str, int] = Coalescer(D, 4096)
    c.feed("k", 0, "x", 0.0)
    c.feed("k", 1, "hi \U0001f468\u200d", 0.03125)
    assert c.tick(0.09375) == [(1, "hi ")]  # a trailing ZWJ waits for its pictograph
    assert deadline(c) == 0.15625  # ... for one more max_delay
    assert c.feed("k", 2, "\U0001f469 ok", 0.125) == [(1, "\U0001f468\u200d\U0001f469 ")]
    assert c.tick(0.1875) == [(2, "ok")]
    ri = "\U0001f1fa"
    assert c.feed("k", 3, ri, 1.0) == [(3, ri)]  # leading edge: whole, at once, even half a flag
    c.feed("k", 4, ri, 1.03125)
    c.feed("k", 5, ri, 1.03125)
    assert c.tick(1.09375) == [(4, ri)]  # pairs with the one sent before; the last one waits
    assert c.tick(1.125) == []
    assert c.tick(1.15625) == [(5, ri)]  # grace over: the bound wins


def test_zero_delay_disables_coalescing() -> None:
    c: Coalescer[str, int] = Coalescer(0.0, 4096)
    assert [c.feed("k", i, "t", 1.0) for i in range(3)] == [[(0, "t")], [(1, "t")], [(2, "t")]]


def test_bad_settings() -> None:
    with pytest.raises(ValueError):
        Coalescer(-1.0, 10)
    with pytest.raises(ValueError):
        Coalescer(0.1, 0)


# --- properties ----------------------------------------------------------------------------------


@dataclass
class Run:
    """Everything a simulated stream produced, with per-character timing."""

    texts: list[str]
    keys: list[int]
    arrivals: list[float]
    pieces: list[tuple[float, int, str]] = field(default_factory=list)  # (emit time, envelope, text)
    remainder_cuts: list[int] = field(default_factory=list)  # cuts that left text buffered
    max_buffered: int = 0


def simulate(events: list[tuple[float, int, str]], delay: float, max_bytes: int, drain: bool) -> Run:
    """Feed (gap, key, text) events; between arrivals run tick() at every deadline, as the timer would."""
    c: Coalescer[int, int] = Coalescer(delay, max_bytes)
    run = Run([e[2] for e in events], [e[1] for e in events], [])
    clock, fed, sent, fed_bytes, sent_bytes, active = 0.0, 0, 0, 0, 0, -1.0

    def record(now: float, out: list[tuple[int, str]]) -> None:
        nonlocal sent, sent_bytes, active
        active = now if out else active
        for env, text in out:
            run.pieces.append((now, env, text))
            sent += len(text)
            sent_bytes += len(text.encode("utf-8", "surrogatepass"))
        if out and sent < fed:
            run.remainder_cuts.append(sent)

    def tick(clock: float, due: float) -> float:
        clock = max(clock, due)
        record(clock, c.tick(clock))
        after = deadline(c)
        assert after is None or after > clock  # the timer makes progress: no busy loop
        return clock

    for i, (gap, key, text) in enumerate(events):
        arrival = clock + gap
        while (due := deadline(c)) is not None and due <= arrival:
            clock = tick(clock, due)
        clock = arrival
        run.arrivals.append(clock)
        idle = sent == fed and (active < 0 or clock - active >= delay)
        out = c.feed(key, i, text, clock)
        if idle and text:  # leading edge: the first text, and the first after silence, at once, whole
            assert out == [(i, text)]
        active = clock if text else active
        fed += len(text)
        fed_bytes += len(text.encode("utf-8", "surrogatepass"))
        record(clock, out)
        run.max_buffered = max(run.max_buffered, fed_bytes - sent_bytes)
    while drain and (due := deadline(c)) is not None:
        clock = tick(clock, due)
    record(clock, c.flush())
    assert deadline(c) is None and sent == fed
    return run


def check(run: Run, delay: float, bound: float) -> None:
    text = "".join(run.texts)
    assert "".join(p[2] for p in run.pieces) == text  # nothing lost, duplicated or reordered
    starts = list(itertools.accumulate((len(t) for t in run.texts), initial=0))
    # Runs of consecutive same-key events; empty texts are no-ops and do not break a run.
    run_of, current, prev = [], -1, None
    for t, k in zip(run.texts, run.keys, strict=True):
        if t and k != prev:
            current, prev = current + 1, k
        run_of.append(current)
    pos = 0
    for emitted, env, piece in run.pieces:
        assert piece
        first = bisect.bisect_right(starts, pos) - 1
        while not run.texts[first]:
            first += 1
        assert env == first  # the envelope of the event the piece's first character came from
        last = bisect.bisect_right(starts, pos + len(piece) - 1) - 1
        assert run_of[first] == run_of[last]  # never merges different keys or separate runs
        for j in range(first, last + 1):  # added delay of every character
            assert emitted - run.arrivals[j] <= bound + 1e-9
        pos += len(piece)


def stream(alphabet: st.SearchStrategy[str]) -> st.SearchStrategy[list[tuple[float, int, str]]]:
    gaps = st.one_of(st.just(0.0), st.floats(0, 0.03), st.floats(0, 0.2))
    return st.lists(st.tuples(gaps, st.integers(0, 2), alphabet), max_size=60)


PLAIN = st.text(alphabet="ab .\n*`|[]()$\u4f60\u3002\u00e9\U0001f600", max_size=8)
ANY = st.text(alphabet="ab .\n\r*`\u200d\u0301\ufe0f\U0001f1fa\U0001f468\u4f60\u0600\u094d\u0915", max_size=8)


@given(stream(PLAIN), st.sampled_from([0.0, 0.01, 0.05, 0.1]), st.integers(1, 64), st.booleans())
def test_every_character_within_max_delay(
    events: list[tuple[float, int, str]], delay: float, max_bytes: int, drain: bool
) -> None:
    run = simulate(events, delay, max_bytes, drain)
    check(run, delay, delay)
    assert run.max_buffered < max_bytes  # after feed() returns; within it, at most one piece more


@given(stream(ANY), st.sampled_from([0.01, 0.05]), st.integers(1, 64), st.booleans())
def test_incomplete_graphemes_wait_at_most_one_more_max_delay(
    events: list[tuple[float, int, str]], delay: float, max_bytes: int, drain: bool
) -> None:
    run = simulate(events, delay, max_bytes, drain)
    check(run, delay, 2 * delay)
    assert run.max_buffered < max_bytes


def tokens_of(parts: list[str], cuts: list[int]) -> list[str]:
    text = "".join(parts)
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@given(
    st.lists(st.sampled_from(CLUSTERS + SIMPLE), min_size=1, max_size=60),
    st.lists(st.integers(0, 10_000), max_size=40),
    st.lists(st.floats(0, 0.08), min_size=40, max_size=40),
    st.integers(4, 80),
)
def test_cuts_that_keep_a_remainder_never_split_a_grapheme(
    parts: list[str], cuts: list[int], gaps: list[float], max_bytes: int
) -> None:
    """Tokens split clusters anywhere (as tokenizers do). A cut made while text stays buffered knows
    the character after it, so it must fall between clusters; splits are only allowed at the buffer's
    end (unknowable) or when a bound forces everything out."""
    tokens = tokens_of(parts, cuts)
    run = simulate([(gaps[i % len(gaps)], 0, t) for i, t in enumerate(tokens)], D, max_bytes, drain=True)
    text = "".join(tokens)
    check(run, D, 2 * D)
    for p in run.remainder_cuts:
        assert is_grapheme_boundary(text, p), (text[:p], text[p:])


def test_family_emoji_split_across_tokens_stays_whole() -> None:
    tokens = ["x", " a ", FAMILY[:1], FAMILY[1:3], FAMILY[3:], " b"]
    run = simulate([(0.01, 0, t) for t in tokens], D, 4096, drain=True)
    assert all(FAMILY[:3] not in p[2] or FAMILY in p[2] for p in run.pieces)
