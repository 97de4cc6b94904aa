"""Where a buffered LLM text may be cut without the reader seeing the seam.

The coalescer sends a prefix of its buffer and keeps the rest; what the client renders until the next
frame ends exactly there. Half a code fence turns the rest of the page into code, half an emoji shows two
glyphs, a lone ``**`` shows literal stars. This module ranks cut points so the coalescer can pick the least
visible one. Sans-I/O: pure functions plus one small state object describing the text already *sent*
(a blank line inside a fence is code, not a paragraph break, and the buffer alone cannot tell).

Grapheme clusters follow UAX #29 (GB3-GB13 and GB9c) using only ``unicodedata``. The table-driven parts we
cannot derive from it (Extended_Pictographic, Prepend, Indic linkers) are short literal lists; where we
approximate (every ``Mc`` counts as SpacingMark) we err towards *not* cutting, which is the safe side.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from functools import lru_cache

__all__ = ["MarkdownState", "best_cut", "complete_end", "is_grapheme_boundary"]

# Grapheme_Cluster_Break values (UAX #29), with PICT standing for Extended_Pictographic.
_OTHER, _CR, _LF, _CONTROL, _EXTEND, _ZWJ, _RI, _PREPEND, _SPACING, _L, _V, _T, _LV, _LVT, _PICT = range(15)


def _ranges(spec: str) -> list[tuple[int, int]]:
    """Parse ``"A9 2194-2199 ..."`` (hex code points and ranges): Unicode tables stay short and diffable."""
    return [(int(r.partition("-")[0], 16), int(r.rpartition("-")[2], 16)) for r in spec.split()]


_PREPENDS = frozenset(
    cp
    for lo, hi in _ranges(
        "600-605 6DD 70F 890-891 8E2 D4E 110BD 110CD 111C2-111C3 1193F 11941 11A3A 11A84-11A89 11D46"
    )
    for cp in range(lo, hi + 1)
)
_LINKERS = frozenset([0x94D, 0x9CD, 0xACD, 0xB4D, 0xC4D, 0xD4D])  # InCB=Linker viramas (GB9c)
# Extended_Pictographic (emoji-data.txt). In the SMP the whole emoji area counts: flags (RI) and skin
# tones (Extend) are classified before this table is consulted, and extra symbols only mean fewer cuts.
_PICT_RANGES = _ranges(
    "A9 AE 203C 2049 2122 2139 2194-2199 21A9-21AA 231A-231B 2328 2388 23CF 23E9-23F3 23F8-23FA 24C2 "
    "25AA-25AB 25B6 25C0 25FB-25FE 2600-2605 2607-2612 2614-2685 2690-2705 2708-2712 2714 2716 271D "
    "2721 2728 2733-2734 2744 2747 274C 274E 2753-2755 2757 2763-2767 2795-2797 27A1 27B0 27BF "
    "2934-2935 2B05-2B07 2B1B-2B1C 2B50 2B55 3030 303D 3297 3299 1F000-1FAFF 1FC00-1FFFD"
)
_PICT_LO = [lo for lo, _ in _PICT_RANGES]
_MARKERS = "`~$|*_\\"  # inline/block markup whose half, shown alone, renders as a literal glyph
_LINE_CAP = 256  # chars of an unfinished emitted line kept for classifying it (bounded memory)
_CJK = "\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff"
# Cut points are searched right to left in C (str.rfind, or re over a reversed copy), never with a
# Python loop per character. Wide (non-ASCII) needles are only tried when the text is not ASCII.
_SENTENCE_ENDS = (". ", "! ", "? ")  # few needles: each costs an rfind (a quoted end still cuts at its space)
_SENTENCE_WIDE = (*_SENTENCE_ENDS, "\u3002", "\uff01", "\uff1f")
_SPACES, _SPACES_WIDE = (" ", "\t"), (" ", "\t", "\u3000")
_CJK_REV = re.compile(f"[{_CJK}]")
_RI_RUN = re.compile("[\U0001f1e6-\U0001f1ff]*")
_HEADING = re.compile(r"#{1,6}(?:[ \t]|$)")


@lru_cache(maxsize=4096)
def _gcb(ch: str) -> int:
    """Grapheme_Cluster_Break class of one code point (cached: real text reuses few of them)."""
    cp = ord(ch)
    if cp < 0x7F:
        return _CR if cp == 13 else _LF if cp == 10 else _CONTROL if cp < 0x20 else _OTHER
    if cp == 0x200D:
        return _ZWJ
    if 0x1F1E6 <= cp <= 0x1F1FF:
        return _RI
    if 0x1100 <= cp <= 0x11FF:
        return _L if cp < 0x1160 else _V if cp < 0x11A8 else _T
    if 0xA960 <= cp <= 0xA97C:
        return _L
    if 0xD7B0 <= cp <= 0xD7FB:
        return _V if cp < 0xD7CB else _T
    if 0xAC00 <= cp <= 0xD7A3:
        return _LVT if (cp - 0xAC00) % 28 else _LV
    if cp in _PREPENDS:
        return _PREPEND
    if cp == 0x200C or 0xFF9E <= cp <= 0xFF9F or 0x1F3FB <= cp <= 0x1F3FF or 0xE0020 <= cp <= 0xE007F:
        return _EXTEND  # ZWNJ, halfwidth kana voicing, skin tones, emoji tag sequences
    cat = unicodedata.category(ch)
    if cat in ("Mn", "Me"):
        return _EXTEND
    if cat == "Mc" or cp in (0xE33, 0xEB3):
        return _SPACING
    if cat in ("Cc", "Cf", "Zl", "Zp", "Cs"):
        return _CONTROL
    i = bisect_right(_PICT_LO, cp) - 1
    return _PICT if i >= 0 and cp <= _PICT_RANGES[i][1] else _OTHER


def _ri_run(text: str, j: int, state: MarkdownState | None) -> int:
    """Regional indicators ending at ``text[j]``, counted from the start of the run (even across emits)."""
    if not "\U0001f1e6" <= text[j] <= "\U0001f1ff":
        return 0
    m = _RI_RUN.match(text[j::-1])  # reversed copy: the run is measured in C, however long
    k = m.end() if m else 0
    return k + (state._ri_odd if k > j and state is not None else 0)


def is_grapheme_boundary(text: str, i: int, state: MarkdownState | None = None) -> bool:
    """Whether ``text[:i]`` / ``text[i:]`` splits no grapheme cluster (UAX #29). Both ends count as
    boundaries; whether the *last* cluster is complete is :func:`complete_end`'s question."""
    if i <= 0 or i >= len(text):
        return True
    a, b = text[i - 1], text[i]
    if a < "\x7f" and b < "\x7f":
        return a != "\r" or b != "\n"
    ca, cb = _gcb(a), _gcb(b)
    if ca == _CR:
        return cb != _LF
    if ca in (_CONTROL, _LF) or cb in (_CONTROL, _CR, _LF):
        return True
    if cb in (_EXTEND, _ZWJ, _SPACING) or ca == _PREPEND:
        return False
    if ca == _L:
        return cb not in (_L, _V, _LV, _LVT)
    if ca in (_LV, _V):
        return cb not in (_V, _T)
    if ca in (_LVT, _T):
        return cb != _T
    if ca == _RI:
        return cb != _RI or _ri_run(text, i - 1, state) % 2 == 0
    if ca == _ZWJ and cb == _PICT:  # GB11: ExtPict Extend* ZWJ x ExtPict
        k = i - 2
        while k >= 0 and _gcb(text[k]) == _EXTEND:
            k -= 1
        if k < 0:
            return not (state is not None and state._pict)
        return _gcb(text[k]) != _PICT
    if ca in (_EXTEND, _ZWJ) and cb == _OTHER:  # GB9c: consonant linker x consonant (same script)
        k, linker = i - 1, 0
        while k >= 0 and _gcb(text[k]) in (_EXTEND, _ZWJ):
            linker = linker or (ord(text[k]) if ord(text[k]) in _LINKERS else 0)
            k -= 1
        if linker and ord(b) >> 7 == linker >> 7 and unicodedata.category(b) == "Lo":
            return False
    return True


def complete_end(text: str, state: MarkdownState | None = None) -> int:
    """End of the complete grapheme clusters: ``len(text)`` unless the text ends in a cluster that needs
    a follower (a ZWJ, an unpaired flag letter, a CR before its LF, a Prepend, a linker, a leading jamo);
    then the start of that cluster. Holding just that tail is what keeps emoji and CRLF whole."""
    n = len(text)
    if not n:
        return 0
    last = text[-1]
    if last < "\x7f":
        return n - 1 if last == "\r" else n
    c = _gcb(last)
    pending = c in (_ZWJ, _PREPEND, _L) or (c == _EXTEND and ord(last) in _LINKERS)
    if not (pending or (c == _RI and _ri_run(text, n - 1, state) % 2)):
        return n
    j = n - 1
    while j > 0 and not is_grapheme_boundary(text, j, state):
        j -= 1
    return j


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


class MarkdownState:
    """Block context of the text already *emitted* on one stream: open fence (char and length), open
    display-math block, table, the unfinished current line (bounded), and the grapheme context at the
    seam (flag-letter parity, pictograph before a ZWJ). :meth:`advance` is O(len(text))."""

    __slots__ = ("_fence", "_line", "_math", "_pict", "_ri_odd", "_table")

    def __init__(self) -> None:
        self._fence = ""
        self._math = self._table = self._pict = False
        self._ri_odd = 0
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
        segs = text.split("\n")
        if len(segs) == 1:
            self._line += text[: _LINE_CAP - len(self._line)]
        else:
            _, _, self._fence, self._math, self._table = _walk(
                self._line, segs, self._fence, self._math, self._table, len(text) + 1
            )
            self._line = segs[-1][:_LINE_CAP]
        if text[-1] < "\x7f":
            self._ri_odd, self._pict = 0, False
            return
        self._ri_odd = _ri_run(text, len(text) - 1, self) % 2
        k = len(text) - 1
        while k >= 0 and _gcb(text[k]) == _EXTEND:
            k -= 1
        if k >= 0:
            self._pict = _gcb(text[k]) == _PICT


def _hold_from(text: str, state: MarkdownState, line_start: int, fence: str, math: bool) -> int:
    """Where a trailing unfinished construct starts: a partial grapheme, a run of markers, a fence line
    being typed, a ``[..](`` link in progress. Cutting at or before it keeps it whole for the next frame.
    Only the last line is inspected, so this is O(line), never O(buffer)."""
    h = complete_end(text, state)
    if h <= line_start:
        return h
    s = ((state._line if line_start == 0 else "") + text[line_start:h]).lstrip(" \t")
    if fence:  # inside code only a closing fence being typed matters; markers are literal
        return line_start if s and not s.rstrip(" \t\r").strip(fence[0]) else h
    i = h
    while i > line_start and text[i - 1] in ("$\\" if math else _MARKERS):
        i -= 1
    if math:
        return i
    run = text[i:h]
    if run and run[0] in "`*_~" and run == run[0] * len(run) and s[: len(s) - len(run)].count(run) % 2:
        i = h  # the run closes an open span of the same length (``**bold**``, `` `code` ``): complete
    if s.startswith(("```", "~~~")):
        return line_start
    lb = text.rfind("[", line_start, i)
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
            i = text.rfind(s, max(lo - len(s), 0), hi)
            if i >= 0 and i + len(s) > p:
                p = i + len(s)
        if not p or is_grapheme_boundary(text, p, state):
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
    lo = max(lo, 1)
    if lo > n:
        return 0
    segs = text.split("\n")
    fence, math = state._fence, state._math
    if len(segs) > 1:
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
