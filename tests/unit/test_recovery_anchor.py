"""Continuation without prefill, the seam alone: :class:`Seam` fed a re-run's reply as it streams.

The measurement: 250 cut points over five texts (prose, indented code, a markdown table, CJK, ZWJ
emoji) times the six ways a model answers (:mod:`tests.support.upstream_anchor`). The first four must
give the client the whole answer byte for byte; a paraphrase must fail the attempt before any of it
reaches the client; a restart in other words may do either, never show the client's text again. The
figures are the ones docs/recovery.md states.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sse_middleware._core.graphemes import is_grapheme_boundary
from sse_middleware._core.recovery import Failure, GiveUp, Recoverer, Retry
from sse_middleware._core.recovery.anchor import LEAD, Seam, anchor_of, resembles

from ..support.tier import examples
from ..support.upstream import anthropic_events, chat_events, tokens
from ..support.upstream_anchor import BEHAVIOURS, FIRST_CUT, SAMPLES, cut_points, pieces, reply
from .test_recovery_splice import anthropic_read, chat_read

CUTS = [(name, cut) for name, text in SAMPLES.items() for cut in cut_points(text, 50)]


def splice(had: str, chunks: list[str]) -> tuple[str, bool]:
    """What the client gets of the reply fed in ``chunks``, and whether the attempt held."""
    seam = Seam(had, anchor_of(had))
    out = []
    for chunk in chunks:
        got = seam.feed(chunk)
        if got is None:
            return "".join(out), False
        out.append(got)
    last = seam.finish()
    return "".join(out) + (last or ""), last is not None


def outcome(behaviour: str, text: str, cut: int, chunks: list[str] | None = None) -> str:
    had = text[:cut]
    answer = reply(behaviour, text, had, anchor_of(had))
    got, held = splice(had, tokens(answer) if chunks is None else chunks)
    if not held:
        return "failed, nothing shown" if got == "" else "failed after showing text"
    return "exact" if had + got == text else "wrong"


def test_the_seam_over_250_cut_points_and_six_behaviours() -> None:
    assert len(CUTS) == 250
    counts = Counter((b, outcome(b, SAMPLES[name], cut)) for name, cut in CUTS for b in BEHAVIOURS)
    assert counts == {
        ("exact", "exact"): 250,
        ("whitespace", "exact"): 250,
        ("skip", "exact"): 250,
        ("restart", "exact"): 250,
        ("paraphrase", "failed, nothing shown"): 250,
        # A restart in other words: its seam is found (and exact) where the anchor is in its opening
        # words, past the swap; anywhere else the attempt fails. Never text shown twice.
        ("reword", "exact"): 75,
        ("reword", "failed, nothing shown"): 175,
    }


def test_control_without_the_seam_an_anchored_reply_shows_the_anchor_twice() -> None:
    """What the same replies give a client when nothing finds the anchor: the repeat, shown."""
    text, cut = SAMPLES["prose"], 120
    had = text[:cut]
    for behaviour in ("exact", "whitespace", "paraphrase"):
        assert had + reply(behaviour, text, had, anchor_of(had)) != text


@settings(max_examples=examples(300), deadline=None)
@given(
    name=st.sampled_from(sorted(SAMPLES)),
    where=st.floats(0, 1),
    behaviour=st.sampled_from(BEHAVIOURS),
    sizes=st.lists(st.integers(1, 12), min_size=1, max_size=40),
)
def test_any_cut_under_any_chunking(name: str, where: float, behaviour: str, sizes: list[int]) -> None:
    text = SAMPLES[name]
    cut = FIRST_CUT + int(where * (len(text) - FIRST_CUT))
    had = text[:cut]
    answer = reply(behaviour, text, had, anchor_of(had))
    chunks, i = [], 0
    for size in sizes * (len(answer) // sum(sizes) + 1):
        if i >= len(answer):
            break
        chunks.append(answer[i : i + size])
        i += size
    got = outcome(behaviour, text, cut, chunks or [""])
    if behaviour == "reword":
        assert got in ("exact", "failed, nothing shown")
    else:
        assert got == ("failed, nothing shown" if behaviour == "paraphrase" else "exact")


# -- the rules, one example each -------------------------------------------------------------------------
HAD = "The first half of the answer, which the client already has, ends here: "
REST = "and the second half follows."


def test_a_short_preamble_before_the_anchor_is_dropped_with_it() -> None:
    anchor = anchor_of(HAD)
    assert splice(HAD, ["Sure, continuing: ", anchor, " ", REST]) == (REST, True)


def test_a_longer_repeat_than_asked_for_is_dropped_whole() -> None:
    """The model repeats its last sentence and more, the anchor past the lead: all of it is the
    client's text, so all of it goes."""
    had = SAMPLES["prose"][:300]
    longer = had[-140:].replace(" ", "\n", 3)
    assert anchor_of(had) in longer and longer.index(anchor_of(had)) > LEAD
    assert splice(had, [longer, SAMPLES["prose"][300:]]) == (SAMPLES["prose"][300:], True)


def test_an_anchor_past_the_lead_is_not_the_repeat_asked_for() -> None:
    """Control of the one above: the same anchor after a long preamble fails the attempt (neither
    dropping the preamble nor showing the anchor again would be right)."""
    anchor = anchor_of(HAD)
    got, held = splice(HAD, ["x" * (LEAD + 1) + " " + anchor + " " + REST])
    assert not held and got == ""


def test_a_restart_that_departs_from_the_clients_text_fails() -> None:
    """A reply that repeats the client's text from its start and then departs (a restart that sampled
    differently) can be neither dropped nor shown."""
    assert splice(HAD, [HAD[:40], "but then something else entirely, at length."]) == ("", False)
    assert splice(HAD, [HAD, REST]) == (REST, True)  # control: the whole of it repeated, then new


def test_a_reply_ending_inside_the_clients_text_fails() -> None:
    assert splice(HAD, [HAD[:30]]) == ("", False)


def test_the_head_held_is_bounded() -> None:
    """A reply that shows no anchor is decided once a bounded head of it came: the rest streams on."""
    seam = Seam(HAD, anchor_of(HAD))
    new = "Completely new text, nothing like what came before; " * 8
    shown = [seam.feed(c) for c in new]
    assert "".join(s or "" for s in shown) == new
    first = next(i for i, s in enumerate(shown) if s)
    assert first < LEAD + 2 * len(anchor_of(HAD)) + len(" ") + 16


def test_the_clients_trailing_whitespace_is_not_written_twice() -> None:
    had = "Indented:\n    "
    assert splice(had, ["Indented:\n    ", "x = 1\n"]) == ("x = 1\n", True)
    assert splice(had, ["Indented:", "\n    x = 1\n"]) == ("x = 1\n", True)


def test_an_empty_reply_adds_nothing() -> None:
    assert splice(HAD, []) == ("", True)


def test_anchor_of_starts_at_a_word_or_a_grapheme_cluster() -> None:
    assert anchor_of("short answer  ") == "short answer"
    anchor = anchor_of(SAMPLES["prose"][:200])
    assert 20 <= len(anchor) <= 60
    assert SAMPLES["prose"][:200].endswith(anchor) and SAMPLES["prose"][199 - len(anchor)].isspace()
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    text = family * 30
    anchor = anchor_of(text)
    assert text.endswith(anchor) and is_grapheme_boundary(text, len(text) - len(anchor))
    assert anchor.startswith("\U0001f468")


@pytest.mark.parametrize(
    ("head", "expected"),
    [("over jumps fox brown quick the", True), ("and then a cat came along the road", False)],
)
def test_resembles(head: str, expected: bool) -> None:
    assert resembles("the quick brown fox jumps over", head) is expected


@pytest.mark.slow
def test_every_cut_point_one_character_at_a_time() -> None:
    """The figures docs/recovery.md states for every cut point: each code point from FIRST_CUT to the
    end of each text, the reply fed one character at a time."""
    counts: Counter[tuple[str, str]] = Counter()
    for text in SAMPLES.values():
        for cut in range(FIRST_CUT, len(text) + 1):
            had = text[:cut]
            for behaviour in BEHAVIOURS:
                chunks = list(reply(behaviour, text, had, anchor_of(had))) or [""]
                counts[behaviour, outcome(behaviour, text, cut, chunks)] += 1
    assert counts == {
        ("exact", "exact"): 1150,
        ("whitespace", "exact"): 1150,
        ("skip", "exact"): 1150,
        ("restart", "exact"): 1150,
        ("paraphrase", "failed, nothing shown"): 1150,
        ("reword", "exact"): 251,
        ("reword", "failed, nothing shown"): 899,
    }


@settings(max_examples=examples(200), deadline=None)
@given(
    dialect=st.sampled_from(["openai", "anthropic"]),
    name=st.sampled_from(sorted(SAMPLES)),
    where=st.floats(0, 1),
    behaviour=st.sampled_from(BEHAVIOURS),
    size=st.integers(1, 300),
)
def test_the_client_stream_under_any_cut_and_chunking(
    dialect: str, name: str, where: float, behaviour: str, size: int
) -> None:
    """Through the Recoverer, as the client's SDK reads it: one answer, whole, under its first id (its
    blocks balanced, one text block), or exactly the text the client had and the first failure."""
    text = SAMPLES[name]
    parts = pieces(text)
    lowest = next(i for i in range(len(parts)) if len("".join(parts[:i])) >= FIRST_CUT)
    cut = lowest + int(where * (len(parts) - 1 - lowest))
    events = chat_events if dialect == "openai" else anthropic_events
    skip = 1 if dialect == "openai" else 3  # the events before the first text
    recoverer = Recoverer("continue", 1, 0.25, body="anchor")
    out: list[bytes] = []

    def pump(run: list[bytes]) -> Failure | None:
        raw = b"".join(run)
        for i in range(0, len(raw), size):
            got, failure = recoverer.feed(raw[i : i + size])
            out.extend(got)
            if failure is not None:
                return failure
        return recoverer.end()

    failure = pump(events(parts)[: skip + cut])
    assert failure is not None
    decision = recoverer.fail(failure, json.dumps({"model": "m", "messages": [{"role": "user"}]}).encode())
    assert isinstance(decision, Retry)
    had = "".join(parts[:cut])
    failure = pump(events(pieces(reply(behaviour, text, had, anchor_of(had))), "rerun"))
    if failure is not None:
        final = recoverer.fail(failure, b"{}")
        assert isinstance(final, GiveUp)
        out.append(final.failure.ending or b"")
    if dialect == "openai":
        got = chat_read(b"".join(out))
        assert got["ids"] == {"chatcmpl-1"} and got["roles"] == 1
    else:
        got = anthropic_read(b"".join(out))
        assert (got["ids"] == ["msg_1"] and set(got["indices"]) <= {0} and not got["open"]) or failure
    if behaviour == "paraphrase" or (behaviour == "reword" and failure is not None):
        assert failure is not None and got["text"] == had
    else:
        assert failure is None and got["text"] == text
