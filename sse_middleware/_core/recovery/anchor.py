"""Continuation without prefill: the anchor a re-run is asked to repeat, and the seam that finds it.

An upstream that takes no assistant prefill (OpenAI's API, newer Claude models) can still continue an
answer: the re-run's request carries the client's text as an assistant turn and one short user turn
asking the model to go on, first repeating the last words it wrote (the *anchor*). The model's reply
then overlaps the client's text by the anchor, and :class:`Seam` cuts the overlap out of the reply as
it streams, holding at most a bounded head of it:

* the anchor (its whitespace runs matching any whitespace) found near the reply's start: it and what
  precedes it (a "Sure, continuing:", or more of the client's last words than were asked for) are
  dropped; the client's trailing whitespace, left out of the anchor, is dropped once more where the
  reply repeats it;
* the reply repeating the client's text from its start (a restart): exactly that text is dropped;
* a reply that shows no anchor and resembles neither it nor the answer's opening (the model went
  straight on): passed whole;
* a reply that resembles the anchor but never shows it (a paraphrase, a garbled repeat), one that
  resembles the answer's opening (a restart in other words), one that repeats the client's text and
  departs from it, or one that ends inside the client's text: the attempt fails (:meth:`Seam.feed`
  returns None), and the client sees none of it.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Final

from ..dialects.recovery.common import Matcher
from ..graphemes import is_grapheme_boundary

ANCHOR_CHARS: Final = 40
"""About how many characters the model is asked to repeat: enough to be found only where it was
repeated, short enough to cost nothing."""
LEAD: Final = 64
"""Characters the reply may write before the anchor (a short preamble); past that, no anchor counts."""
RESTART_MIN: Final = 16
"""Characters of the client's text a reply must repeat from its start to count as a restart (fewer is a
coincidence: two table rows, two paragraphs opening alike)."""
PROMPT: Final = (
    "Your reply was cut off. Continue it from exactly where it stops: first repeat its last words "
    "as they are, then go on, with nothing before them. Its last words:\n\n{anchor}"
)
"""The one prompt of ours, sent only in ``recover_body="anchor"``; ``{anchor}`` is the anchor's text."""


def anchor_of(text: str, size: int = ANCHOR_CHARS) -> str:
    """The last ``size`` or so characters of ``text`` without its trailing whitespace, starting at a word
    (or, in text without spaces, at a grapheme cluster): what the model is asked to repeat."""
    core = text.rstrip()
    start = len(core) - size
    if start <= 0:
        return core.lstrip()
    words = [i for i in range(max(1, start - size), len(core) - size // 2) if _word_start(core, i)]
    if words:  # the word start nearest the wanted length, preferring the longer anchor on a tie
        return core[min(words, key=lambda i: (abs(i - start), i)) :]
    while start > 0 and not is_grapheme_boundary(core, start):
        start -= 1
    return core[start:]


def _word_start(text: str, i: int) -> bool:
    return text[i - 1].isspace() and not text[i].isspace()


def prompt_for(template: str, anchor: str) -> str:
    """The user turn asking for the continuation (``{anchor}`` replaced; any other braces kept)."""
    return template.replace("{anchor}", anchor)


_WORDS: Final = re.compile(r"\w+")


def _tokens(text: str) -> Counter[str]:
    """Words, casefolded; in scripts written without spaces (CJK), each character is one."""
    out: Counter[str] = Counter()
    for word in _WORDS.findall(text.casefold()):
        if any(ord(c) >= 0x2E80 for c in word):
            out.update(word)
        else:
            out[word] += 1
    if not out:  # no word at all (emoji, punctuation): the characters themselves
        out.update(c for c in text if not c.isspace())
    return out


def resembles(anchor: str, head: str) -> bool:
    """Whether ``head`` shares most (3 in 5) of the anchor's words: a repeat gone wrong, not new text."""
    want = _tokens(anchor)
    shared = sum((want & _tokens(head[: len(anchor) * 3 // 2])).values())
    return shared * 5 >= sum(want.values()) * 3


class Seam(Matcher):
    """The reply of one anchored re-run, fed as it streams, made into the continuation of ``had``.

    In the place of a :class:`Matcher`: :meth:`feed` returns the part of each piece the
    client gets ("" while the head is held, None: the attempt failed); ``matching`` says the head is
    still held; :meth:`finish` decides what is held when the reply's text ends.
    """

    __slots__ = ("_anchor", "_before", "_bound", "_head", "_opening", "_pattern", "_restart", "_tail")

    def __init__(self, had: str, anchor: str) -> None:
        super().__init__(had, False)  # ``_pos``: how much of ``_had`` the reply repeated from its start
        self._tail = had[len(had.rstrip()) :]  # the client's trailing whitespace, not part of the anchor
        self._anchor = anchor
        self._pattern = re.compile(r"\s+".join(map(re.escape, anchor.split())))
        self._bound = LEAD + 2 * len(anchor) + len(self._tail) + 16
        core = had.rstrip()
        self._opening = core.lstrip()[: len(anchor)]  # a restart in other words begins like this
        # The client's words just before the anchor: a reply may repeat more of them than it was asked.
        self._before = _squeeze(core[max(0, len(core) - len(anchor) - self._bound) : len(core) - len(anchor)])
        self._head = ""  # the reply so far, while nothing is decided (at most about _bound)
        self._restart = bool(had)  # the reply may still be a restart: all of it so far is ``had``'s start
        self.matching = bool(anchor)

    @property
    def short(self) -> bool:
        """Whether the reply ended with nothing decided: a failed attempt."""
        return self.matching

    def feed(self, text: str) -> str | None:
        if not self.matching:
            return self._after(text)
        if not text:
            return text
        if self._restart:
            want = self._had[self._pos :]
            size = min(len(text), len(want))
            same = _common(text, want, size)
            if same == size:
                self._pos += size
                if len(self._head) < self._bound:
                    self._head += text[:size]
                if self._pos == len(self._had):  # a restart, caught up: what follows is new
                    return self._decide(text[size:])
                return ""
            departed, self._restart = self._pos + same, False
            if departed > self._bound:
                return None
            self._head = self._had[:departed] + text[same:]
            if departed >= min(RESTART_MIN, len(self._had)):
                found = self._search()
                # Repeated the client's text past where the anchor would end: a restart gone astray.
                return None if found is None or found.end() < departed else self._cut(found)
        else:
            self._head += text
        found = self._search()
        if found is not None:
            return self._cut(found)
        if len(self._head) >= self._bound:
            return self._without_anchor()
        return ""

    def finish(self) -> str | None:
        """The reply's text ended: what of the held head the client gets (None: the attempt failed)."""
        if not self.matching:
            return ""
        if self._restart and self._pos:
            return None  # it stopped inside the client's text: less than the client has
        if not self._head.strip():
            return self._decide(self._head)  # nothing new: the answer had ended where it was cut
        return self._without_anchor()

    def _search(self) -> re.Match[str] | None:
        found = self._pattern.search(self._head)
        if found is None:
            return None
        before = self._head[: found.start()]
        if found.start() <= LEAD and (len(self._anchor) >= RESTART_MIN or not before.strip()):
            return found
        if before.strip() and self._before.endswith(_squeeze(before)):
            return found  # it repeated more of the client's text than the anchor: all of it dropped
        return None  # too far in to be the repeat asked for (a short anchor: only at the start)

    def _cut(self, found: re.Match[str]) -> str:
        rest = self._head[found.end() :]
        self._head, self.matching = "", False
        # From here ``_had`` is the client's trailing whitespace, which the reply may write again.
        self._had, self._pos, self._restart = self._tail, 0, bool(self._tail)
        return self._after(rest)

    def _after(self, text: str) -> str:
        """After the anchor: the client's trailing whitespace dropped where the reply repeats it."""
        if not self._restart or self.matching:
            return text
        want = self._had[self._pos :]
        same = _common(text, want, min(len(text), len(want)))
        self._pos += same
        if same < len(text) or self._pos == len(self._had):
            self._restart = False
        return text[same:]

    def _decide(self, rest: str) -> str:
        self._head, self.matching, self._restart = "", False, False
        return rest

    def _without_anchor(self) -> str | None:
        """No anchor near the start: new text, unless it shows the anchor further in, or resembles it
        or the answer's opening (a restart in other words): then the attempt fails, for each would be
        the client's text again."""
        further = len(self._anchor) >= RESTART_MIN and self._pattern.search(self._head) is not None
        if further or resembles(self._anchor, self._head) or resembles(self._opening, self._head):
            return None
        return self._decide(self._head)


def _squeeze(text: str) -> str:
    """Whitespace runs as one space, none at the ends: text as the anchor's pattern compares it."""
    return " ".join(text.split())


def _common(a: str, b: str, size: int) -> int:
    """The length of the common prefix of ``a`` and ``b``, at most ``size``."""
    if a[:size] == b[:size]:
        return size
    return next(i for i in range(size) if a[i] != b[i])
