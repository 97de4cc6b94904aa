"""Grapheme cluster boundaries (UAX #29), so a cut never splits what the reader sees as one character.

Half an emoji shows two glyphs, half a CRLF shows a stray line, a flag split between frames shows two
letters. This module answers only "may text be cut here?". It does that for a text that continues
text already sent, so it also keeps the little context the seam needs (:class:`GraphemeState`).
Sans-I/O, stdlib only.

Rules GB3-GB13 and GB9c use only ``unicodedata``. The table-driven parts we cannot derive from it
(Extended_Pictographic, Prepend, Indic linkers) are short literal lists. Where we approximate (every ``Mc``
counts as SpacingMark) we err towards *not* cutting, which is the safe side.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from functools import lru_cache

__all__ = ["GraphemeState", "complete_end", "is_grapheme_boundary"]

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
_RI_RUN = re.compile("[\U0001f1e6-\U0001f1ff]*")


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


class GraphemeState:
    """The grapheme context at the end of the text already sent: the parity of a trailing run of flag
    letters, and whether a pictograph precedes a trailing ZWJ. The seam alone cannot tell whether the
    next flag letter pairs up or the next emoji joins. Two fields, whatever was sent before."""

    __slots__ = ("_pict", "_ri_odd")

    def __init__(self) -> None:
        self._pict = False
        self._ri_odd = 0

    def advance(self, text: str) -> None:
        """Record that ``text`` was sent to the client."""
        if not text:
            return
        if text[-1] < "\x7f":
            self._ri_odd, self._pict = 0, False
            return
        self._ri_odd = _ri_run(text, len(text) - 1, self) % 2
        k = len(text) - 1
        while k >= 0 and _gcb(text[k]) == _EXTEND:
            k -= 1
        if k >= 0:
            self._pict = _gcb(text[k]) == _PICT


def _ri_run(text: str, j: int, state: GraphemeState | None) -> int:
    """Regional indicators ending at ``text[j]``, counted from the start of the run (even across emits)."""
    if not "\U0001f1e6" <= text[j] <= "\U0001f1ff":
        return 0
    m = _RI_RUN.match(text[j::-1])  # reversed copy: the run is measured in C, however long
    k = m.end() if m else 0
    return k + (state._ri_odd if k > j and state is not None else 0)


def is_grapheme_boundary(text: str, i: int, state: GraphemeState | None = None) -> bool:
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


def complete_end(text: str, state: GraphemeState | None = None) -> int:
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
