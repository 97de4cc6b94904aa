"""``memory://``: logs in this process, no dependency. Resumes reach them only in this process (one
worker); use ``redis://`` for several workers or hosts.

Bounded twice: each log by its window (``resume_max_bytes``), and the store by ``max_bytes`` over all
logs (``memory://?max_bytes=N``), counting each event with its overhead. Ended logs go ``ttl`` seconds
after their end, or sooner, oldest first, when the store is over its bound; a live log is never evicted,
and while the store is over its bound no new log starts (those streams run without resume). Expiry is
lazy, on the next ``create`` or ``find``: no timer task.

Following needs no polling: a reader waits on an event the writer sets, and only when a reader waits
does a ``write`` do more than store the bytes.
"""

from __future__ import annotations

import heapq
import math
import time

import anyio

from .._core.resume import ENTRY_OVERHEAD
from .store import Found, Reader, Store, StoreError, StreamInfo, Writer

_READ_BATCH = 256  # events per read: a long replay goes out in pieces, not as one huge body


class _Log:
    __slots__ = ("chat", "end", "entries", "first", "info", "last", "readers", "size", "wake", "writer")

    def __init__(self, info: StreamInfo) -> None:
        self.info = info
        self.entries: dict[int, bytes] = {}  # O(1) trims from the front and reads from any position
        self.first = 1
        self.last = 0
        self.size = 0
        self.end: bool | None = None
        self.readers = 0
        self.wake: anyio.Event | None = None  # made by a waiting reader, set by the next write
        self.writer: MemoryWriter | None = None
        self.chat = ""  # the chat this log answers (MemoryWriter.index), if any

    def notify(self) -> None:
        if self.wake is not None:
            self.wake.set()
            self.wake = None


class MemoryStore(Store):
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0  # bytes held by all logs, with the per-event overhead
        self._logs: dict[str, _Log] = {}
        self._expiry: list[tuple[float, str]] = []  # (when, stream) of ended logs, a heap
        self._chats: dict[str, str] = {}  # chat key -> its latest stream

    async def create(
        self, stream: str, info: StreamInfo, ttl: float, lease: float = 6.0, request: bytes = b""
    ) -> Writer:
        # One process: a producer that dies takes its readers with it, so no lease and no request is kept.
        self._sweep()
        if self.size > self.max_bytes:
            raise StoreError(f"the memory store is full ({self.size} of {self.max_bytes} bytes in live logs)")
        log = self._logs[stream] = _Log(info)
        writer = log.writer = MemoryWriter(self, log, stream, ttl)
        return writer

    async def find(self, stream: str) -> Found | None:
        self._sweep()
        log = self._logs.get(stream)
        if log is None:
            return None
        return Found(log.info, log.first, log.last, log.end)

    async def chat_stream(self, chat: str) -> str | None:
        self._sweep()
        return self._chats.get(chat)

    async def stop(self, stream: str, chat: str = "") -> None:
        if chat and self._chats.get(chat) == stream:
            del self._chats[chat]
        log = self._logs.get(stream)
        writer = log.writer if log is not None and log.end is None else None
        if writer is not None and writer.on_stop is not None:
            writer.on_stop()

    def reader(self, stream: str, after: int) -> Reader:
        log = self._logs.get(stream)
        if log is None:
            raise StoreError("the log is gone")
        return MemoryReader(log, after)

    def _sweep(self) -> None:
        """Drop ended logs past their time, then the oldest ended ones while over the bound."""
        now = time.monotonic()
        while self._expiry and (self._expiry[0][0] <= now or self.size > self.max_bytes):
            _, stream = heapq.heappop(self._expiry)
            log = self._logs.pop(stream, None)
            if log is not None:
                if log.chat and self._chats.get(log.chat) == stream:
                    del self._chats[log.chat]
                self.size -= log.size
                log.entries.clear()
                log.size = 0
                log.first = log.last + 1  # a reader still on it sees a gap, not a KeyError

    def _ended(self, stream: str, ttl: float) -> None:
        heapq.heappush(self._expiry, (time.monotonic() + ttl, stream))
        self._sweep()


class MemoryWriter(Writer):
    def __init__(self, store: MemoryStore, log: _Log, stream: str, ttl: float) -> None:
        self._store = store
        self._log = log
        self._stream = stream
        self._ttl = ttl

    def write(self, seq: int, data: bytes) -> None:
        log = self._log
        log.entries[seq] = data
        log.last = seq
        cost = len(data) + ENTRY_OVERHEAD
        log.size += cost
        self._store.size += cost
        if log.wake is not None:
            log.notify()

    def index(self, chat: str) -> None:
        self._log.chat = chat
        self._store._chats[chat] = self._stream

    def trim(self, first: int) -> None:
        log = self._log
        freed = 0
        while log.first < first:
            data = log.entries.pop(log.first, None)
            if data is not None:
                freed += len(data) + ENTRY_OVERHEAD
            log.first += 1
        log.last = max(log.last, first - 1)  # an event too large to keep still counts as written
        log.size -= freed
        self._store.size -= freed

    async def end(self, complete: bool) -> None:
        log = self._log
        if log.end is None:
            log.end = complete
            log.notify()
            self._store._ended(self._stream, self._ttl)

    def _watch_changed(self) -> None:
        watched = self._log.readers > 0
        if watched != self.watched:
            self.watched = watched
            if self.on_watch is not None:
                self.on_watch()


class MemoryReader(Reader):
    def __init__(self, log: _Log, after: int) -> None:
        self._log = log
        self._after = after

    async def read(self, timeout: float) -> tuple[list[bytes], bool | None]:
        log = self._log
        if log.last <= self._after and log.end is None:
            if log.wake is None:
                log.wake = anyio.Event()
            wake = log.wake
            with anyio.move_on_after(timeout if timeout != math.inf else None):
                await wake.wait()
        if self._after + 1 < log.first:
            raise StoreError(f"the log no longer holds event {self._after + 1} (its bound moved past it)")
        upto = min(log.last, self._after + _READ_BATCH)
        out = [log.entries[seq] for seq in range(self._after + 1, upto + 1)]
        self._after = max(self._after, upto)
        return out, log.end if self._after >= log.last else None

    async def _watch(self, on: bool) -> None:
        self._log.readers += 1 if on else -1
        if self._log.writer is not None:
            self._log.writer._watch_changed()
