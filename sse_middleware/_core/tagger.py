"""Adding ``id:`` lines to an outgoing event stream, without re-encoding a byte of it.

Every *event* (a block with at least one ``data`` field, i.e. one a client dispatches), up to the
first id of the app's own (below), gets one line ``id: <stream>.<n>`` inserted just before the blank
line that ends it, ``n`` counting events from 1. Everything else stays as sent: comments and
heartbeats, blocks with no ``data`` (a lone ``retry:``), extra blank lines, the app's line endings.
Insertion only, so a WHATWG parser sees the same events, each with our id, under any chunking: the
tagger carries only a pending CR and the first bytes of a line across chunks, and writes each chunk out
at once (it never holds bytes back).

**A stream that carries its own ids keeps them.** From the first block with an ``id`` field of the
app's (an event's or a lone ``id:``: MCP's event store, any server that implements ``Last-Event-ID``
itself), the tagger adds no more ids: the client's ``lastEventId`` stays the app's, so its reconnect
reaches the app's own resume (an id not of our shape goes to the app untouched). Were ours written
after the app's, ours would win within the block and the reconnect would come to us, for a stream the
app may still be writing under another request (MCP closes a response halfway and goes on in its
store). Events are still counted and logged: a client that holds one of our ids from before that point
resumes from the log, which replays the app's events as sent, ids and all.

Each whole event, as sent (id included), is also handed to ``on_event(seq, data)`` for the log; an event
larger than ``max_event`` is reported as ``None`` rather than held.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from .lines import CR, LF

_LINE_END: Final = re.compile(rb"\r\n|\r|\n")
_DATA_LINE: Final = re.compile(rb"(?:^|\n)data[:\n]")  # a data field in an LF-only block
_ID_LINE: Final = re.compile(rb"(?:^|\n)id[:\n]")  # an id field of the app's in an LF-only block
_BOM: Final = b"\xef\xbb\xbf"
_HEAD: Final = 8  # a BOM and "data:" decide whether a line is a data field

OnEvent = Callable[[int, "bytes | None"], None]


def _is_field(head: bytes, first_line: bool, name: bytes) -> bool:
    """Whether a line starting with ``head`` is the field ``name`` (``data`` or ``id``)."""
    if first_line and head.startswith(_BOM):
        head = head[3:]
    return head == name or head.startswith(name + b":")


class Tagger:
    """``feed(chunk) -> chunk with ids``; whole events go to ``on_event`` as they complete."""

    __slots__ = (
        "_aside",
        "_data",
        "_first",
        "_head",
        "_idle",
        "_in_block",
        "_line_start",
        "_max",
        "_on_event",
        "_own_id",
        "_parts",
        "_prefix",
        "_size",
        "_skip_lf",
        "seq",
    )

    def __init__(self, stream: str, on_event: OnEvent, max_event: int) -> None:
        self._prefix = b"id: " + stream.encode("ascii") + b"."
        self._on_event = on_event
        self._max = max_event
        self.seq = 0
        self._idle = False  # between blocks at a line start: the fast path applies (never the first chunk)
        self._line_start = True
        self._skip_lf = False  # the last chunk ended with CR: a leading LF completes that CRLF
        self._head = b""  # the first bytes of the current line, to tell a data field
        self._first = True  # still on the stream's first line (which may start with a BOM)
        self._in_block = False
        self._data = False  # the current block has a data field: it is an event
        self._own_id = False  # the current block has an id field of the app's
        self._aside = False  # an event of the app's had its own id: the ids are the app's from there on
        self._parts: list[bytes] | None = []  # the current block as sent; None once past max_event
        self._size = 0

    def feed(self, chunk: bytes) -> bytes:
        # The usual frame: one whole LF-framed event between blocks. One search and one join.
        if (
            self._idle
            and chunk[-2:] == b"\n\n"
            and chunk[0] != 0xEF  # a BOM: see _event_done
            and CR not in chunk
            and chunk.find(b"\n\n") == len(chunk) - 2
        ):
            own_id = _ID_LINE.search(chunk) is not None
            if _DATA_LINE.search(chunk) is None:
                self._aside = self._aside or own_id  # an id alone sets the client's lastEventId too
                return chunk  # a comment or a heartbeat: no id, not logged
            self.seq += 1
            if self._aside or own_id:
                self._aside = True
                out = chunk
            else:
                out = b"".join((chunk[:-1], self._prefix, b"%d\n\n" % self.seq))
            self._on_event(self.seq, out if len(out) <= self._max else None)
            return out
        return self._scan(chunk) if chunk else chunk

    def _scan(self, chunk: bytes) -> bytes:
        """Any chunk: line by line, inserting our id before each blank line that ends an event."""
        out: list[bytes] = []
        emitted = 0  # chunk[:emitted] is in out
        pos = 0  # the start of the current line in chunk
        block = 0  # the start of the current block in chunk
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == LF:
                pos = 1
        for match in _LINE_END.finditer(chunk, pos):
            start, end = match.span()
            if self._line_start and start == pos and not self._head:  # a blank line: the block ends
                self._aside = self._aside or self._own_id  # an id alone sets the client's lastEventId too
                if self._data:
                    self.seq += 1
                    if self._aside:
                        self._event_done(chunk[block:end])
                    else:
                        id_line = self._prefix + b"%d\n" % self.seq
                        out.append(chunk[emitted:start])
                        out.append(id_line)
                        emitted = start
                        self._event_done(chunk[block:start] + id_line + chunk[start:end])
                self._in_block = self._data = self._own_id = False
                self._parts = []
                self._size = 0
                block = end
            else:
                if len(self._head) < _HEAD:
                    self._head += chunk[pos : min(start, pos + _HEAD - len(self._head))]
                self._data = self._data or _is_field(self._head, self._first, b"data")
                self._own_id = self._own_id or _is_field(self._head, self._first, b"id")
                self._in_block = True
            self._first = False
            self._head = b""
            self._line_start = True
            pos = end
        ends_with_cr = chunk[-1] == CR
        self._skip_lf = ends_with_cr
        if pos < len(chunk):  # a line goes on in the next chunk
            if len(self._head) < _HEAD:
                self._head += chunk[pos : pos + _HEAD - len(self._head)]
            self._line_start = False
            self._in_block = True
        if self._in_block:
            self._keep(chunk[block:])
        self._idle = self._line_start and not ends_with_cr and not self._in_block and not self._first
        if not out:
            return chunk
        out.append(chunk[emitted:])
        return b"".join(out)

    def _keep(self, piece: bytes) -> None:
        if self._parts is None or not piece:
            return
        self._size += len(piece)
        if self._size > self._max:
            self._parts = None  # too large to log: reported as None when it ends
        else:
            self._parts.append(piece)

    def _event_done(self, last: bytes) -> None:
        parts = self._parts
        if parts is None or self._size + len(last) > self._max:
            self._on_event(self.seq, None)
            return
        data = b"".join((*parts, last)) if parts else last
        if data.startswith(_BOM):
            # Mid-stream a BOM is part of a field name; at the start of a resumed response a client would
            # strip it. A blank line first (a no-op between events) keeps the meaning it had.
            data = b"\n" + data
        self._on_event(self.seq, data)
