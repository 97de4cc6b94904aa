"""Sans-I/O token coalescing: fewer, better-placed frames under a hard latency bound.

One SSE frame per token makes clients re-render markdown hundreds of times a second and shows half
words and half fences. Merging consecutive text deltas fixes that, but only if merging never costs the
reader time, so the rules are, in order of precedence:

* Leading edge: the first text of a stream, and the first after ``max_delay`` of silence (nothing
  emitted or buffered), goes out at once, whole. Coalescing must never add to time-to-first-token.
* Deadline: no character waits longer than ``max_delay``. Each buffered piece keeps its arrival time;
  at the deadline (:attr:`Coalescer.due`, ``inf`` when nothing is buffered: the shell reads it after
  every token, so it is an attribute, not a method) every overdue character goes out, and the cut is
  then *extended* to the best safe cut point (see :func:`markdown.best_cut`) at or after them, so
  frames end on block, line, sentence or word boundaries whenever the buffer offers one. The
  remainder's deadline is its own oldest arrival.
* Hold only when it pays: while the stream's own recent gaps (an EWMA) are longer than
  :data:`DIRECT_FRACTION` of ``max_delay``, a delta that finds the buffer empty goes out at once, as the
  leading edge does, and no deadline is set: at that rate a window would merge under two tokens a frame
  and cost a timer and a cut for each. As the gaps shorten the buffer holds again.
* Size: at ``max_bytes`` (UTF-8, counted per piece) the best safe cut in the buffer's second half goes
  out now, so memory stays bounded by ``max_bytes`` plus one piece.

Graphemes beat the deadline only at the very end of the buffer: a cluster that cannot be complete yet (a
trailing ZWJ, an unpaired flag letter, a CR before its LF) is held for at most one more ``max_delay``
waiting for its continuation, then sent anyway. So the bound for those few characters is
``2 * max_delay``; for every other character it is exactly ``max_delay``.
"""

from __future__ import annotations

import math
from operator import itemgetter
from typing import Generic, TypeVar

from .markdown import MarkdownState, best_cut, complete_end

__all__ = ["Coalescer"]

K = TypeVar("K")
E = TypeVar("E")
_text_of = itemgetter(0)  # a buffered part's text (in C: the buffer is joined without a Python loop)
_MAX_STATES = 32  # markdown contexts kept per stream (one per merge key: content block, choice)
EARLY_FRACTION = 0.25  # of max_delay: how close to its deadline buffered text may go out with a send
# Of max_delay: above this mean gap a window merges under two tokens a frame, which costs more (a cut, a
# timer wake) than the write it saves, so text is sent as it comes.
DIRECT_FRACTION = 0.5
_GAP_WEIGHT = 0.25  # of the newest gap in the EWMA: a few gaps of a new rate move it across the line


def _utf8_len(text: str) -> int:
    # surrogatepass: JSON may carry lone surrogates; we only count, the encoder decides what to send.
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class Coalescer(Generic[K, E]):
    """Merge consecutive same-key text deltas into fewer frames. ``K`` is a hashable merge key, ``E`` the
    caller's envelope (the event a piece of text is sent in). The clock is passed in, monotonic seconds.

    Each returned piece is ``(envelope, text)``: the envelope of the event its first character came from.
    """

    __slots__ = (
        "_arrived",
        "_bytes",
        "_delay",
        "_direct",
        "_early",
        "_gap",
        "_grace",
        "_key",
        "_last",
        "_max",
        "_parts",
        "_seen",
        "_state",
        "_states",
        "due",
    )

    def __init__(self, max_delay: float, max_bytes: int) -> None:
        if max_delay < 0 or max_bytes < 1:
            raise ValueError("max_delay must be >= 0 and max_bytes >= 1")
        self._delay = max_delay
        # A send that comes this close to the deadline takes the cut with it, a little early (the bound
        # is an upper one), so that the timer rarely has to wake for it: at a steady token rate the
        # app's own sends then carry every flush.
        self._early = max_delay * EARLY_FRACTION
        self._max = max_bytes
        # Buffered pieces: (text, arrival time, envelope, UTF-8 size). Joined only when emitting.
        self._parts: list[tuple[str, float, E, int]] = []
        self._bytes = 0
        self._key: object = None
        self.due = math.inf  # when the oldest buffered text must go out; inf: nothing is buffered
        self._grace = False  # the head is an overdue incomplete grapheme, given one extra max_delay
        # Last time text was emitted (leading edge). Buffered text always goes out later than it came, so
        # when the buffer is empty this is also the last time text was buffered.
        self._last: float | None = None
        # Latest clock reading but the arrival of the last buffered piece (flush() takes the later of
        # the two; it is not given a clock), so that buffering a piece needs no store here.
        self._seen = 0.0
        # The stream's pace: an EWMA of its gaps shorter than max_delay (a longer one is a pause, which
        # the leading edge answers, not a rate), sampled when text finds the buffer empty.
        self._gap = -1.0  # none yet
        self._arrived = 0.0  # arrival of the newest text that is no longer buffered
        self._direct = max_delay * DIRECT_FRACTION
        self._states: dict[K, MarkdownState] = {}
        self._state = MarkdownState()

    def feed(self, key: K, envelope: E, text: str, now: float) -> list[tuple[E, str]]:
        """One text delta of a mergeable event. Returns pieces (envelope, text) to send NOW, in order.
        A key different from the buffered one flushes the buffer first (only consecutive same-key events
        merge). An empty ``text`` is a no-op: there is nothing to merge or to delay."""
        if not text:
            return []
        parts = self._parts
        out: list[tuple[E, str]] = []
        if parts and key != self._key:
            if now < parts[-1][1]:
                now = parts[-1][1]  # arrival times must not go backwards, or a deadline could too
            out.append(self._take("".join(map(_text_of, parts)), -1, now))
        if not parts:
            self._key = key
            self._state = self._state_for(key)
        more = self.push(envelope, text, now)
        if more:
            out += more
        return out

    def push(self, envelope: E, text: str, now: float) -> list[tuple[E, str]] | None:
        """:meth:`feed` for a non-empty ``text`` of the key fed last, whether or not text is buffered:
        what a stream's consecutive deltas of one key take, without comparing keys. None: nothing now."""
        parts = self._parts
        if parts:
            if now < parts[-1][1]:
                now = parts[-1][1]  # arrival times must not go backwards, or a deadline could too
            if self._grace:  # new text may complete the held grapheme: re-cut at once
                self._grace = False
                self.due = parts[0][1]
        else:
            last = self._last
            if last is None or now - last >= self._delay:
                self._seen = self._last = self._arrived = now
                self._state.advance(text)
                return [(envelope, text)]
            # The stream's pace, sampled where text finds the buffer empty (text added to a held buffer
            # costs nothing here): the gap since the last text that came.
            gap = now - self._arrived
            if gap < self._delay:  # the first gap is the estimate: a short stream has few to learn from
                self._gap = gap if self._gap < 0.0 else self._gap + (gap - self._gap) * _GAP_WEIGHT
            if self._gap > self._direct:
                self._seen = self._last = self._arrived = now
                self._state.advance(text)
                return [(envelope, text)]
            self.due = now + self._delay
            self._grace = False
        size = len(text) if text.isascii() else _utf8_len(text)
        parts.append((text, now, envelope, size))
        self._bytes += size
        early = self.due - self._early
        if now < early and self._bytes < self._max:
            return None
        out: list[tuple[E, str]] = []
        if now >= early:
            # What is due by then, and at least the head (whose deadline it is: no rounding may leave it).
            self._cut(now, out, max(now + self._early, self.due))
        if self._bytes >= self._max:
            self._shrink(now, out)
        return out

    def tick(self, now: float) -> list[tuple[E, str]]:
        """Called by the timer at/after the deadline; emits at least every overdue character."""
        if now > self._seen:
            self._seen = now
        out: list[tuple[E, str]] = []
        if now >= self.due:  # inf while nothing is buffered
            self._cut(now, out)
        return out

    def flush(self) -> list[tuple[E, str]]:
        """Emit everything buffered, as one piece (before a non-mergeable event, at end, on error)."""
        if not self._parts:
            return []
        parts = self._parts
        now = self._seen if self._seen > parts[-1][1] else parts[-1][1]
        return [self._take("".join(map(_text_of, parts)), -1, now)]

    def _cut(self, now: float, out: list[tuple[E, str]], horizon: float | None = None) -> None:
        """Deadline cut: everything overdue (at ``horizon``: a send may take what is due a little
        later), extended to the best safe cut after it."""
        d = self._delay
        must = hard = 0
        hard_open = True
        if horizon is None:
            horizon = now
        for s, t, _, _ in self._parts:
            if t + d > horizon:
                break
            must += len(s)
            if hard_open and t + 2 * d <= now:
                hard += len(s)
            else:
                hard_open = False
        text = "".join(map(_text_of, self._parts))
        st = self._state
        if must == len(text):  # all of it is overdue: the end, unless it ends in an incomplete grapheme
            cut = must if complete_end(text, st) == must else 0  # what best_cut() finds then, see tests
        else:
            cut = best_cut(text, st, must) or best_cut(text, st, must, respect_markers=False)
        grace = False
        if not cut:  # overdue characters end in an incomplete grapheme at the very end
            end = complete_end(text, st)
            if end >= must:
                cut = end
            elif hard > end:
                cut = -1  # its grace is over too: the bound wins
            else:
                cut, grace = end, True
        if cut:
            out.append(self._take(text, cut, now))
        if self._parts:
            self._grace = grace
            self.due = self._parts[0][1] + (2 * d if grace else d)

    def _shrink(self, now: float, out: list[tuple[E, str]]) -> None:
        """Size cut: keep at most half the buffer, cut at the best point; never leave it at max_bytes."""
        while self._bytes >= self._max:
            text = "".join(map(_text_of, self._parts))
            n, st = len(text), self._state
            cut = best_cut(text, st, n // 2) or best_cut(text, st) or complete_end(text, st) or -1
            out.append(self._take(text, cut, now))
        if self._parts:
            self._grace = False
            self.due = self._parts[0][1] + self._delay

    def _take(self, text: str, cut: int, now: float) -> tuple[E, str]:
        """Remove ``text[:cut]`` (all of it when ``cut`` is -1 or len) from the buffer and return it as a
        piece, carrying the envelope of its first character's event."""
        parts = self._parts
        envelope = parts[0][2]
        if cut < 0 or cut >= len(text):
            piece = text
            self._arrived = parts[-1][1]
            parts.clear()
            self._bytes = 0
            self.due = math.inf
        else:
            piece = text[:cut]
            # From the end: a cut usually falls in one of the last parts (the last word is kept).
            i, start, kept = len(parts), len(text), 0
            while True:
                s, t, e, size = parts[i - 1]
                start -= len(s)
                if start < cut:
                    break
                kept += size  # parts[i - 1] lies wholly after the cut
                i -= 1
            if cut - start < len(s):  # the cut falls inside it: keep its tail with its time and envelope
                rest = s[cut - start :]
                rest_size = len(rest) if rest.isascii() else _utf8_len(rest)
                i -= 1
                parts[i] = (rest, t, e, rest_size)
                kept += rest_size
            del parts[:i]
            self._bytes = kept
        self._state.advance(piece)
        self._last = now
        return envelope, piece

    def _state_for(self, key: K) -> MarkdownState:
        """The markdown context of ``key``'s text (blocks and choices render separately). Bounded LRU."""
        states = self._states
        state = states.pop(key, None)
        if state is None:
            # The first key of a stream that has sent nothing yet takes the state made with the
            # coalescer (untouched: only text sent advances it), rather than a second one.
            state = self._state if not states and self._last is None else MarkdownState()
        states[key] = state
        if len(states) > _MAX_STATES:
            del states[next(iter(states))]
        return state
