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
  of that. Every XADD is fenced by it (one script: check, append, renew; :mod:`.redis_writer`), so a
  producer that lost its lease writes nothing more. A lease that ran out with no end marker means its
  host died: the log is *orphaned* (:meth:`RedisStore.find`, :class:`RedisReader`).
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
import json
import secrets
import weakref
from typing import Final

from .._core.resume import parse_store_url
from .redis_connect import Client, connect
from .redis_keys import (
    ALIVE_MS,
    GATHER,
    TOUCH,
    chat_key,
    execute,
    keys,
    lease_ms,
    live_ms,
    request_key,
    split_id,
    stop_key,
)
from .redis_writer import RedisWriter
from .store import Found, Reader, Store, StoreError, StreamInfo, Writer

__all__ = ["GATHER", "TOUCH", "RedisReader", "RedisStore", "RedisWriter"]

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
        _, info_key, writer_key, _ = keys(stream)
        headers = json.dumps([[k.decode("latin-1"), v.decode("latin-1")] for k, v in info.headers])
        token = secrets.token_bytes(16)
        pipe = client.pipeline(transaction=False)
        pipe.hset(info_key, mapping={"c": info.caller, "l": info.link, "h": headers, "f": 1})
        pipe.pexpire(info_key, live_ms(ttl))
        pipe.set(writer_key, token, px=lease_ms(lease))
        if request:
            pipe.set(request_key(stream), request, px=live_ms(ttl))
        await execute(pipe)
        return RedisWriter(client, stream, ttl, self, (token, lease))

    async def take(self, stream: str, ttl: float, lease: float) -> tuple[Writer, int] | None:
        client = self.client()
        key, _, writer_key, _ = keys(stream)
        token = secrets.token_bytes(16)
        pipe = client.pipeline(transaction=False)
        pipe.eval(_CLAIM, 2, writer_key, key, token, lease_ms(lease))
        (top,) = await execute(pipe)
        if not top:
            return None
        last, _ = split_id(top)
        return RedisWriter(client, stream, ttl, self, (token, lease), last), last

    async def request(self, stream: str) -> bytes | None:
        pipe = self.client().pipeline(transaction=False)
        pipe.get(request_key(stream))
        (kept,) = await execute(pipe)
        return bytes(kept) if kept else None

    async def find(self, stream: str) -> Found | None:
        key, info_key, writer_key, _ = keys(stream)
        pipe = self.client().pipeline(transaction=False)
        pipe.hgetall(info_key)
        pipe.exists(writer_key)
        pipe.xrevrange(key, count=1)
        fields, alive, newest = await execute(pipe)
        if not fields or b"c" not in fields:
            return None
        headers = tuple((k.encode("latin-1"), v.encode("latin-1")) for k, v in json.loads(fields[b"h"]))
        info = StreamInfo(fields[b"c"], fields[b"l"].decode("ascii", "replace"), headers)
        first = int(fields[b"f"])
        last, end = first - 1, None
        if newest:
            entry_id, entry = newest[0]
            seq, kind = split_id(entry_id)
            last = max(last, seq)
            if kind == 1:
                end = entry.get(b"e") == b"1"
        orphaned = end is None and not alive  # its producer's lease ran out without an end marker
        return Found(info, first, last, False if orphaned else end, orphaned)

    def reader(self, stream: str, after: int) -> Reader:
        return RedisReader(self.client(), stream, after)

    async def chat_stream(self, chat: str) -> str | None:
        pipe = self.client().pipeline(transaction=False)
        pipe.get(chat_key(chat))
        (stream,) = await execute(pipe)
        return stream.decode("ascii", "replace") if stream else None

    async def stop(self, stream: str, chat: str = "") -> None:
        """Seen by the producer's flusher at its next sign of life (within TOUCH seconds)."""
        pipe = self.client().pipeline(transaction=False)
        pipe.set(stop_key(stream), b"1", px=ALIVE_MS)
        if chat:
            pipe.delete(chat_key(chat))
        await execute(pipe)

    async def aclose(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        client = self._clients.pop(loop, None)
        if client is not None:
            await client.aclose()


class RedisReader(Reader):
    def __init__(self, client: Client, stream: str, after: int) -> None:
        self._client = client
        self._keys = keys(stream)
        self._after = after
        self._from = f"{after}-0"

    async def read(self, timeout: float) -> tuple[list[bytes], bool | None]:
        key, _, writer_key, readers_key = self._keys
        block = max(1, int(min(timeout, _BLOCK) * 1000))
        pipe = self._client.pipeline(transaction=False)
        pipe.set(readers_key, b"1", px=ALIVE_MS)
        pipe.xread({key: self._from}, count=_READ_BATCHES, block=block)
        pipe.exists(writer_key)  # after the wait: a lease that ran out during it is seen now
        _, got, alive = await execute(pipe)
        out: list[bytes] = []
        for entry_id, entry in got[0][1] if got else ():
            last, kind = split_id(entry_id)
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
            (newest,) = await execute(pipe)
            if newest and split_id(newest[0][0])[1] == 1:
                return out, newest[0][1].get(b"e") == b"1"
            self.orphaned = True  # the producer's lease ran out without an end marker: it died
            return out, False
        return out, None

    async def _watch(self, on: bool) -> None:
        """Every ``read`` says the reader is there; the key expires on its own once they stop."""
