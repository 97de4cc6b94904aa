"""The Redis store on a real three-node Redis Cluster (``redis+cluster://``).

The store matrix of ``test_resume_stores.py`` runs here again against the cluster (append, replay,
follow, TTL, the window, the end marker, who is watching), plus what only a cluster has: streams on
every node, a plain ``redis://`` client pointed at one node (the control: ``MOVED`` for the streams
another node holds), no node reachable, and the node that holds a stream killed mid-stream. The URL
parsing is sans-I/O and runs in the fast tier.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import anyio
import pytest

from sse_middleware._core.resume import new_stream, parse_store_url
from sse_middleware._resume.redis_connect import _first_node_url
from sse_middleware._resume.redis_store import RedisStore
from sse_middleware._resume.store import Store, StoreError, open_store

from ..support.redis_cluster import RedisClusterServer, cluster_ports, redis_cluster
from . import test_resume_stores as stores
from .test_resume_stores import INFO, event, read_all

pytestmark = pytest.mark.anyio
slow = pytest.mark.slow


def key(stream: str) -> str:
    return f"sse_middleware:{{{stream}}}"


# -- the URL ---------------------------------------------------------------------------------------------


def test_cluster_urls() -> None:
    one = parse_store_url("redis+cluster://127.0.0.1:7000")
    assert (one.kind, one.cluster, one.nodes) == ("redis", True, (("127.0.0.1", 7000),))
    seeds = parse_store_url("rediss+cluster://user:secret@a:7000,b,[::1]:7002/0?ssl_cert_reqs=none")
    assert seeds.cluster and seeds.nodes == (("a", 7000), ("b", 6379), ("::1", 7002))
    plain = parse_store_url("redis://127.0.0.1:7000/0")  # control: one server, not a cluster
    assert (plain.kind, plain.cluster, plain.nodes) == ("redis", False, ())
    for bad in ("redis+cluster://", "redis+cluster://h:1/2", "redis+cluster://h:x", "redis+cluster://a:1,,b:2",
                "redis+cluster://h:0", "redis+clusters://h:1"):  # fmt: skip
        with pytest.raises(ValueError):
            parse_store_url(bad)


def test_the_first_seed_as_redis_py_spells_it() -> None:
    url = "rediss+cluster://user:secret@a:7000,b:7001/0?ssl_cert_reqs=none"
    assert _first_node_url(url, "a", 7000) == "rediss://user:secret@a:7000/0?ssl_cert_reqs=none"
    assert _first_node_url("redis+cluster://[::1]:7000?x=1", "::1", 7000) == "redis://[::1]:7000?x=1"


def test_cluster_ports_leave_room_for_the_bus() -> None:
    ports = cluster_ports(3)
    assert all(port + 10000 < 65536 for port in ports) and len(set(ports)) == 3


# -- against a real cluster (the full run) ---------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisClusterServer]:
    with redis_cluster() as made:
        yield made


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # redis-py is asyncio only (its refusal under trio: test_resume_stores.py)


@pytest.fixture
def store_url(cluster: RedisClusterServer) -> str:
    return cluster.url


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    made = open_store(store_url)
    yield made
    await made.aclose()


# The store matrix of test_resume_stores.py, on the cluster.


@slow
async def test_append_then_replay_from_any_position(store: Store) -> None:
    await stores.test_append_then_replay_from_any_position(store)


@slow
async def test_follow_is_woken_by_the_write_in_order_exactly_once(store: Store) -> None:
    await stores.test_follow_is_woken_by_the_write_in_order_exactly_once(store)


@slow
async def test_end_marker_complete_or_cut(store: Store) -> None:
    await stores.test_end_marker_complete_or_cut(store)


@slow
async def test_ttl(store: Store) -> None:
    await stores.test_ttl(store)


@slow
async def test_window_bounds_a_log(store: Store) -> None:
    await stores.test_window_bounds_a_log(store)


@slow
async def test_watched_and_unwatched_since(store: Store) -> None:
    await stores.test_watched_and_unwatched_since(store)


# -- what only a cluster has ------------------------------------------------------------------------------


def streams_on_every_node(cluster: RedisClusterServer) -> dict[int, str]:
    """One new stream per node (by port), each held by that node."""
    found: dict[int, str] = {}
    while len(found) < len(cluster.nodes):
        stream = new_stream()
        found.setdefault(cluster.slot_owner(key(stream)).port, stream)
    return found


async def write_and_read(store: Store, stream: str) -> tuple[list[bytes], bool]:
    writer = await store.create(stream, INFO, ttl=60)
    for n in range(1, 4):
        writer.write(n, event(n))
    await writer.end(True)
    return await read_all(store, stream, 0)


@slow
async def test_streams_on_every_node_and_a_plain_client_gets_moved(cluster: RedisClusterServer) -> None:
    """The cluster store reaches every node's streams from one seed. Control: a plain ``redis://``
    store pointed at that same seed works only for the streams that node holds; the others are
    refused with ``MOVED``, a StoreError, so the stream would simply run without resume."""
    seed = cluster.nodes[0]
    on = streams_on_every_node(cluster)
    clustered, plain = open_store(cluster.url), open_store(seed.url)
    assert isinstance(clustered, RedisStore) and isinstance(plain, RedisStore)
    try:
        for port, stream in on.items():
            assert await write_and_read(clustered, stream) == ([event(n) for n in range(1, 4)], True)
            if port == seed.port:
                assert await write_and_read(plain, new_stream_on(cluster, port)) == (
                    [event(n) for n in range(1, 4)],
                    True,
                )
            else:
                with pytest.raises(StoreError, match="MovedError"):
                    await plain.create(new_stream_on(cluster, port), INFO, ttl=60)
    finally:
        await clustered.aclose()
        await plain.aclose()


def new_stream_on(cluster: RedisClusterServer, port: int) -> str:
    while True:
        stream = new_stream()
        if cluster.slot_owner(key(stream)).port == port:
            return stream


@slow
async def test_seed_list_finds_the_cluster_past_a_dead_seed(cluster: RedisClusterServer) -> None:
    dead = cluster_ports(1)[0]  # nothing listens there
    url = f"redis+cluster://127.0.0.1:{dead},{cluster.seeds}"
    store = open_store(url)
    try:
        stream = new_stream()
        assert await write_and_read(store, stream) == ([event(n) for n in range(1, 4)], True)
    finally:
        await store.aclose()
    alone = open_store(f"redis+cluster://127.0.0.1:{dead}")  # control: only the dead seed
    with pytest.raises(StoreError):
        await alone.create(new_stream(), INFO, ttl=60)


@slow
async def test_the_node_of_a_stream_killed_mid_stream() -> None:
    """The producer's writer fails quietly (``failed``, its ``end`` returns) and a resume's look-up is a
    StoreError: the caller turns both into "no resume", never into a failed request. Control: a stream
    the same way on the same cluster before the kill."""
    with redis_cluster() as doomed:
        store = open_store(doomed.url)
        try:
            stream = new_stream()
            assert await write_and_read(store, stream) == ([event(n) for n in range(1, 4)], True)  # control
            live = new_stream()
            writer = await store.create(live, INFO, ttl=60)
            writer.write(1, event(1))
            await anyio.sleep(0.2)  # the first batch is stored
            assert (await read_all_now(store, live)) == [event(1)]
            doomed.slot_owner(key(live)).kill()
            with anyio.fail_after(15):
                for n in range(2, 20):
                    writer.write(n, event(n))  # never raises: the app's send path does no I/O
                    await anyio.sleep(0.05)
                await writer.end(True)  # returns: the flusher gave up, it did not hang
            assert writer.failed
            with pytest.raises(StoreError):
                with anyio.fail_after(15):
                    await store.find(live)
        finally:
            await store.aclose()


async def read_all_now(store: Store, stream: str) -> list[bytes]:
    async with store.reader(stream, 0) as reader:
        entries, _ = await reader.read(1.0)
    return entries


@slow
async def test_many_followers_of_one_stream_on_one_node(store: Store) -> None:
    """Every follower holds a connection to the stream's node through each ``XREAD BLOCK``; redis-py's
    cluster client refuses a command once a node's pool is full (100 by default). 150 followers each
    get the whole log, live."""
    followers = 150
    stream = new_stream()
    writer = await store.create(stream, INFO, ttl=60)
    writer.write(1, event(1))
    got: list[list[bytes]] = []

    async def follow() -> None:
        got.append((await read_all(store, stream, 0, timeout=20))[0])

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for _ in range(followers):
                tg.start_soon(follow)
            await anyio.sleep(0.5)  # all of them blocked in XREAD
            for n in range(2, 6):
                writer.write(n, event(n))
                await anyio.sleep(0.1)
            await writer.end(True)
    assert got == [[event(n) for n in range(1, 6)]] * followers
