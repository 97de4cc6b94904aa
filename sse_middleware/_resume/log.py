"""The producer's side of one resumable stream: what the responder calls, frame by frame.

Made by :meth:`~sse_middleware._asgi.resume.Resumption.open` at stream start (None when resume is off or
the store is down: then the stream runs exactly as without resume). Then, precisely:

``data = log.append(frame)``
    For every frame the responder is about to send on an SSE stream (app frames, merged frames, the
    error event; *not* heartbeats, which the resumed response makes itself, though a comment is harmless:
    it gets no id and is not logged). Returns the bytes to send in its place: the same events with an
    ``id:`` line each (see :mod:`.._core.tagger`); the frame object itself when it holds no event.
    Synchronous, no await, no network: the whole events go to the store's writer, which batches them.
    Call it *before* sending, so the log is never behind what a client has.

``await log.close(complete)``
    Once, when the stream is over: ``complete`` is False when it was cut (the app was cancelled, a
    deadline passed) rather than ended by the app or with its error event. Writes what is pending and the
    end marker; the log is then kept ``resume_ttl`` seconds. Bounded: wrap it like every cleanup await.

``log.client_left()``
    The original client is gone. From then on :attr:`unwatched_since` says since when no one has been
    reading; it is ``math.inf`` while the original client or any follower reads.

``log.on_change``
    Set it to a function (the timer's wake-up) called when :attr:`unwatched_since` may have changed, so a
    sleeping timer can re-arm: the deadline for ending an abandoned generation is
    ``log.unwatched_since + resume_abandon_after``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from .._core.resume import Window
from .._core.tagger import Tagger
from .store import Writer


class StreamLog:
    __slots__ = ("_client_here", "_since", "_tagger", "_window", "_writer", "on_change", "stream")

    def __init__(self, stream: str, writer: Writer, max_bytes: int) -> None:
        self.stream = stream
        self._writer = writer
        self._window = Window(max_bytes)
        self._tagger = Tagger(stream, self._record, max_bytes)
        self._client_here = True
        self._since = math.inf
        self.on_change: Callable[[], None] | None = None
        writer.on_watch = self._watch_changed

    def going_on(self, last: int) -> StreamLog:
        """This log goes on after position ``last`` (a stream taken over: its events so far are logged)."""
        self._tagger.seq = self._window.last = last
        return self

    def index(self, chat: str) -> None:
        """This log is the latest stream of ``chat`` (a chat key), for the AI SDK's resume."""
        if not self._writer.failed:
            self._writer.index(chat)

    def on_stop(self, stop: Callable[[], None]) -> None:
        """Call ``stop`` (once) when someone asks, through the store, to stop this stream."""
        self._writer.on_stop = stop

    def append(self, frame: bytes) -> bytes:
        return self._tagger.feed(frame)

    def _record(self, seq: int, data: bytes | None) -> None:
        writer = self._writer
        moved = self._window.add(None if data is None else len(data))
        if writer.failed:
            return
        if data is not None:
            writer.write(seq, data)
        if moved:
            writer.trim(self._window.first)

    @property
    def events(self) -> int:
        """Events written so far (the position of the last one)."""
        return self._tagger.seq

    @property
    def failed(self) -> bool:
        """The store failed mid-stream: live delivery goes on; a later resume of it is unknown."""
        return self._writer.failed

    async def close(self, complete: bool) -> None:
        if not self._writer.failed:
            await self._writer.end(complete)

    def client_left(self) -> None:
        if self._client_here:
            self._client_here = False
            self._watch_changed()

    @property
    def unwatched_since(self) -> float:
        return self._since

    def _watch_changed(self) -> None:
        watched = self._client_here or self._writer.watched
        if watched:
            self._since = math.inf
        elif self._since == math.inf:
            self._since = time.monotonic()
        if self.on_change is not None:
            self.on_change()
