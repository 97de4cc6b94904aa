"""Sans-I/O event-stream codec: an incremental WHATWG parser, an encoder, and an event framer.

The parser follows the HTML Living Standard's "event stream interpretation": UTF-8 always (invalid bytes
become U+FFFD), one leading BOM stripped, lines end at CRLF, LF or CR (a CR at a chunk's end may be half
of a CRLF), ``:`` lines are comments, ``data`` lines join with LF, an ``id`` containing NUL is ignored,
``retry`` counts only if all ASCII digits, and an event without its final blank line at EOF is discarded.

Lines are split on the bytes CR and LF only: ``str.splitlines()`` would also split on U+2028 and friends,
which are legal inside JSON data. Splitting bytes is UTF-8 safe because no multi-byte sequence contains
an ASCII byte.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Final

from .lines import CR, LF

_LINE_END: Final = re.compile(rb"\r\n|\r|\n")
_BOM: Final = b"\xef\xbb\xbf"


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    """One dispatched event.

    ``event`` is None for the default type ("message"). ``id`` is the id field given in this event's
    own block (the spec's *last event id* persists across events; see :attr:`Parser.last_event_id`).
    ``retry`` is the reconnection time given in this block, if any.
    """

    data: str = ""
    event: str | None = None
    id: str | None = None
    retry: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Comment:
    """A comment line (``: text``), reported only by ``Parser(comments=True)``."""

    text: str


class Parser:
    """Incremental event-stream parser: ``feed(bytes) -> events``, ``close() -> events`` at EOF."""

    def __init__(self, *, comments: bool = False) -> None:
        self._comments = comments
        self._pending: list[bytes] = []  # the current partial line, in pieces (no quadratic joins)
        self._skip_lf = False  # the previous chunk ended with CR: a leading LF completes that CRLF
        self._start = True  # still looking for a leading BOM
        self._data: list[str] = []
        self._has_data = False
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None
        self.last_event_id = ""
        self.retry: int | None = None

    def feed(self, chunk: bytes) -> list[Event | Comment]:
        if self._start:
            if not self._pending and len(chunk) < 3 and _BOM.startswith(chunk):
                if chunk:
                    self._pending.append(chunk)  # a BOM may arrive cut in pieces
                return []
            if self._pending:
                chunk = b"".join(self._pending) + chunk
                self._pending.clear()
            if len(chunk) < 3 and _BOM.startswith(chunk):
                self._pending.append(chunk)
                return []
            self._start = False
            if chunk.startswith(_BOM):
                chunk = chunk[3:]
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[0] == LF:
                chunk = chunk[1:]
        if not chunk:
            return []
        parts = _LINE_END.split(chunk)
        if len(parts) == 1:
            self._pending.append(chunk)
            return []
        if self._pending:
            self._pending.append(parts[0])
            parts[0] = b"".join(self._pending)
            self._pending.clear()
        tail = parts.pop()
        if tail:
            self._pending.append(tail)
        elif chunk[-1] == CR:
            self._skip_lf = True
        out: list[Event | Comment] = []
        for line in parts:
            self._line(line, out)
        return out

    def close(self) -> list[Event | Comment]:
        """End of stream: a partial line is processed, a partial event is discarded (per the spec)."""
        out: list[Event | Comment] = []
        if self._pending and not self._start:
            self._line(b"".join(self._pending), out)
        self._pending.clear()
        self._reset_event()
        return out

    def _line(self, line: bytes, out: list[Event | Comment]) -> None:
        if not line:
            self._dispatch(out)
            return
        colon = line.find(b":")
        if colon == 0:
            if self._comments:
                out.append(Comment(_value(line[1:]).decode("utf-8", "replace")))
            return
        if colon < 0:
            name, value = line, b""
        else:
            name, value = line[:colon], _value(line[colon + 1 :])
        if name == b"data":
            self._data.append(value.decode("utf-8", "replace"))
            self._has_data = True
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id" and b"\x00" not in value:
            self._id = self.last_event_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():  # bytes.isdigit: ASCII only, as the spec requires
            self._retry = self.retry = int(value)

    def _dispatch(self, out: list[Event | Comment]) -> None:
        if self._has_data:
            out.append(Event("\n".join(self._data), self._event or None, self._id, self._retry))
        self._reset_event()

    def _reset_event(self) -> None:
        self._data = []
        self._has_data = False
        self._event = self._id = None
        self._retry = None


def _value(raw: bytes) -> bytes:
    return raw[1:] if raw[:1] == b" " else raw


def parse(data: bytes) -> list[Event]:
    """All events of a complete stream (comments dropped)."""
    parser = Parser()
    events = [e for e in parser.feed(data) if isinstance(e, Event)]
    return events + [e for e in parser.close() if isinstance(e, Event)]


def encode(event: Event) -> bytes:
    """One event as bytes. Newlines in data (CR, LF or CRLF) become separate ``data`` lines."""
    lines: list[str] = []
    if event.event is not None:
        _check_line("event", event.event)
        lines.append(f"event: {event.event}")
    if event.id is not None:
        _check_line("id", event.id)
        if "\x00" in event.id:
            raise ValueError("an SSE id cannot contain NUL (clients ignore it)")
        lines.append(f"id: {event.id}")
    if event.retry is not None:
        if event.retry < 0:
            raise ValueError("retry must be >= 0")
        lines.append(f"retry: {event.retry}")
    lines.extend("data: " + part for part in re.split("\r\n|\r|\n", event.data))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def retry_only(ms: int) -> bytes:
    """An event with nothing but a reconnect delay: clients apply it, dispatch nothing."""
    return b"retry: %d\n\n" % ms


def comment(text: str, *, blank_line: bool = True) -> bytes:
    """A comment frame: ignored by every client, keeps proxies from timing the connection out.

    ``blank_line=False``: the comment line alone, for a stream that has carried an event id. A blank
    line there dispatches an event in clients that keep the last event id from event to event, as the
    spec asks, but dispatch on it too (openai-python hands its caller an empty event, which the SDK then
    fails to parse as JSON); the spec's own parsers ignore a lone comment line either way. Without ids the
    blank line stays: a reader that splits the body on blank lines sees the comment as its own block."""
    _check_line("comment", text)
    line = f": {text}\n".encode() if text else b":\n"
    return line + b"\n" if blank_line else line


def has_id_line(blob: bytes) -> bool:
    """Whether the whole events in ``blob`` set an event id (a line that starts ``id:``)."""
    return blob.startswith(b"id:") or b"\nid:" in blob or b"\rid:" in blob


def _check_line(what: str, value: str) -> None:
    if "\r" in value or "\n" in value:
        raise ValueError(f"an SSE {what} cannot contain CR or LF: {value!r}")


def split_events(blob: bytes) -> list[bytes]:
    """Whole raw events of a blob that ends on a boundary (extra blank lines ride with the event before)."""
    if CR in blob or blob.count(b"\n\n") <= 1:
        # The usual single event (or the last LF of a blank line cut across chunks); CR-framed streams
        # are forwarded whole, never merged.
        return [blob]
    parts = blob.split(b"\n\n")
    out: list[bytes] = []
    for part in parts[:-1]:
        if part.strip(b"\n") or not out:
            out.append(part + b"\n\n")
        else:
            out[-1] += part + b"\n\n"
    if parts[-1]:
        out[-1] += parts[-1]
    return out


class Framer:
    """Cuts a byte stream into whole raw events, without decoding, so whole events can be forwarded as-is.

    ``feed(chunk)`` returns the bytes that end on an event boundary (a blank line) and keeps the rest.
    The common case, one or more whole events per chunk with LF line ends, returns the chunk object
    itself. ``pending`` says how many bytes of an unfinished event are held.
    """

    __slots__ = ("_held", "_prev", "pending")

    def __init__(self) -> None:
        self._held: list[bytes] = []
        self.pending = 0
        self._prev = b"\n\n"  # the last bytes seen (the context of a CRLF or blank line cut across chunks)

    def feed(self, chunk: bytes) -> bytes:
        if not self.pending and chunk.endswith(b"\n\n") and len(chunk) > 2:  # whole events: the usual
            self._prev = chunk[-3:]
            return chunk
        if not chunk:
            return b""
        before, self._prev = self._prev, (self._prev + chunk)[-3:]
        if chunk.endswith(b"\n\n") and not self.pending:
            return chunk
        cut = _last_boundary(chunk, before)
        if not cut:  # still inside the event: keep it in pieces, never re-join or re-scan what is held
            self._held.append(chunk)
            self.pending += len(chunk)
            return b""
        out = b"".join((*self._held, chunk[:cut])) if self.pending else chunk[:cut]
        rest = chunk[cut:]
        self._held = [rest] if rest else []
        self.pending = len(rest)
        return out

    def take(self) -> bytes:
        """Hand over the held partial event (to forward it when it grew too large to hold)."""
        held = b"".join(self._held)
        self._held.clear()
        self.pending = 0
        return held


_BOUNDARY: Final = re.compile(rb"(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r(?!\n)|\n)")


def _last_boundary(chunk: bytes, before: bytes) -> int:
    """Index in ``chunk`` just past its last blank line (0 if none); ``before`` ends with the bytes that
    came before it, so a blank line cut across chunks is found by looking at the new bytes only.

    A CR at the very end may be half of a CRLF; it still ends the line, so counting it is right.
    """
    if CR not in chunk and CR not in before:  # the usual LF-only stream, at C speed
        end = chunk.rfind(b"\n\n")
        if end >= 0:
            return end + 2
        return 1 if chunk[:1] == b"\n" and before.endswith(b"\n") else 0
    last = 0
    for match in _BOUNDARY.finditer(before + chunk):
        last = match.end() - len(before)
    return max(last, 0)
