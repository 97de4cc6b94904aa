"""The store interface: where a stream's log lives, for its producer and for any number of readers.

A log is a sequence of events numbered from 1 (the positions in the event ids), a record of who may read
it (:class:`StreamInfo`) and, once the stream is over, an end marker. The producer has a :class:`Writer`
(``write`` is synchronous and cheap: no network round trip in the app's send path); a resumed request has
a :class:`Reader`, which replays and then follows without polling until the end marker.

Every failure of a store is a :class:`StoreError`; callers turn it into "no resume", never into a
failed request.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from types import TracebackType

from .._core.errors import logger
from .._core.resume import parse_store_url
from .._exceptions import SSEMiddlewareError

StoredHeaders = tuple[tuple[bytes, bytes], ...]
"""A response's header pairs as a store keeps them: an immutable tuple, so ``StreamInfo`` stays frozen."""


class StoreError(SSEMiddlewareError):
    """The store is unreachable, refused, full, or lost the part of a log a reader needed."""


@dataclasses.dataclass(frozen=True, slots=True)
class StreamInfo:
    """What a store keeps beside the events: who may resume, the span to link to, the response headers."""

    caller: bytes  # resume.bind(stream, identity): a keyed digest, never the credentials
    link: str = ""  # the original stream's span as a W3C traceparent; "" without one
    headers: StoredHeaders = ()  # the original response's headers, for the resumed response


@dataclasses.dataclass(frozen=True, slots=True)
class Found:
    """What a store knows about a stream when a resume asks."""

    info: StreamInfo
    first: int  # the oldest position still kept (a client before ``first - 1`` cannot be resumed)
    last: int  # the newest position written
    end: bool | None  # None: live; True: ended complete; False: ended incomplete, or its producer died
    orphaned: bool = False  # ended False because its producer's lease ran out, with no end marker


class Writer(abc.ABC):
    """The producer's half of one log."""

    failed = False  # the store failed mid-stream: nothing more is written, the log stays unknown
    watched = False  # a reader follows this log now (as far as the store knows)
    on_watch: Callable[[], None] | None = None  # called when ``watched`` changes
    on_stop: Callable[[], None] | None = None  # called once someone asked, through the store, to stop it

    @abc.abstractmethod
    def write(self, seq: int, data: bytes) -> None:
        """Add event ``seq`` (the next position). Synchronous and cheap: never a network round trip."""

    @abc.abstractmethod
    def trim(self, first: int) -> None:
        """Positions before ``first`` need not be kept any more (the log's bound)."""

    @abc.abstractmethod
    async def end(self, complete: bool) -> None:
        """Write what is pending and the end marker; the log is kept ``ttl`` seconds from now."""

    def index(self, chat: str) -> None:  # noqa: B027 - a store without a chat index finds no chat
        """Name this log as the latest stream of ``chat`` (a :func:`~.._core.chat.chat_key`), for as long
        as the log is kept. Synchronous and cheap, like ``write``."""


class Reader(abc.ABC):
    """A resumed request's view of one log, from a position on. ``async with`` it: while open, the
    producer sees it as watched."""

    orphaned = False  # the end False that ``read`` returned: the producer's lease ran out, no end marker

    @abc.abstractmethod
    async def read(self, timeout: float) -> tuple[list[bytes], bool | None]:
        """The next events after those already read, in order, each once, waiting up to ``timeout``
        seconds for the first; and the end: None while the log is live, True/False once it ended
        (complete or not), reported only after its last event. Raises StoreError on a failure or a gap."""

    async def __aenter__(self) -> Reader:
        await self._watch(True)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._watch(False)

    @abc.abstractmethod
    async def _watch(self, on: bool) -> None: ...


class Store(abc.ABC):
    _warned = False

    def warn(self, what: str, exc: BaseException) -> None:
        """Log a failure once per outage (until :meth:`recovered`): a down store must not flood logs."""
        if not self._warned:
            self._warned = True
            name = type(self).__name__
            logger.warning("resume store %s: %s (%s); streams go on without resume", what, exc, name)

    def recovered(self) -> None:
        self._warned = False

    @abc.abstractmethod
    async def create(
        self, stream: str, info: StreamInfo, ttl: float, lease: float = 6.0, request: bytes = b""
    ) -> Writer:
        """Start a log; raises StoreError (then the stream runs without resume). ``lease``: seconds the
        producer's lease lasts unless its writer renews it (a store shared by hosts; see
        :class:`Found`'s ``orphaned``). ``request``: a :class:`~.._core.resume.KeptRequest`, encoded,
        kept as long as the log for a host that takes the stream over (b"": none)."""

    async def take(self, stream: str, ttl: float, lease: float) -> tuple[Writer, int] | None:
        """Take over an orphaned log (its producer's lease ran out, no end marker): at most one caller,
        on any host, gets its writer (going on after the position returned, the log's last) and the
        lease; None for every other, and when the log has ended. Raises StoreError."""
        return None

    async def request(self, stream: str) -> bytes | None:
        """The request :meth:`create` kept with the log, if any; raises StoreError."""
        return None

    @abc.abstractmethod
    async def find(self, stream: str) -> Found | None:
        """The log's state, None if unknown or expired; raises StoreError."""

    @abc.abstractmethod
    def reader(self, stream: str, after: int) -> Reader:
        """Read the log from position ``after + 1`` (the client has everything up to ``after``)."""

    async def chat_stream(self, chat: str) -> str | None:
        """The stream :meth:`Writer.index` last named for ``chat``, if still kept; raises StoreError."""
        return None

    async def stop(self, stream: str, chat: str = "") -> None:  # noqa: B027 - then nothing stops through it
        """Ask the producer of a live stream, on whichever host, to stop it (its writer's ``on_stop``);
        ``chat``'s index no longer names it from now on, though its producer may see the stop later."""

    async def aclose(self) -> None:  # noqa: B027 - most stores hold nothing to let go of
        """Let go of connections."""


def open_store(url: str) -> Store:
    """A store for a ``resume_store`` URL (validated by the settings already)."""
    address = parse_store_url(url)
    if address.kind == "redis":
        from .redis_store import RedisStore  # only with the [redis] extra

        return RedisStore(address.url)
    from .memory import MemoryStore

    return MemoryStore(address.max_bytes)
