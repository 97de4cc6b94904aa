"""What every write of a stream shares, below the :class:`~.writer.Writer`: the write lock, the narrow
interface of the stream it writes for, and the body messages it sends."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Final, Protocol

import anyio

from .._core.deadlines import Clocks
from .._core.errors import ErrorInfo
from .._core.lifecycle import Lifecycle
from .._core.pipeline import Pipeline
from .._types import Message, Send

if TYPE_CHECKING:
    from .._core.compress import Compressor
    from .._resume.log import StreamLog
    from .._telemetry.recorder import StreamTelemetry
    from .backend import TaskCut
    from .watcher import Watcher

BODY: Final = "http.response.body"


class Ends(Protocol):
    """What the writer may ask of the stream it writes for: how the app's run takes what happened."""

    def client_left(self, *, cancel_app: bool) -> bool: ...

    def end(self, info: ErrorInfo | None) -> None: ...

    def invalid_output(self) -> ErrorInfo: ...


class WriteLock:
    """The one lock around the server's ``send``. A flag, not ``anyio.Lock``: the app's own sends (nearly
    all of them) find it free and pay two attribute writes, where ``anyio.Lock`` costs microseconds per
    token even with ``fast_acquire``. The watcher's and the guards' writes can find it taken; the
    watcher never queues behind a write that a slow client holds up (see :mod:`.stream_timers`)."""

    __slots__ = ("busy", "waiting")

    def __init__(self) -> None:
        self.busy = False
        self.waiting: anyio.Event | None = None  # set when the lock is freed, if someone waits for it

    async def take(self) -> None:
        """Take the lock, without an await when it is free (the per-token path inlines this)."""
        while self.busy:
            await self.freed().wait()
        self.busy = True

    def free(self) -> None:
        """Free the lock (the per-token path inlines this when nobody is ``waiting``)."""
        self.busy = False
        if self.waiting is not None:
            self.waiting.set()
            self.waiting = None

    def freed(self) -> anyio.Event:
        """An event set when the write in progress ends."""
        if self.waiting is None:
            self.waiting = anyio.Event()
        return self.waiting


class WriterState:
    """The state every part of :class:`~.writer.Writer` shares: its slots, here in the one base class of
    the parts (:class:`~.writer_watch.WatchedWrites`, :class:`~.last_write.LastWrites`, the writer itself),
    which add methods only."""

    __slots__ = (
        "_ends",
        "_in_flight",
        "_send",
        "_tell_stuck_at",
        "_trailers",
        "clocks",
        "index",
        "last_frame",
        "life",
        "lock",
        "log",
        "pipe",
        "sending_since",
        "telemetry",
        "timeout",
        "watcher",
    )

    _send: Send
    _ends: Ends
    _trailers: bool
    _in_flight: anyio.CancelScope | TaskCut | None
    life: Lifecycle
    last_frame: bytes
    pipe: Pipeline
    telemetry: StreamTelemetry | None
    watcher: Watcher
    log: StreamLog | None
    lock: WriteLock
    timeout: float
    sending_since: float
    clocks: Clocks


def body_bytes(body: object) -> bytes:
    """A body that is not ``bytes``: copied when it is bytes-like, else the app's ``TypeError``."""
    if not isinstance(body, (bytearray, memoryview)):
        raise TypeError(f"http.response.body 'body' must be bytes, got {type(body).__name__}")
    return bytes(body)


def body_frame(data: bytes) -> Message:
    """A body message with more to come."""
    return {"type": BODY, "body": data, "more_body": True}


def compressing(send: Send, encoder: Compressor) -> Send:
    """The server's ``send`` for a compressed stream: each message :func:`encoded` on its way."""

    def send_encoded(message: Message) -> Awaitable[None]:
        return send(encoded(encoder, message))

    return send_encoded


def encoded(encoder: Compressor, message: Message) -> Message:
    """``message`` as it leaves a compressed stream: a body compressed and flushed (the last one ends
    the compressed stream), trailers as they are. Any other message would carry bytes the compressor
    never saw (a file sent by the server itself): the app's error, before anything of it is written."""
    kind = message["type"]
    if kind == BODY:
        data = message.get("body", b"")
        more = message.get("more_body", False)
        return {"type": BODY, "body": encoder.frame(data) if more else encoder.end(data), "more_body": more}
    if kind == "http.response.trailers":
        return message
    raise RuntimeError(f"{kind} cannot be sent on a stream the middleware compresses (compress='auto')")
