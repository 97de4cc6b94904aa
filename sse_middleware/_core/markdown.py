"""Where a buffered LLM text may be cut without the reader seeing the seam.

The coalescer sends a prefix of its buffer and keeps the rest; what the client renders until the next
frame ends exactly there. Half a code fence turns the rest of the page into code, half an emoji shows two
glyphs, a lone ``**`` shows literal stars. This module ranks cut points so the coalescer can pick the least
visible one. Sans-I/O: pure functions plus one small state object describing the text already *sent*
(a blank line inside a fence is code, not a paragraph break, and the buffer alone cannot tell).
Never cutting inside a grapheme cluster is :mod:`.graphemes`' job; its two functions are re-exported here.
"""

from __future__ import annotations

import re

from .graphemes import GraphemeState, complete_end, is_grapheme_boundary

__all__ = ["MarkdownState", "best_cut", "complete_end", "is_grapheme_boundary"]

_MARKERS = "`~$|*_\\"  # inline/block markup whose half, shown alone, renders as a literal glyph
_LINE_CAP = 256  # chars of an unfinished emitted line kept for classifying it (bounded memory)
_CJK = "\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff"
# Cut points are searched right to left in C (str.rfind, or re over a reversed copy), never with a
# Python loop per character; a needle the text does not hold at all costs one ``in`` test, no search.
# Wide (non-ASCII) needles are only tried when the text is not ASCII.
_SENTENCE_ENDS = (". ", "! ", "? ")  # few needles: each costs an rfind (a quoted end still cuts at its space)
_SENTENCE_WIDE = (*_SENTENCE_ENDS, "\u3002", "\uff01", "\uff1f")
_SPACES, _SPACES_WIDE = (" ", "\t"), (" ", "\t", "\u3000")
_CJK_REV = re.compile(f"[{_CJK}]")
_HEADING = re.compile(r"#{1,6}(?:[ \t]|$)")


def _classify(line: str, fence: str, math: bool, table: bool) -> tuple[bool, str, bool, bool]:
    """One complete line: (does it end a block?, fence, math, table) after it. Fences may be indented
    (LLMs nest them in list items); a closing fence needs the same char and at least the same length."""
    s = line.strip(" \t\r")
    if fence:
        closed = s.startswith(fence) and not s.lstrip(fence[0])
        return closed, "" if closed else fence, False, False
    if math:
        closed = s.endswith(("$$", "\\]"))
        return closed, "", not closed, False
    if not s:
        return True, "", False, False  # blank line: end of paragraph, list, table
    c = s[0]
    if c in "`~":
        k = len(s) - len(s.lstrip(c))
        if k >= 3 and not (c == "`" and "`" in s[k:]):
            return False, c * k, False, False
    if s.startswith(("$$", "\\[")):
        one_line = len(s) > 2 and s.endswith(("$$", "\\]"))
        return one_line, "", not one_line, False
    if c == "|" or (table and "|" in s):
        return True, "", False, True  # end of a table row
    return bool(c == "#" and _HEADING.match(s)), "", False, False


def _walk(
    head: str, segs: list[str], fence: str, math: bool, table: bool, lo: int
) -> tuple[int, int, str, bool, bool]:
    """Classify the complete lines of ``segs`` (the buffer split at LF; ``head`` is the emitted start of
    the first line). Returns the rightmost block-end cut and newline cut at or after ``lo`` (0 = none)."""
    block = newline = pos = 0
    for k in range(len(segs) - 1):
        seg = segs[k]
        line = head + seg if k == 0 else seg
        pos += len(seg) + 1
        if fence and fence[0] not in line:
            end = False  # fast path: a code line that cannot close the fence
        elif not (fence or math) and line[:1] == "|":
            end = table = True  # fast path: a table row
        elif not (fence or math or table) and line[:1].isalpha():
            end = False  # fast path: a prose line
        else:
            end, fence, math, table = _classify(line, fence, math, table)
        if pos >= lo:
            newline = pos
            if end:
                block = pos
    return block, newline, fence, math, table


class MarkdownState(GraphemeState):
    """Block context of the text already *emitted* on one stream: open fence (char and length), open
    display-math block, table, the unfinished current line (bounded), and (inherited) the grapheme
    context at the seam. :meth:`advance` is O(len(text))."""

    __slots__ = ("_fence", "_line", "_math", "_table")

    def __init__(self) -> None:
        super().__init__()
        self._fence = ""
        self._math = self._table = False
        self._line = ""

    @property
    def block(self) -> tuple[str, bool, bool]:
        """What the next line continues: (open fence marker such as ``"```"`` or ``""``, inside display
        math, inside a table)."""
        return self._fence, self._math, self._table

    def advance(self, text: str) -> None:
        """Record that ``text`` was sent to the client."""
        if not text:
            return
        if "\n" not in text:
            if len(self._line) < _LINE_CAP:
                self._line = (self._line + text)[:_LINE_CAP]
        else:
            segs = text.split("\n")
            _, _, self._fence, self._math, self._table = _walk(
                self._line, segs, self._fence, self._math, self._table, len(text) + 1
            )
            self._line = segs[-1][:_LINE_CAP]
        if text[-1] < "\x7f":  # GraphemeState.advance's own first test, without the call
            self._ri_odd, self._pict = 0, False
        else:
            super().advance(text)


def _hold_from(text: str, state: MarkdownState, line_start: int, fence: str, math: bool) -> int:
    """Where a trailing unfinished construct starts: a partial grapheme, a run of markers, a fence line
    being typed, a ``[..](`` link in progress. Cutting at or before it keeps it whole for the next frame.
    Only the last line is inspected, so this is O(line), never O(buffer)."""
    h, last = len(text), text[-1]
    if last >= "\x7f":  # an ASCII end is complete_end's own first test, done here without the call
        h = complete_end(text, state)
    elif last == "\r":
        h -= 1
    if h <= line_start:
        return h
    tail = text[line_start:h]
    line = state._line + tail if line_start == 0 else tail  # the whole last line, as the reader has it
    if fence:  # inside code only a closing fence being typed matters; markers are literal
        s = line.lstrip(" \t")
        return line_start if s and not s.rstrip(" \t\r").strip(fence[0]) else h
    i = h
    while i > line_start and text[i - 1] in ("$\\" if math else _MARKERS):
        i -= 1
    if math:
        return i
    if i < h:
        run = text[i:h]
        if run[0] in "`*_~" and run == run[0] * len(run):
            s = line.lstrip(" \t")
            if s[: len(s) - len(run)].count(run) % 2:
                i = h  # the run closes an open span of the same length (``**bold**``, `` `code` ``): complete
    if ("`" in line or "~" in line) and line.lstrip(" \t").startswith(("```", "~~~")):
        return line_start
    lb = text.rfind("[", line_start, i) if "[" in tail else -1
    if lb >= 0:
        rb = text.find("]", lb, i)
        if rb < 0 or rb == i - 1 or (text.startswith("(", rb + 1) and text.find(")", rb + 2, i) < 0):
            i = lb - 1 if lb > line_start and text[lb - 1] == "!" else lb
    return i


def _after_needle(text: str, needles: tuple[str, ...], lo: int, hi: int, state: MarkdownState) -> int:
    """Rightmost cut in [lo, hi] right after one of ``needles`` that is a grapheme boundary, or 0."""
    while hi >= lo:
        p = 0
        for s in needles:
            if s in text:
                k = len(s)
                i = text.rfind(s, lo - k if lo > k else 0, hi)
                if i >= 0 and i + k > p:
                    p = i + k
        # Every needle ends in a space or CJK punctuation: an ASCII character after it starts a cluster.
        if not p or p == len(text) or text[p] < "\x7f" or is_grapheme_boundary(text, p, state):
            return p
        hi = p - 1
    return 0


def _next_to_cjk(text: str, lo: int, hi: int, state: MarkdownState) -> int:
    """Rightmost cut in [lo, hi] after a CJK character, or before one at ``hi`` (each is a word), or 0."""
    while hi >= lo:
        end = min(hi + 1, len(text))
        m = _CJK_REV.search(text[lo - 1 : end][::-1])  # reversed: the first match is the rightmost
        if m is None:
            return 0
        p = min(end - m.start(), hi)
        if p < lo:
            return 0
        if is_grapheme_boundary(text, p, state):
            return p
        hi = p - 1
    return 0


def best_cut(text: str, state: MarkdownState, lo: int = 1, *, respect_markers: bool = True) -> int:
    """Best index in [lo, len(text)] to cut ``text`` (to be sent after ``state``), or 0 if none.

    Best first: end of a completed block (closing fence or ``$$`` line, blank line, table row, heading),
    any newline, sentence end, whitespace, next to a CJK character (CJK has no spaces), any grapheme
    boundary. Within a rank the rightmost wins, so as much as possible goes out. Never inside a grapheme
    cluster or a CRLF, never after a trailing unfinished marker unless ``respect_markers`` is False (the
    coalescer's fallback when a deadline leaves no better choice).
    """
    n = len(text)
    if lo < 1:
        lo = 1
    if lo > n:
        return 0
    fence, math = state._fence, state._math
    line_start = 0
    if "\n" in text:
        segs = text.split("\n")
        block, newline, fence, math, _ = _walk(state._line, segs, fence, math, state._table, lo)
        if block or newline:  # newlines lie before the last line, hence before any hold
            return block or newline
        line_start = n - len(segs[-1])
    hi = _hold_from(text, state, line_start, fence, math) if respect_markers else complete_end(text, state)
    if hi < lo:
        return 0
    wide = not text.isascii()
    p = (
        _after_needle(text, _SENTENCE_WIDE if wide else _SENTENCE_ENDS, lo, hi, state)
        or _after_needle(text, _SPACES_WIDE if wide else _SPACES, lo, hi, state)
        or (wide and _next_to_cjk(text, lo, hi, state))
    )
    if p:
        return p
    for p in range(hi, lo - 1, -1):
        if is_grapheme_boundary(text, p, state) and not (
            p < n and text[p] in _MARKERS and text[p - 1] in _MARKERS
        ):
            return p
    return 0
