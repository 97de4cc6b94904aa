"""``redis://host:port/db``: logs in Redis Streams, shared by every host (the ``[redis]`` extra).

``redis+cluster://host:port`` puts them in a Redis Cluster (see :mod:`.redis_connect`). Keys of one
stream share a hash tag, so a cluster keeps them in one slot, and every pipeline below (single-key
commands only, no transaction) goes to the one node that holds it:

- ``sse_middleware:{S}``: a Redis Stream. Each entry is one *batch* of events, with id ``<last>-0`` (the
  position of its last event), ``d`` their bytes and ``n`` their sizes; the end marker is ``<last>-1``
  with ``e`` = 1 (complete) or 0. ``XTRIM MINID`` keeps the log's window; ``XREAD BLOCK`` follows it.
- ``sse_middleware:{S}:info``: a hash with the caller digest ``c``, the span link ``l``, the response
  headers ``h`` and the oldest position kept ``f``.
- ``...:request``: the request kept for a takeover (its line, headers but credentials, body), as long as
  the log.
- ``...:writer``: the producer's lease, its random token for ``resume_lease`` seconds, renewed every third
  of that. Every XADD is fenced by it (:data:`_APPEND`, one script: check, renew, append), so a producer
  that lost its lease writes nothing more. A lease that ran out with no end marker means its host died:
  the log is *orphaned* (:meth:`RedisStore.find`, :class:`RedisReader`).
- ``...:readers``: a short-lived key that followers refresh every :data:`TOUCH` seconds, so a producer
  sees that someone follows.

**Per-append cost.** ``write`` appends to a list and, if the flusher sleeps, sets an event: no await, no
network in the app's send path. A flusher task per stream sends everything pending in one pipeline (one
round trip, one XADD for the whole batch), at most every :data:`GATHER` seconds; the batch grows with
the token rate, so the pipeline's cost per event falls as the rate rises.

redis-py's client is asyncio only, so this store is too: under trio it refuses (a StoreError, logged
once), and streams run without resume.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import math
import secrets
import time
import weakref
from typing import Any, Final

from .._core.resume import parse_store_url
from .redis_connect import FAILURES, Client, connect
from .store import Found, Reader, Store, StoreError, StreamInfo, Writer

TOUCH: Final = 2.0  # seconds between a live producer's (and a follower's) signs of life
GATHER: Final = 0.05
"""Seconds a flush waits after the one before, so that one round trip carries the events of a whole
coalescing window: a pipeline costs far more CPU than a token's trip through the middleware. Followers
elsewhere see events this much later; a producer host that dies loses at most this much of its log."""
_ALIVE_MS: Final = int(TOUCH * 3 * 1000)
_APPEND: Final = """
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] then return redis.error_reply('LEASE another producer holds this stream') end
if ARGV[3] ~= '' then redis.call('XADD', KEYS[2], ARGV[3], unpack(ARGV, 4)) end
if ARGV[2] == '-1' then redis.call('DEL', KEYS[1])
elseif ARGV[2] ~= '0' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
return 1
"""
"""One round of a producer, fenced by its lease (KEYS: the lease, the log): refused when another
producer holds the lease; appends the entry ARGV[3] with the fields after it ('': none); then renews
the lease (ARGV[2]: its milliseconds; '0': not this round; '-1': let it go, the log has ended). A lease
that ran out while its producer lived (a long pause) is taken back, unless another host took it."""
_CLAIM: Final = """
local top = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
local id = top[1] and top[1][1] or '0-0'
if string.sub(id, -2) == '-1' then return false end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return false end
return id
"""
"""A takeover's claim (KEYS: the lease, the log): the lease, if nobody holds it and the log has no end
marker; the log's newest entry id then (its last position), read in the same step."""
_TIMEOUT: Final = TOUCH + 5.0  # socket timeout; above the longest XREAD BLOCK
_READ_BATCHES: Final = 64
_BLOCK: Final = TOUCH / 2  # seconds a follower's XREAD waits at most: a dead producer is seen this late
_flushers: set[asyncio.Task[None]] = set()  # strong references: the loop keeps only weak ones


def _chat_key(chat: str) -> str:
    """A chat's index: the id of its latest stream, kept as long as that stream's keys (a tag of its own:
    it is read alone, before the stream is known)."""
    return f"sse_middleware:chat:{{{chat}}}"


def _stop_key(stream: str) -> str:
    return f"sse_middleware:{{{stream}}}:stop"


def _request_key(stream: str) -> str:
    """The request kept with a log, apart from its info: only a takeover reads it (it may be 1 MiB)."""
    return f"sse_middleware:{{{stream}}}:request"


def _keys(stream: str) -> tuple[str, str, str, str]:
    base = f"sse_middleware:{{{stream}}}"
    return base, base + ":info", base + ":writer", base + ":readers"


class RedisStore(Store):
    def __init__(self, url: str) -> None:
        self.url = url
        self._address = parse_store_url(url)
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Client] = (
            weakref.WeakKeyDictionary()
        )

    def client(self) -> Client:
        """This loop's client (a redis-py client belongs to the loop it was made on)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise StoreError(
                "redis:// needs asyncio (redis-py's client is asyncio only) and this server runs another "
                "event loop (trio?); use memory:// there"
            ) from None
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = connect(self._address, timeout=_TIMEOUT, connect_timeout=TOUCH)
        return client

    async def create(
        self, stream: str, info: StreamInfo, ttl: float, lease: float = 6.0, request: bytes = b""
    ) -> Writer:
        client = self.client()
        _, info_key, writer_key, _ = _keys(stream)
        headers = json.dumps([[k.decode("latin-1"), v.decode("latin-1")] for k, v in info.headers])
        token = secrets.token_bytes(16)
        pipe = client.pipeline(transaction=False)
        pipe.hset(info_key, mapping={"c": info.caller, "l": info.link, "h": headers, "f": 1})
        pipe.pexpire(info_key, _live_ms(ttl))
        pipe.set(writer_key, token, px=_lease_ms(lease))
        if request:
            pipe.set(_request_key(stream), request, px=_live_ms(ttl))
        await _execute(pipe)
        return RedisWriter(client, stream, ttl, self, (token, lease))

    async def take(self, stream: str, ttl: float, lease: float) -> tuple[Writer, int] | None:
        client = self.client()
        key, _, writer_key, _ = _keys(stream)
        token = secrets.token_bytes(16)
        pipe = client.pipeline(transaction=False)
        pipe.eval(_CLAIM, 2, writer_key, key, token, _lease_ms(lease))
        (top,) = await _execute(pipe)
        if not top:
            return None
        last, _ = _split_id(top)
        return RedisWriter(client, stream, ttl, self, (token, lease), last), last

    async def request(self, stream: str) -> bytes | None:
        pipe = self.client().pipeline(transaction=False)
        pipe.get(_request_key(stream))
        (kept,) = await _execute(pipe)
        return bytes(kept) if kept else None

    async def find(self, stream: str) -> Found | None:
        key, info_key, writer_key, _ = _keys(stream)
        pipe = self.client().pipeline(transaction=False)
        pipe.hgetall(info_key)
        pipe.exists(writer_key)
        pipe.xrevrange(key, count=1)
        fields, alive, newest = await _execute(pipe)
        if not fields or b"c" not in fields:
            return None
        headers = tuple((k.encode("latin-1"), v.encode("latin-1")) for k, v in json.loads(fields[b"h"]))
        info = StreamInfo(fields[b"c"], fields[b"l"].decode("ascii", "replace"), headers)
        first = int(fields[b"f"])
        last, end = first - 1, None
        if newest:
            entry_id, entry = newest[0]
            seq, kind = _split_id(entry_id)
            last = max(last, seq)
            if kind == 1:
                end = entry.get(b"e") == b"1"
        orphaned = end is None and not alive  # its producer's lease ran out without an end marker
        return Found(info, first, last, False if orphaned else end, orphaned)

    def reader(self, stream: str, after: int) -> Reader:
        return RedisReader(self.client(), stream, after)

    async def chat_stream(self, chat: str) -> str | None:
        pipe = self.client().pipeline(transaction=False)
        pipe.get(_chat_key(chat))
        (stream,) = await _execute(pipe)
        return stream.decode("ascii", "replace") if stream else None

    async def stop(self, stream: str, chat: str = "") -> None:
        """Seen by the producer's flusher at its next sign of life (within TOUCH seconds)."""
        pipe = self.client().pipeline(transaction=False)
        pipe.set(_stop_key(stream), b"1", px=_ALIVE_MS)
        if chat:
            pipe.delete(_chat_key(chat))
        await _execute(pipe)

    async def aclose(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        client = self._clients.pop(loop, None)
        if client is not None:
            await client.aclose()


class RedisWriter(Writer):
    """``lease``: the producer's token and the lease's seconds; ``last``: the position the log is at (a
    producer that takes a stream over goes on from there)."""

    def __init__(
        self,
        client: Client,
        stream: str,
        ttl: float,
        store: RedisStore,
        lease: tuple[bytes, float],
        last: int = 0,
    ) -> None:
        self._client = client
        self._keys = _keys(stream)
        self._token, seconds = lease
        self._lease_ms = _lease_ms(seconds)
        self._beat = min(TOUCH, seconds / 3)  # an idle producer's signs of life, its lease renewed
        self._stream = stream
        self._chat = ""  # the chat index key this log answers, once index() names one
        self._chat_written = True
        self._ttl_ms = max(1, int(ttl * 1000))
        self._store = store
        self._pending: collections.deque[bytes] = collections.deque()
        self._last = last  # the last position written (or skipped as too large)
        self._first = self._first_sent = 1
        self._complete: bool | None = None  # set by end(): the flusher's last round writes the marker
        self._wake = asyncio.Event()
        self._woken = False
        self._done = asyncio.Event()
        self._flushed_at = self._touched_at = -math.inf
        task = self._task = asyncio.get_running_loop().create_task(self._run())
        _flushers.add(task)
        task.add_done_callback(_flushers.discard)

    def write(self, seq: int, data: bytes) -> None:
        self._pending.append(data)
        self._last = seq
        if not self._woken:
            self._woken = True
            self._wake.set()

    def index(self, chat: str) -> None:
        self._chat, self._chat_written = _chat_key(chat), False
        if not self._woken:
            self._woken = True
            self._wake.set()

    def trim(self, first: int) -> None:
        self._first = first
        self._last = max(self._last, first - 1)
        while self._pending and self._last - len(self._pending) + 1 < first:
            self._pending.popleft()

    async def end(self, complete: bool) -> None:
        if self._complete is None:
            self._complete = complete
            self._wake.set()
        await self._done.wait()

    async def _run(self) -> None:
        try:
            while True:
                if not self._pending and self._complete is None:
                    # Idle: wake at least every beat to renew the lease.
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), self._beat)
                gather = self._flushed_at + GATHER - time.monotonic()
                if gather > 0 and self._complete is None:
                    await asyncio.sleep(gather)  # more of the burst joins this batch
                self._wake.clear()
                self._woken = False
                final = self._complete is not None
                if self._pending:  # a lease renewed while idle holds back no event after it
                    # From the flush's start: counted from its end, each round trip would push the next
                    # flush later, until events waited a whole GATHER to reach the store.
                    self._flushed_at = time.monotonic()
                await self._flush(final)
                if final:
                    return
        except StoreError as exc:
            self.failed = True
            self._pending.clear()
            self._store.warn("failed mid-stream", exc)
        finally:
            self._done.set()

    async def _flush(self, final: bool) -> None:
        key, info_key, writer_key, readers_key = self._keys
        now = time.monotonic()
        touch = final or now - self._touched_at >= self._beat / 2  # signs of life: not with every batch
        pipe = self._client.pipeline(transaction=False)
        fence = (_APPEND, 2, writer_key, key, self._token)
        if self._pending:
            batch = list(self._pending)
            self._pending.clear()
            sizes = b",".join(b"%d" % len(data) for data in batch)
            pipe.eval(*fence, self._lease_ms, f"{self._last}-0", "d", b"".join(batch), "n", sizes)
        elif touch and not final:
            pipe.eval(*fence, self._lease_ms, "")
        if self._first != self._first_sent:
            self._first_sent = self._first
            pipe.xtrim(key, minid=f"{self._first}-0", approximate=False)
            pipe.hset(info_key, "f", self._first)
        if not self._chat_written:
            self._chat_written = True
            pipe.set(self._chat, self._stream, px=_live_ms(self._ttl_ms / 1000))
        if final:
            pipe.eval(*fence, -1, f"{self._last}-1", "e", b"1" if self._complete else b"0")
        if touch:
            self._touched_at = now
            expire_ms = self._ttl_ms if final else _live_ms(self._ttl_ms / 1000)
            pipe.pexpire(key, expire_ms)
            pipe.pexpire(info_key, expire_ms)
            pipe.pexpire(_request_key(self._stream), expire_ms)
            if self._chat:
                pipe.pexpire(self._chat, expire_ms)
            pipe.exists(_stop_key(self._stream))
            pipe.exists(readers_key)
        results = await _execute(pipe)
        self._store.recovered()
        if not touch:
            return
        if results[-2] and not final and self.on_stop is not None:
            on_stop, self.on_stop = self.on_stop, None
            on_stop()
        watched = bool(results[-1])
        if watched != self.watched:
            self.watched = watched
            if self.on_watch is not None:
                self.on_watch()


class RedisReader(Reader):
    def __init__(self, client: Client, stream: str, after: int) -> None:
        self._client = client
        self._keys = _keys(stream)
        self._after = after
        self._from = f"{after}-0"

    async def read(self, timeout: float) -> tuple[list[bytes], bool | None]:
        key, _, writer_key, readers_key = self._keys
        block = max(1, int(min(timeout, _BLOCK) * 1000))
        pipe = self._client.pipeline(transaction=False)
        pipe.set(readers_key, b"1", px=_ALIVE_MS)
        pipe.xread({key: self._from}, count=_READ_BATCHES, block=block)
        pipe.exists(writer_key)  # after the wait: a lease that ran out during it is seen now
        _, got, alive = await _execute(pipe)
        out: list[bytes] = []
        for entry_id, entry in got[0][1] if got else ():
            last, kind = _split_id(entry_id)
            self._from = entry_id.decode("ascii")
            if kind == 1:
                return out, entry.get(b"e") == b"1"
            sizes = [int(n) for n in entry[b"n"].split(b",")]
            seq = last - len(sizes) + 1
            if seq > self._after + 1:
                raise StoreError(f"the log no longer holds event {self._after + 1} (its bound moved past it)")
            data, at = entry[b"d"], 0
            for size in sizes:
                if seq > self._after:
                    out.append(data[at : at + size])
                seq += 1
                at += size
            self._after = max(self._after, last)
        if not out and not alive:
            # No producer: ended (a reader past the log's last position reads no marker), or orphaned.
            pipe = self._client.pipeline(transaction=False)
            pipe.xrevrange(key, count=1)
            (newest,) = await _execute(pipe)
            if newest and _split_id(newest[0][0])[1] == 1:
                return out, newest[0][1].get(b"e") == b"1"
            self.orphaned = True  # the producer's lease ran out without an end marker: it died
            return out, False
        return out, None

    async def _watch(self, on: bool) -> None:
        """Every ``read`` says the reader is there; the key expires on its own once they stop."""


def _lease_ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _live_ms(ttl: float) -> int:
    """A live log's keys are refreshed every TOUCH seconds; they must outlive a few missed refreshes."""
    return int(max(ttl, 3 * TOUCH) * 1000) + _ALIVE_MS


def _split_id(entry_id: bytes) -> tuple[int, int]:
    seq, _, kind = entry_id.partition(b"-")
    return int(seq), int(kind or 0)


async def _execute(pipe: Any) -> list[Any]:
    try:
        return list(await pipe.execute())
    except FAILURES as exc:
        raise StoreError(f"redis: {type(exc).__name__}: {exc}") from exc
