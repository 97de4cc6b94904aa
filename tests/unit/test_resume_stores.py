"""The resume stores, one test matrix over both: ``memory://`` and a real ``redis-server``.

Append, replay, follow (woken by the write, not by a timeout), TTL, the window, the end marker, who is
watching; the memory store's memory bounded; Redis refusing trio clearly. Each with its control.
"""

from __future__ import annotations

import gc
import math
import time
import tracemalloc
from collections.abc import AsyncIterator

import anyio
import pytest
from redis.asyncio import Redis

from sse_middleware._core.resume import ENTRY_OVERHEAD, new_stream
from sse_middleware._resume.log import StreamLog
from sse_middleware._resume.memory import MemoryStore
from sse_middleware._resume.redis_store import TOUCH, RedisStore
from sse_middleware._resume.store import Store, StoreError, StreamInfo, Writer, open_store

from ..support.redis import RedisServer, redis_server
from ..support.resume_matrix import _anyio_backend, _backend_and_store, _redis, _store_url  # noqa: F401

pytestmark = pytest.mark.anyio
INFO = StreamInfo(b"caller-digest", "", ((b"content-type", b"text/event-stream"),))


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    made = open_store(store_url)
    yield made
    await made.aclose()


def event(n: int) -> bytes:
    return b"data: %d\nid: s.%d\n\n" % (n, n)


async def read_all(store: Store, stream: str, after: int, timeout: float = 10.0) -> tuple[list[bytes], bool]:
    """Everything after ``after`` up to the end marker (each read waits at most ``timeout``)."""
    got: list[bytes] = []
    with anyio.fail_after(timeout):
        async with store.reader(stream, after) as reader:
            while True:
                entries, end = await reader.read(timeout)
                got += entries
                if end is not None:
                    return got, end


async def test_append_then_replay_from_any_position(store: Store) -> None:
    stream = new_stream()
    writer = await store.create(stream, INFO, ttl=60)
    for n in range(1, 6):
        writer.write(n, event(n))
    await writer.end(True)
    found = await store.find(stream)
    assert found is not None and (found.first, found.last, found.end) == (1, 5, True)
    assert found.info == INFO
    for after in range(6):
        assert await read_all(store, stream, after) == ([event(n) for n in range(after + 1, 6)], True)
    assert await store.find(new_stream()) is None  # control: a stream no one wrote


async def test_follow_is_woken_by_the_write_in_order_exactly_once(store: Store) -> None:
    stream = new_stream()
    writer = await store.create(stream, INFO, ttl=60)
    writer.write(1, event(1))
    got: list[bytes] = []
    woke_after: list[float] = []

    async def follow() -> None:
        async with store.reader(stream, 0) as reader:
            while True:
                asked = time.monotonic()
                entries, end = await reader.read(30.0)
                if entries and len(got) >= 1:
                    woke_after.append(time.monotonic() - asked)
                got.extend(entries)
                if end is not None:
                    return

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            for n in range(2, 6):
                await anyio.sleep(0.3)
                writer.write(n, event(n))
            await anyio.sleep(0.3)
            await writer.end(True)
    assert got == [event(n) for n in range(1, 6)]
    # Each read asked for up to 30 s and returned within a second of the write: woken, not timed out.
    assert woke_after and max(woke_after) < 1.5
    # Control: with nothing written, a read does wait (here 0.5 s) and returns nothing.
    idle = new_stream()
    await store.create(idle, INFO, ttl=60)
    async with store.reader(idle, 0) as reader:
        asked = time.monotonic()
        assert await reader.read(0.5) == ([], None)
        assert time.monotonic() - asked >= 0.4


async def test_end_marker_complete_or_cut(store: Store) -> None:
    cut = new_stream()
    writer = await store.create(cut, INFO, ttl=60)
    writer.write(1, event(1))
    await writer.end(False)
    assert await read_all(store, cut, 0) == ([event(1)], False)
    found = await store.find(cut)
    assert found is not None and found.end is False


async def test_ttl(store: Store) -> None:
    stream = new_stream()
    writer = await store.create(stream, INFO, ttl=0.5)
    writer.write(1, event(1))
    await writer.end(True)
    assert await store.find(stream) is not None  # control: inside its TTL
    await anyio.sleep(1.2)
    assert await store.find(stream) is None


async def test_window_bounds_a_log(store: Store) -> None:
    small, large = new_stream(), new_stream()
    bound = 10 * (len(b"data: 100\nid: %s.100\n\n" % small.encode()) + ENTRY_OVERHEAD)  # the ten newest
    logs = [
        StreamLog(s, await store.create(s, INFO, ttl=60), b) for s, b in ((small, bound), (large, 1 << 20))
    ]
    for n in range(1, 101):
        for log in logs:
            log.append(b"data: %d\n\n" % n)
        if n % 10 == 0:
            await anyio.sleep(0.05)  # Redis: several flushes, so trimming must drop stored batches
    for log in logs:
        await log.close(True)
    assert await held(store, small) <= bound + 2 * len(b"data: 100\n\n") < await held(store, large)
    found, control = await store.find(small), await store.find(large)
    assert found is not None and control is not None
    assert (found.first, found.last) == (91, 100)
    assert (control.first, control.last) == (1, 100)  # control: the same stream under a large bound
    got, end = await read_all(store, small, 90)
    assert [e.split(b"\n")[0] for e in got] == [b"data: %d" % n for n in range(91, 101)] and end
    with pytest.raises(StoreError):  # behind the window: a gap, never a silent skip
        await read_all(store, small, 50)


async def held(store: Store, stream: str) -> int:
    """The bytes a store holds for a log's events (each counted with the per-event overhead)."""
    if isinstance(store, MemoryStore):
        return store._logs[stream].size
    assert isinstance(store, RedisStore)
    entries = await store.client().xrange(f"sse_middleware:{{{stream}}}")
    return sum(len(f[b"d"]) + ENTRY_OVERHEAD * len(f[b"n"].split(b",")) for _, f in entries if b"d" in f)


async def test_watched_and_unwatched_since(store: Store) -> None:
    stream = new_stream()
    log = StreamLog(stream, await store.create(stream, INFO, ttl=60), 1 << 20)
    changes: list[float] = []
    log.on_change = lambda: changes.append(log.unwatched_since)
    log.append(b"data: 1\n\n")
    assert log.unwatched_since == math.inf  # the original client reads
    log.client_left()
    left = log.unwatched_since
    assert left != math.inf and changes == [left]  # control: no one reads now
    with anyio.fail_after(10):
        async with store.reader(stream, 0) as reader:
            while log.unwatched_since != math.inf:  # memory: at once; redis: by the next flush
                log.append(b"data: more\n\n")
                await reader.read(0.2)
                await anyio.sleep(0.05)
    await log.close(True)


@pytest.mark.slow  # a real redis-server: the full run
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_redis_refuses_trio_clearly(redis: RedisServer, anyio_backend: str) -> None:
    store = open_store(redis.url)
    if anyio_backend == "trio":
        with pytest.raises(StoreError, match="asyncio"):
            await store.create(new_stream(), INFO, ttl=60)
    else:  # control: the same call on asyncio works
        writer = await store.create(new_stream(), INFO, ttl=60)
        await writer.end(True)
        await store.aclose()


@pytest.mark.slow  # a real redis-server: the full run
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_redis_every_key_of_a_finished_stream_expires(redis: RedisServer, anyio_backend: str) -> None:
    """Not only what ``find()`` reads: a key left without a TTL stays in Redis for ever."""
    store = open_store(redis.url)
    stream = new_stream()
    writer = await store.create(stream, INFO, ttl=60)
    for n in range(1, 4):
        writer.write(n, event(n))
    await writer.end(True)
    assert await read_all(store, stream, 0) == ([event(n) for n in range(1, 4)], True)  # a reader came
    await store.aclose()
    client = Redis.from_url(redis.url)
    try:
        keys = [key async for key in client.scan_iter(match=f"*{stream}*")]
        ttls = {key: await client.pttl(key) for key in keys}
    finally:
        await client.aclose()
    # The control: the stream's events and its info are there (a reader's mark too), so every key of it
    # was looked at; -1 would be a key with no expiry.
    assert len(keys) >= 2, keys
    assert all(0 < ttl <= 60_000 for ttl in ttls.values()), ttls


@pytest.mark.slow  # a real redis-server: the full run
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_redis_a_chat_index_lives_as_long_as_its_stream(redis: RedisServer, anyio_backend: str) -> None:
    """The chat index is written once, with a live stream's long expiry; each sign of life refreshes it
    with the stream's own keys, and the end gives it the stream's TTL: an index that outlived its stream
    would answer for a log that is gone, one that expired first would lose a live chat. Control: the
    stream's info key, refreshed in the same rounds."""
    store = open_store(redis.url)
    stream, chat = new_stream(), "chat:/api/chat:c-1"
    client = Redis.from_url(redis.url)

    async def ttls() -> tuple[int, int]:
        (index,) = [key async for key in client.scan_iter(match=f"*{chat}*")]
        (info,) = [key async for key in client.scan_iter(match=f"*{stream}*:info")]
        pipe = client.pipeline(transaction=True)  # both read at one moment
        pipe.pttl(index)
        pipe.pttl(info)
        index_ttl, info_ttl = await pipe.execute()
        return index_ttl, info_ttl

    try:
        writer = await store.create(stream, INFO, ttl=60)
        writer.index(chat)
        writer.write(1, event(1))
        await anyio.sleep(TOUCH / 2 + 0.2)  # the index written with a live log's expiry (over a minute)
        writer.write(2, event(2))  # a batch past half the sign-of-life period: a refresh
        await anyio.sleep(0.2)
        live_index, live_info = await ttls()
        await writer.end(True)
        assert await store.chat_stream(chat) == stream
        ended_index, ended_info = await ttls()
    finally:
        await client.aclose()
        await store.aclose()
    assert live_info > 60_000 and 0 < ended_info <= 60_000  # the control: live, then the stream's TTL
    assert abs(live_index - live_info) < 100, (live_index, live_info)  # refreshed with the stream
    assert 0 < ended_index <= 60_000 and abs(ended_index - ended_info) < 100, (ended_index, ended_info)


@pytest.mark.slow  # a real redis-server: the full run
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_redis_down_at_start_is_a_store_error(anyio_backend: str) -> None:
    with redis_server() as server:
        url = server.url
    store = open_store(url)  # nothing listens there any more
    with pytest.raises(StoreError):
        await store.create(new_stream(), INFO, ttl=60)


# -- the memory store's memory -------------------------------------------------------------------------


def held_by(run: int, store_bound: int) -> int:
    """Bytes still allocated after ``run`` streams of 100 events of ~1 KiB each ended into one store."""

    async def main() -> int:
        store = MemoryStore(store_bound)
        payload = b"data: " + b"x" * 1000 + b"\n\n"
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(run):
            stream = new_stream()
            writer: Writer = await store.create(stream, INFO, ttl=600)
            log = StreamLog(stream, writer, 1 << 20)
            for _ in range(100):
                log.append(payload)
            await log.close(True)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert store.size <= store_bound + 100 * (len(payload) + 40 + ENTRY_OVERHEAD)
        return held

    return anyio.run(main)


def test_memory_store_memory_is_bounded() -> None:
    bound = 2 << 20
    held = held_by(60, bound)  # ~6.5 MiB of events into a 2 MiB store
    control = held_by(60, 1 << 30)  # control: the same streams, a store bound that never binds
    assert control > 6 << 20
    assert held < bound + (1 << 20)
