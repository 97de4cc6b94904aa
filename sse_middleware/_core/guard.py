"""Sans-I/O guards: which text a guard is shown next, and what may leave once it passed.

A :class:`GuardGate` sits between the dialect and the coalescer. Every event enters it in order: text
deltas with their :class:`~.wire.Part`, the events of a format whose text is not read as ``data`` units,
everything else as structural events. In hold mode it lets an item out only once every guard passed
its text, and structural events keep their place behind held text. A check's text ends at a word
boundary: whitespace, a structural event (in every format read, a part's text does not go on across
one), the stream's end, or the end of a word longer than ``max_bytes``, checked as it is.

At most one check is in flight per stream (the shell runs it beside the app): text that arrives
meanwhile accumulates and is checked next, so a slow guard costs its latency a few times per stream.
One check covers one part, the one holding up the stream first: a guard is told which part it sees.

Events after the last text wait for the next text or the stream's end: the end marker (``[DONE]``,
``message_stop``) must not go out before every part's ``final`` check passed.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Hashable, Mapping
from typing import Any, Final

from .wire import DATA, Delta, Part

__all__ = ["Check", "GuardGate"]

BACKLOG_FACTOR: Final = 4
"""Held text beyond this many ``coalesce_max_bytes`` makes the app's ``send`` wait for the check."""


@dataclasses.dataclass(frozen=True, slots=True)
class Check:
    """What a guard is shown. ``text``: the part's text so far as the client will have it once this
    check passes (for ``data``, this event's data only: a long-lived event stream is not kept);
    ``new``: what is new since the part's last check; ``final``: the part's last check, before the
    stream's end goes out; ``tool``: the tool's name for ``tool_arguments`` (None if not said)."""

    text: str
    new: str
    part: str
    final: bool
    dialect: str
    scope: Mapping[str, Any] = dataclasses.field(repr=False)
    tool: str | None = None
    key: Hashable = dataclasses.field(default=None, repr=False, compare=False)


class _Part:
    __slots__ = ("approved", "cut", "done", "kind", "passed", "pending", "released", "tool")

    def __init__(self, part: Part) -> None:
        self.kind, self.tool = part.kind, part.name
        self.approved = ""  # text checked so far (not kept for data units)
        self.pending = ""  # text not checked yet
        self.cut = 0  # how much of pending the next check may take (up to a boundary)
        self.passed = 0  # characters approved, over the part's life
        self.released = 0  # characters let out, over the part's life
        self.done = False  # the final check passed


_DATA_KEY: Final = object()  # the one part of a stream whose events are data units
_PLAIN_KEY: Final = object()  # the one part of a text/plain stream, whose deltas have no key
_RAW_KEY: Final = object()  # queued bytes that leave unchecked (see unchecked())
_CARRIER_KEY: Final = object()  # a queued event that carries text but is no delta (see carrier())


class _Carrier:
    """An event that leaves whole once its parts passed ``sizes`` more characters each."""

    __slots__ = ("raw", "sizes")

    def __init__(self, raw: bytes, sizes: tuple[tuple[Hashable, int], ...]) -> None:
        self.raw, self.sizes = raw, sizes

    def waiting(self, parts: dict[Hashable, _Part]) -> Hashable | None:
        """The first of its parts that has not passed its text yet (None: it may leave)."""
        for key, size in self.sizes:
            entry = parts[key]
            if entry.passed - entry.released < size:
                return key
        return None


class GuardGate:
    """``hold``: nothing leaves before it passed (else everything leaves at once and checks follow)."""

    def __init__(self, *, hold: bool, max_bytes: int, dialect: str, scope: Mapping[str, Any]) -> None:
        self.hold = hold
        self.dialect = dialect
        self._scope = scope
        self._max = max_bytes
        self._parts: dict[Hashable, _Part] = {}
        # In order: (part key, delta or data event) for text, (None, event) for a structural event.
        self._queue: deque[tuple[Hashable, Delta | bytes | _Carrier, int]] = deque()
        self._texts = 0  # text items in the queue: structural events after the last one wait
        self.held = 0  # characters not checked yet, over all parts
        self._unchecked = 0  # bytes queued by unchecked(), waiting for what is ahead of them
        self.in_flight: Check | None = None
        self.closed = False

    @property
    def full(self) -> bool:
        """Too much text waits for checks: the app's ``send`` should wait for the one in flight."""
        return self.held + self._unchecked > BACKLOG_FACTOR * self._max

    # -- in ------------------------------------------------------------------------------------------

    def text(self, delta: Delta, part: Part, key: Hashable) -> None:
        """A delta with text, of ``part``, which ``key`` names (the client's part, not the merge key)."""
        key = self._add(key, part, delta.text)
        self._queue.append((key, delta, 0))
        self._texts += 1

    def carrier(self, raw: bytes, pieces: list[tuple[Hashable, Part, str]]) -> None:
        """An event that carries text but is no delta (it cannot be cut): each (key, part, text) of
        ``pieces`` is checked as its part's next text, and the event leaves whole once all of it passed."""
        sizes: dict[Hashable, int] = {}
        for key, part, text in pieces:
            key = self._add(key, part, text)
            sizes[key] = sizes.get(key, 0) + len(text)
        self._queue.append((_CARRIER_KEY, _Carrier(raw, tuple(sizes.items())), 0))
        self._texts += 1

    def _add(self, key: Hashable, part: Part, text: str) -> Hashable:
        """``text`` onto its part's pending text, checkable up to its last word boundary; the part's key."""
        key = _PLAIN_KEY if key is None else key  # None marks a structural event here
        entry = self._part(key, part)
        start = len(entry.pending)
        entry.pending += text
        self.held += len(text)
        for index in range(len(text) - 1, -1, -1):
            if text[index].isspace():
                entry.cut = start + index + 1
                break
        tail = len(entry.pending) - entry.cut
        if (
            tail * 4 > self._max
            and len(entry.pending[entry.cut :].encode("utf-8", "surrogatepass")) > self._max
        ):
            entry.cut = len(entry.pending)  # a word longer than max_bytes: checked as it is
        return key

    def data(self, raw: bytes, text: str) -> None:
        """An event whose text the middleware cannot read: a check unit of its own."""
        entry = self._part(_DATA_KEY, DATA)
        entry.pending += text
        entry.cut = len(entry.pending)
        self.held += len(text)
        self._queue.append((_DATA_KEY, raw, len(text)))
        self._texts += 1

    def event(self, raw: bytes) -> None:
        """A structural event: a boundary for every part's held text."""
        for entry in self._parts.values():
            entry.cut = len(entry.pending)
        self._queue.append((None, raw, 0))

    def unchecked(self, raw: bytes) -> None:
        """Bytes that leave unchecked once what is ahead of them did (a piece of an event too large to
        hold, under ``guard_failure="allow"``): a boundary, like a structural event, but never held
        back for the end."""
        for entry in self._parts.values():
            entry.cut = len(entry.pending)
        self._queue.append((_RAW_KEY, raw, 0))
        self._unchecked += len(raw)

    def close(self) -> None:
        """The app's body ended: every part's text is checkable, and each gets its final check."""
        self.closed = True
        for entry in self._parts.values():
            entry.cut = len(entry.pending)

    def _part(self, key: Hashable, part: Part) -> _Part:
        entry = self._parts.get(key)
        if entry is None:
            entry = self._parts[key] = _Part(part)
        elif part.name is not None and entry.tool is None:
            entry.tool = part.name
        return entry

    # -- checks --------------------------------------------------------------------------------------

    def next_check(self) -> Check | None:
        """The check to run now (it is then in flight), or None: one is in flight, or nothing is due."""
        if self.in_flight is not None:
            return None
        key = self._blocking()
        if key is None:
            return None
        entry = self._parts[key]
        new = entry.pending[: entry.cut]
        final = self.closed and entry.cut == len(entry.pending)
        text = new if entry.kind == DATA.kind else entry.approved + new
        check = Check(text, new, entry.kind, final, self.dialect, self._scope, entry.tool, key)
        self.in_flight = check
        return check

    def _blocking(self) -> Hashable | None:
        """The part to check next: the one holding up the queue's head, else any with checkable text,
        else (at the end) one still owed its final check."""
        if self._queue:
            key, item, _ = self._queue[0]
            if isinstance(item, _Carrier):
                key = item.waiting(self._parts)
            if key is not None and key in self._parts and self._parts[key].cut:
                return key
        for key, entry in self._parts.items():
            if entry.cut:
                return key
        if self.closed:
            for key, entry in self._parts.items():
                if not entry.done:
                    return key
        return None

    def passed(self, check: Check) -> None:
        """Every guard passed ``check``: its text may leave."""
        self.in_flight = None
        entry = self._parts[check.key]
        size = len(check.new)
        if entry.kind != DATA.kind:
            entry.approved += check.new
        entry.pending = entry.pending[size:]
        entry.cut -= size
        entry.passed += size
        self.held -= size
        if check.final:
            entry.done = True

    def failed(self) -> None:
        """A check did not pass (tripped, or a fault that fails closed): nothing held will ever leave."""
        self.in_flight = None
        self._queue.clear()
        self._texts = 0
        self.held = self._unchecked = 0
        for entry in self._parts.values():
            entry.pending, entry.cut = "", 0

    def skipped(self, check: Check) -> None:
        """A fault the settings let through: the text goes on as if it passed."""
        self.passed(check)

    @property
    def idle(self) -> bool:
        """Nothing left to check (at the end: every part had its final check)."""
        return self.in_flight is None and self._blocking() is None

    def keys(self) -> list[Hashable]:
        return [key for key in self._parts if key is not _DATA_KEY and key is not _PLAIN_KEY]

    # -- out -----------------------------------------------------------------------------------------

    def release(self) -> list[Delta | bytes]:
        """What may leave now, in order: deltas (a prefix of one, when only that much passed) and events."""
        out: list[Delta | bytes] = []
        queue = self._queue
        if not self.hold:
            while queue:
                item = queue.popleft()[1]
                out.append(item.raw if isinstance(item, _Carrier) else item)
            self._texts = self._unchecked = 0
            return out
        while queue:
            key, item, size = queue[0]
            if isinstance(item, _Carrier):
                if item.waiting(self._parts) is not None:
                    break
                for part, passed in item.sizes:
                    self._parts[part].released += passed
                out.append(item.raw)
                queue.popleft()
                self._texts -= 1
                continue
            if isinstance(item, bytes) and key is _RAW_KEY:
                out.append(item)
                queue.popleft()
                self._unchecked -= len(item)
                continue
            if key is None:
                if not self._texts and not (self.closed and self.idle):
                    break  # after the last text: waits for more text, or the end's final checks
                out.append(item)
                queue.popleft()
                continue
            entry = self._parts[key]
            ready = entry.passed - entry.released
            if isinstance(item, Delta):
                size = len(item.text)
            if ready >= size:
                out.append(item)
                queue.popleft()
                self._texts -= 1
                entry.released += size
                continue
            if ready > 0 and isinstance(item, Delta):
                out.append(Delta(item.key, item.envelope, item.text[:ready]))
                queue[0] = (key, Delta(item.key, item.envelope, item.text[ready:]), 0)
                entry.released += ready
            break
        return out
