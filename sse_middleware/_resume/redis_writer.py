"""The producer's side of a Redis log: events batched into one fenced round trip per flush, the lease
renewed (see :mod:`.redis_store` for the keys)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import time
from typing import Final

from .redis_connect import Client
from .redis_keys import GATHER, TOUCH, chat_key, execute, keys, lease_ms, live_ms, request_key, stop_key
from .store import Store, StoreError, Writer

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
_flushers: set[asyncio.Task[None]] = set()  # strong references: the loop keeps only weak ones


class RedisWriter(Writer):
    """``lease``: the producer's token and the lease's seconds; ``last``: the position the log is at (a
    producer that takes a stream over goes on from there)."""

    def __init__(
        self,
        client: Client,
        stream: str,
        ttl: float,
        store: Store,
        lease: tuple[bytes, float],
        last: int = 0,
    ) -> None:
        self._client = client
        self._keys = keys(stream)
        self._token, seconds = lease
        self._lease_ms = lease_ms(seconds)
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
        self._chat, self._chat_written = chat_key(chat), False
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
            pipe.set(self._chat, self._stream, px=live_ms(self._ttl_ms / 1000))
        if final:
            pipe.eval(*fence, -1, f"{self._last}-1", "e", b"1" if self._complete else b"0")
        if touch:
            self._touched_at = now
            expire_ms = self._ttl_ms if final else live_ms(self._ttl_ms / 1000)
            pipe.pexpire(key, expire_ms)
            pipe.pexpire(info_key, expire_ms)
            pipe.pexpire(request_key(self._stream), expire_ms)
            if self._chat:
                pipe.pexpire(self._chat, expire_ms)
            pipe.exists(stop_key(self._stream))
            pipe.exists(readers_key)
        results = await execute(pipe)
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
