"""Cut points in buffered markdown: one unit test per rule, plus properties over known grapheme clusters.

The grapheme reference is independent of the implementation: text is built from clusters that are
complete by UAX #29 and cannot merge with their neighbours, so the true boundaries are exactly the joins.
"""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sse_middleware._core.markdown import MarkdownState, best_cut, complete_end, is_grapheme_boundary

from ..support.text_samples import CLUSTERS, FAMILY, SIMPLE, US

ATOMS = CLUSTERS + SIMPLE
# Multi-character simple atoms ("```", ". ") hold several clusters: split them so joins() sees them all.
atoms = st.lists(st.sampled_from(ATOMS), min_size=1, max_size=40).map(
    lambda ps: [q for p in ps for q in ([p] if p in CLUSTERS else list(p))]
)
# Prose on one line (a newline would outrank every later rank), each example from a few of these atoms
# only, so that some have no sentence end, some no space, some no CJK: each rank gets its turn.
PROSE = ["ab", "Z", " ", ". ", "! ", ".", "\t", "\u4f60", "\u3002", "**", "`", "|", "e\u0301", FAMILY]
prose = (
    st.lists(st.sampled_from(PROSE), min_size=1, max_size=4, unique=True)
    .flatmap(lambda alphabet: st.lists(st.sampled_from(alphabet), min_size=1, max_size=20))
    .map(lambda ps: [q for p in ps for q in ([p] if p in CLUSTERS else list(p))])
)


def joins(parts: list[str]) -> set[int]:
    return set(itertools.accumulate(len(p) for p in parts))


def cut(text: str, *emitted: str, lo: int = 1, **kw: bool) -> tuple[str, str]:
    state = MarkdownState()
    for e in emitted:
        state.advance(e)
    p = best_cut(text, state, lo, **kw)
    return text[:p], text[p:]


# --- graphemes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_no_boundary_inside_a_cluster(cluster: str) -> None:
    assert not any(is_grapheme_boundary(cluster, i) for i in range(1, len(cluster)))
    assert complete_end(cluster) == len(cluster)
    assert best_cut(cluster, MarkdownState()) in (0, len(cluster))


@given(atoms)
def test_boundaries_are_exactly_the_joins(parts: list[str]) -> None:
    text, ends = "".join(parts), joins(parts)
    assert {i for i in range(1, len(text)) if is_grapheme_boundary(text, i)} == ends - {len(text)}
    assert complete_end(text) == len(text)


# CJK, written without spaces between words, as the markdown module's own ranges (BMP part) say it.
CJK = "[\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]"
MARKERS = "`~$|*_\\"  # markup whose two halves are never cut apart by the last-resort rank


def between_markers(text: str, at: int) -> bool:
    return 0 < at < len(text) and text[at] in MARKERS and text[at - 1] in MARKERS


def expected_free_cut(text: str, lo: int, ends: set[int]) -> int | set[int]:
    """The cut ``best_cut(..., respect_markers=False)`` must choose in text built from whole atoms (so
    every join is a grapheme boundary and the text is complete): the rightmost cut of the best rank that
    has one, written out rank by rank. Block ends are newlines whose rank needs the markdown context: for
    them the answer is the set of newline cuts, any of which may be the block end."""
    lo, n = max(lo, 1), len(text)
    newlines = {i + 1 for i, c in enumerate(text) if c == "\n" and i + 1 >= lo}
    if newlines:
        return newlines
    ranks = [
        {i + 2 for i in range(n - 1) if text[i : i + 2] in (". ", "! ", "? ")}
        | {i + 1 for i, c in enumerate(text) if c in "\u3002\uff01\uff1f"},
        {i + 1 for i, c in enumerate(text) if c in " \t\u3000"},
        {i + 1 for i, c in enumerate(text) if re.match(CJK, c)},
        {at for at in ends if not between_markers(text, at)},
    ]
    for cuts in ranks:
        allowed = {at for at in cuts if lo <= at <= n}
        if allowed:
            return max(allowed)
    return 0


@given(atoms, atoms | prose, st.integers(0, 60))
def test_best_cut_is_the_rightmost_of_the_best_rank(sent: list[str], parts: list[str], lo: int) -> None:
    state = MarkdownState()
    state.advance("".join(sent))
    text = "".join(parts)
    free = best_cut(text, state, lo, respect_markers=False)
    expected = expected_free_cut(text, lo, joins(parts))
    assert free in expected if isinstance(expected, set) else free == expected
    held = best_cut(text, state, lo)
    assert held == 0 or (max(lo, 1) <= held <= free and held in joins(parts))
    # Holding a trailing marker changes nothing when the text ends in plain text outside any link,
    # fence line or marker run.
    last_line = ("".join(sent) + text).split("\n")[-1].lstrip(" \t")
    plain_end = text[-1] in "abZ.\u4f60\u597d\u3002\uff01\uac00"
    if plain_end and "[" not in last_line and not last_line.startswith(("```", "~~~")):
        assert held == free


TRICKY = "ab .\n\r\t*`$|[](~_\u200d\u0301\ufe0f\U0001f1fa\U0001f468\u4f60\u3002\u0600\u094d\u0915\u1100\u1161"


@given(st.text(alphabet=TRICKY, max_size=60), st.text(alphabet=TRICKY, max_size=10), st.integers(0, 70))
def test_best_cut_on_arbitrary_text(text: str, sent: str, lo: int) -> None:
    state = MarkdownState()
    state.advance(sent)
    end = complete_end(text, state)
    cuts = {}
    for markers in (True, False):
        p = cuts[markers] = best_cut(text, state, lo, respect_markers=markers)
        assert p == 0 or max(lo, 1) <= p <= end <= len(text)
        assert is_grapheme_boundary(text, p, state)
        assert not (0 < p < len(text) and text[p - 1] == "\r" and text[p] == "\n")  # never inside CRLF
    # Without the marker hold a cut is found whenever one is allowed, and holding only ever cuts earlier.
    allowed = [at for at in range(max(lo, 1), end + 1) if is_grapheme_boundary(text, at, state)]
    assert (cuts[False] != 0) == any(not between_markers(text, at) for at in allowed)
    assert cuts[True] <= cuts[False]


@given(st.text(alphabet=TRICKY, max_size=40), st.text(alphabet=TRICKY, max_size=10))
def test_a_cut_of_everything_is_the_end_unless_its_last_cluster_is_incomplete(text: str, sent: str) -> None:
    """The coalescer's shortcut, without a search, when every buffered character is overdue."""
    state = MarkdownState()
    state.advance(sent)
    n = len(text)
    searched = best_cut(text, state, n) or best_cut(text, state, n, respect_markers=False)
    assert searched == (n if complete_end(text, state) == n else 0)


def test_regional_indicators_pair_from_the_start_of_the_run() -> None:
    u, s, f, r = "\U0001f1fa\U0001f1f8\U0001f1eb\U0001f1f7"
    text = u + s + f + r
    assert [is_grapheme_boundary(text, i) for i in range(1, 4)] == [False, True, False]
    assert complete_end(text) == 4 and complete_end(text[:3]) == 2
    state = MarkdownState()
    state.advance("x " + u)  # an unpaired letter already went out: the seam shifts the pairing
    assert [is_grapheme_boundary(s + f + r, i, state) for i in range(1, 3)] == [True, False]
    assert complete_end(s + f + r, state) == 3
    assert complete_end(s + f, state) == 1


def test_zwj_sequence_across_the_seam() -> None:
    state = MarkdownState()
    state.advance("hi \U0001f468")
    assert not is_grapheme_boundary("\u200d\U0001f469 x", 1, state)
    assert is_grapheme_boundary("\u200d\U0001f469 x", 1, MarkdownState())  # no pictograph before it


@pytest.mark.parametrize(
    ("text", "end"),
    [
        ("ok " + FAMILY[:2], 3),  # trailing ZWJ: the family is not finished
        ("ok \U0001f1fa", 3),  # unpaired flag letter
        ("ok " + US, 5),
        ("ok\r", 2),  # CR may be half of a CRLF
        ("ok\r\n", 4),
        ("ok \u0600", 3),  # Prepend needs its base
        ("ok \u0915\u094d", 3),  # a linker waits for the next consonant
        ("ok \u1100", 3),  # leading jamo
        ("ok e\u0301", 5),
        ("", 0),
    ],
)
def test_complete_end(text: str, end: int) -> None:
    assert complete_end(text) == end


# --- cut ranking ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "emitted", "head"),
    [
        ("```py\nx = 1\n```\nafter\nmore", "", "```py\nx = 1\n```\n"),  # closing fence beats a newline
        ("code\n```\ntext\n\nmore", "```\n", "code\n```\ntext\n\n"),  # closes a fence opened earlier
        ("a\n~~~\nb\n", "~~~~\n", "a\n~~~\nb\n"),  # a shorter fence does not close: only newlines
        ("a\n\nb\nc d", "```\n", "a\n\nb\n"),  # blank line inside code is no block end
        ("a\n\nb\nc d", "", "a\n\n"),  # ... but outside it is
        ("x^2\n$$\nsum\nmore", "$$\n", "x^2\n$$\n"),  # closing $$
        ("a\n\\]\nb\nc", "\\[\n", "a\n\\]\n"),
        ("| a | b |\n| 1 | 2 |\nafter\nx", "", "| a | b |\n| 1 | 2 |\n"),  # end of a table row
        ("# Title\nbody\nmore", "", "# Title\n"),
        ("one\ntwo three", "", "one\n"),  # any newline beats a later space
        ("Hi there. How are you", "", "Hi there. "),  # sentence end
        ('He said "no." Then', "", 'He said "no." '),  # via the whitespace rank
        ("Yes. And \u201cno\u201d then", "", "Yes. "),  # a sentence end beats later whitespace
        ("Wow! Really? Yes", "", "Wow! Really? "),
        ("\u4f60\u597d\u3002\u4e16\u754c", "", "\u4f60\u597d\u3002"),  # CJK full stop
        ("Hello wor", "", "Hello "),  # whitespace
        ("\u4f60\u597d\u4e16\u754c", "", "\u4f60\u597d\u4e16\u754c"),  # between CJK characters
        ("\u4f60\u597dabc", "", "\u4f60\u597d"),  # next to CJK
        ("abcdef", "", "abcdef"),  # any grapheme boundary
        ("a\r\nb", "", "a\r\n"),
        ("ab\r", "", "ab"),  # never between CR and a possible LF
    ],
)
def test_rank(text: str, emitted: str, head: str) -> None:
    assert cut(text, emitted)[0] == head


@pytest.mark.parametrize(
    ("text", "head"),
    [
        ("say `", "say "),
        ("say ``", "say "),
        ("so ~", "so "),
        ("cost $", "cost "),
        ("| a |", "| a "),
        ("very **", "very "),
        ("snake_", "snake"),
        ("x\\", "x"),
        ("see [docs](http://ex", "see "),  # link in progress
        ("see ![img](http://ex", "see "),  # image in progress
        ("see [docs", "see "),
        ("see [the docs](http://ex", "see "),  # not at the space inside the link either
        ("see [the docs", "see "),
        ("see [docs]", "see "),  # a "(" may follow
        ("see [docs](u) and", "see [docs](u) "),  # complete link
        ("**bold**", "**bold**"),  # a closing run is complete
        ("`code`", "`code`"),
        ("```py", ""),  # fence line being typed
        ("\U0001f468\u200d", ""),
    ],
)
def test_trailing_partial_marker_is_not_split(text: str, head: str) -> None:
    assert cut(text)[0] == head


def test_inside_a_fence_markers_are_literal_but_a_closing_fence_is_held() -> None:
    assert cut("x=a*", "```\n")[0] == "x=a*"
    assert cut("x=a*")[0] == "x=a"
    assert cut("foo()\n``", "```\n")[0] == "foo()\n"
    assert cut("foo()\n`` x", "```\n")[0] == "foo()\n"  # newline still wins
    assert cut("``", "```\n", "foo()\n")[0] == ""
    assert cut("py x", "```")[0] == ""  # an opening fence line still being typed, its backticks sent


def test_lo_and_respect_markers() -> None:
    assert cut("a b c d", lo=5)[0] == "a b c "
    assert cut("a b c d", lo=7)[0] == "a b c d"
    assert cut("a b c d", lo=8)[0] == ""
    assert cut("Hello **", lo=7)[0] == ""
    assert cut("Hello **", lo=7, respect_markers=False)[0] == "Hello **"
    assert cut("ab**cd", lo=3)[0] == "ab**cd"
    assert cut("ab**", lo=3, respect_markers=False)[0] == "ab**"


def test_grapheme_fallback_never_splits() -> None:
    text = "x" + FAMILY + FAMILY
    assert cut(text, lo=2)[0] == text
    assert cut(text + "\u200d", lo=2)[0] == "x" + FAMILY
    assert cut("e\u0301e\u0301", lo=1)[0] == "e\u0301e\u0301"
    assert cut("a \u0301b")[0] == "a \u0301b"  # a space carrying a mark is no cut point


# --- state ---------------------------------------------------------------------------------------

BLOCK_LINES = [
    *("```py", "````", "~~~", "```", "  ```", " ~~~~ ", "a ``` b", "code `x`", "| a | b |", "x | y", "|x"),
    *("$$", "a $$", "x$$", "$$ x $$", "\\[", "\\]", "\\[ y \\]", "# H", "#nope", "", "  ", "text.", "**b**"),
]
DOC = st.lists(st.sampled_from(BLOCK_LINES), max_size=30).map("\n".join)


@given(DOC, st.lists(st.integers(0, 300), max_size=8))
def test_advance_is_chunking_independent(doc: str, cuts: list[int]) -> None:
    whole, chunked = MarkdownState(), MarkdownState()
    whole.advance(doc)
    bounds = sorted({0, len(doc), *(c for c in cuts if c <= len(doc))})
    for a, b in itertools.pairwise(bounds):
        chunked.advance(doc[a:b])
    for probe in ("a\n\nb\nc", "x\n```\ny z", "$$\nq r"):
        assert best_cut(probe, whole) == best_cut(probe, chunked)
    assert whole.block == chunked.block


def test_state_tracks_blocks() -> None:
    state = MarkdownState()
    state.advance("intro\n```python\nx = 1\n\n")
    assert state.block == ("```", False, False)
    state.advance("``` not a close\n```")
    assert state.block == ("```", False, False)  # the closing line is not finished yet
    state.advance("\n| a | b |\n")
    assert state.block == ("", False, True)
    state.advance("\n$$\n")
    assert state.block == ("", True, False)
    state.advance("x$$\n````md\n```\n")
    assert state.block == ("````", False, False)  # a shorter fence does not close a longer one


def test_unfinished_line_is_bounded() -> None:
    state = MarkdownState()
    state.advance("```" + "x" * 100_000)
    state.advance("y" * 10)
    assert len(state._line) <= 256
    state.advance("\n")
    assert state.block == ("```", False, False)  # classified by its (bounded) start
