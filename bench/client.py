"""A lean HTTP/1.1 SSE client on asyncio protocols: thousands of streams from one process.

What it counts, per stream:
- ``chunks``: HTTP chunked-encoding chunks with data, i.e. body writes the server put on the wire (one
  per non-empty ASGI ``http.response.body``). This is the ``frames`` in ``frames_per_token``: it does not
  depend on how TCP happened to batch bytes into reads.
- ``reads``: ``data_received`` calls (TCP reads), for reference; these do depend on timing.
- ``events``: SSE events after parsing (blank-line separated), ``heartbeats``: comment-only events.
- ``chars``: content text characters (``choices[0].delta.content``), to prove every token arrived.
- ``ttft``: request written -> the first event carrying non-empty content text.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field


@dataclass(slots=True)
class StreamStats:
    sent_at: float = 0.0
    ttft: float | None = None
    chunks: int = 0
    reads: int = 0
    events: int = 0
    heartbeats: int = 0
    chars: int = 0
    status: int = 0
    complete: bool = False
    trace: list[tuple[float, int]] | None = None
    """(seconds since the request, content characters) per content event, when tracing."""


class SSEClient(asyncio.Protocol):
    """One request, one streamed response. ``opened`` fires at the first event, ``done`` at the end."""

    def __init__(self, request: bytes, parse_json: bool = True, trace: bool = False) -> None:
        self.request = request
        self.parse_json = parse_json
        self.stats = StreamStats(trace=[] if trace else None)
        loop = asyncio.get_running_loop()
        self.opened: asyncio.Future[None] = loop.create_future()
        self.done: asyncio.Future[StreamStats] = loop.create_future()
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._head = True
        self._need = -1  # bytes of chunk data (plus CRLF) still expected; -1: at a size line
        self._sse = bytearray()
        self._leaving = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self) -> None:
        if self.transport is None:
            raise RuntimeError("not connected")
        self.stats.sent_at = time.perf_counter()
        self.transport.write(self.request)

    def close(self) -> None:
        """Leave (as a client that stops reading does); not an error for this stream's futures."""
        self._leaving = True
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._leaving:
            for fut in (self.opened, self.done):
                fut.cancel()
            return
        for fut in (self.opened, self.done):
            if not fut.done():
                fut.set_exception(ConnectionError(f"closed early: {exc}"))

    def data_received(self, data: bytes) -> None:
        self.stats.reads += 1
        buf = self._buf
        buf += data
        if self._head:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            self.stats.status = int(buf[9:12])
            del buf[: end + 4]
            self._head = False
        pos = 0
        while True:
            if self._need < 0:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                size = int(buf[pos:eol].split(b";", 1)[0], 16)
                pos = eol + 2
                if size == 0:
                    self._events()
                    self._finish()
                    del buf[:]
                    return
                self._need = size
            if len(buf) - pos < self._need + 2:
                break
            self.stats.chunks += 1
            self._sse += buf[pos : pos + self._need]
            pos += self._need + 2
            self._need = -1
        del buf[:pos]
        self._events()

    def _events(self) -> None:
        sse = self._sse
        if b"\r" in sse:
            sse[:] = sse.replace(b"\r\n", b"\n")
        start = 0
        now = time.perf_counter()
        while True:
            end = sse.find(b"\n\n", start)
            if end < 0:
                break
            self._event(bytes(sse[start:end]), now)
            start = end + 2
        del sse[:start]

    def _event(self, block: bytes, now: float) -> None:
        st = self.stats
        st.events += 1
        if not self.opened.done():
            self.opened.set_result(None)
        if block.startswith(b":"):
            st.heartbeats += 1
            return
        if b'"content":"' not in block:
            return
        if not self.parse_json:
            chars = 0 if b'"content":""' in block else 1
        else:
            data = "\n".join(
                line[5:].lstrip(" ") for line in block.decode().split("\n") if line.startswith("data:")
            )
            chars = 0
            for choice in json.loads(data).get("choices", ()):
                chars += len(choice.get("delta", {}).get("content") or "")
        if chars and st.ttft is None:
            st.ttft = now - st.sent_at
        st.chars += chars
        if st.trace is not None:
            st.trace.append((now - st.sent_at, chars))

    def _finish(self) -> None:
        self.stats.complete = True
        if not self.done.done():
            self.done.set_result(self.stats)
        if self.transport is not None:
            self.transport.close()


def request_bytes(port: int, path: str, **query: object) -> bytes:
    qs = "&".join(f"{k}={v}" for k, v in query.items())
    return (
        f"GET {path}?{qs} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()


async def open_stream(port: int, request: bytes, parse_json: bool = True, trace: bool = False) -> SSEClient:
    """Connect, then write the request (so TTFT excludes the TCP handshake)."""
    loop = asyncio.get_running_loop()
    _, proto = await loop.create_connection(lambda: SSEClient(request, parse_json, trace), "127.0.0.1", port)
    proto.send()
    return proto


@dataclass(slots=True)
class Totals:
    streams: int = 0
    complete: int = 0
    chunks: int = 0
    reads: int = 0
    events: int = 0
    heartbeats: int = 0
    chars: int = 0
    ttfts: list[float] = field(default_factory=list)

    def add(self, st: StreamStats) -> None:
        self.streams += 1
        self.complete += st.complete
        self.chunks += st.chunks
        self.reads += st.reads
        self.events += st.events
        self.heartbeats += st.heartbeats
        self.chars += st.chars
        if st.ttft is not None:
            self.ttfts.append(st.ttft)
