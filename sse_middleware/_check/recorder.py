"""What a check saw, as data: the response head and timed reads in, a :class:`Timeline` out.

Sans-I/O: the caller passes ``now`` (seconds since the request was sent) with each read, so the rules can
be tested with made-up timelines. Compressed bodies are decoded here to find the events; the timeline
keeps the wire sizes, so the report can still say the stream was compressed.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from .._core.headers import stream_kind
from .._core.sse import Comment, Event, Framer, Parser
from . import protocol

Ending = Literal["end", "cut", "timeout"]

CONTENT: Final = "content"  # an event (or a line) that carries output
EVENT: Final = "event"  # an event without output (a role chunk, usage, ...)
HEARTBEAT: Final = "heartbeat"  # a comment, or an event that only keeps the connection alive
END: Final = "end"  # the protocol's end marker
ERROR: Final = "error"  # an error event


@dataclass(frozen=True, slots=True)
class Arrival:
    at: float
    kind: str
    detail: str = ""  # an error event's message


@dataclass
class Timeline:
    """Everything one check saw. Times are seconds since the request was sent."""

    status: int = 0
    http_version: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    headers_at: float = 0.0
    sse: bool = True  # text/event-stream; otherwise a line stream (text/plain, NDJSON): a line is a unit
    reads: list[tuple[float, int]] = field(default_factory=list)  # (time, bytes on the wire)
    arrivals: list[Arrival] = field(default_factory=list)
    body_bytes: int = 0  # decoded
    dialect: str = ""
    protocol: str | None = None  # the format whose end marker the stream owes, when it showed one
    end_at: float = 0.0
    ending: Ending = "end"
    reason: str = ""  # why the stream was cut
    unfinished: int = 0  # bytes of an event still open when the stream stopped
    encoding: str | None = None  # the Content-Encoding decoded (None: identity)
    split_reads: int = 0  # compressed reads that stopped inside an event (or a line)

    def header(self, name: str) -> str | None:
        values = [value for key, value in self.headers if key.lower() == name]
        return ", ".join(values) if values else None

    def times(self, *kinds: str) -> list[float]:
        return [a.at for a in self.arrivals if a.kind in kinds]


class Recorder:
    def __init__(self) -> None:
        self.timeline = Timeline()
        self._parser = Parser(comments=True)
        self._framer = Framer()
        self._open_line = False  # a line stream's unfinished line has text
        self._decoder: zlib._Decompress | None = None
        self._raw_deflate_possible = False
        self._content: Callable[[Event], tuple[str, bool]] = protocol.content_reader()

    def response(self, now: float, status: int, version: str, headers: list[tuple[str, str]]) -> str | None:
        """Record the response head. Returns why it is not a stream (the check ends with exit 2), or None."""
        tl = self.timeline
        tl.headers_at, tl.status, tl.http_version, tl.headers = now, status, version, headers
        if not 200 <= status < 300:
            return f"HTTP {status}: not a successful response"
        content_type = tl.header("content-type") or ""
        if stream_kind([(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]) is None:
            return (
                f"not a stream: Content-Type {content_type or '(none)'!r}"
                + (
                    f" with Content-Length {tl.header('content-length')}"
                    if tl.header("content-length")
                    else ""
                )
                + " (a stream is text/event-stream, or text/plain or NDJSON without a Content-Length)"
            )
        tl.sse = content_type.partition(";")[0].strip().lower() == "text/event-stream"
        encoding = (tl.header("content-encoding") or "identity").strip().lower()
        tl.encoding = None if encoding == "identity" else encoding
        if encoding in ("gzip", "x-gzip"):
            self._decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":  # meant to be zlib-wrapped, sometimes raw: the first bytes decide
            self._decoder = zlib.decompressobj(zlib.MAX_WBITS)
            self._raw_deflate_possible = True
        elif encoding != "identity":
            return (
                f"Content-Encoding {encoding!r} cannot be decoded (gzip and deflate can); "
                "retry with -H 'Accept-Encoding: identity' to see the events"
            )
        return None

    def feed(self, now: float, wire: bytes) -> None:
        """One read's bytes as they came off the wire. Raises ``ValueError`` for a corrupt compressed body."""
        tl = self.timeline
        tl.reads.append((now, len(wire)))
        data = self._decode(wire)
        self._body(now, data)
        if self._decoder is not None and (self._framer.pending if tl.sse else self._open_line):
            tl.split_reads += 1  # the compressor flushed by size, not at the end of a frame

    def close(self, now: float, ending: Ending, reason: str = "") -> Timeline:
        tl = self.timeline
        if self._decoder is not None and ending == "end":
            self._body(now, self._decoder.flush())
        if tl.sse:
            self._observe(now, self._parser.close())
            tl.unfinished = self._framer.pending
        elif self._open_line:
            tl.arrivals.append(Arrival(now, CONTENT))
        tl.end_at, tl.ending, tl.reason = now, ending, reason
        return tl

    def _decode(self, wire: bytes) -> bytes:
        if self._decoder is None:
            return wire
        try:
            try:
                return self._decoder.decompress(wire)
            except zlib.error:
                if not self._raw_deflate_possible:
                    raise
                self._decoder = zlib.decompressobj(-zlib.MAX_WBITS)
                return self._decoder.decompress(wire)
            finally:
                self._raw_deflate_possible = False
        except zlib.error as exc:
            raise ValueError(f"the compressed body is corrupt ({exc})") from exc

    def _body(self, now: float, data: bytes) -> None:
        tl = self.timeline
        tl.body_bytes += len(data)
        if tl.sse:
            self._framer.feed(data)
            self._observe(now, self._parser.feed(data))
            return
        *lines, rest = data.split(b"\n")
        for line in lines:
            if self._open_line or line.strip():
                tl.arrivals.append(Arrival(now, CONTENT))
            self._open_line = False
        self._open_line = self._open_line or bool(rest.strip())

    def _observe(self, now: float, items: list[Event | Comment]) -> None:
        tl = self.timeline
        for item in items:
            if isinstance(item, Comment) or protocol.is_heartbeat(item):
                tl.arrivals.append(Arrival(now, HEARTBEAT))
                continue
            error = protocol.error_message(item)
            if error is not None:
                tl.arrivals.append(Arrival(now, ERROR, error))
                continue
            if protocol.is_end(item):
                tl.arrivals.append(Arrival(now, END))
                continue
            dialect, content = self._content(item)
            tl.dialect = tl.dialect or dialect
            tl.protocol = tl.protocol or protocol.protocol(dialect, item)
            tl.arrivals.append(Arrival(now, CONTENT if content else EVENT))
