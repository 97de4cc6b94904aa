"""Making the Redis store's client: one Redis server, or a Redis Cluster (``redis+cluster://``).

Both clients are made so that a failure fails at once instead of being retried: a retried XADD could
land twice, and a store that is down must cost a stream nothing but its resumability. A cluster client
still follows ``MOVED`` and ``ASK`` redirects (a slot that moved is not a failure).

The store's commands touch one stream's keys, which share a hash tag and so one slot: every pipeline of
the store goes to the one node that holds the stream, in one round trip, as with a single server.
"""

from __future__ import annotations

import asyncio
from typing import Final, TypeAlias

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisClusterException, RedisError

from .._core.resume import StoreAddress

Client: TypeAlias = "Redis | RedisCluster"

FAILURES: Final = (RedisError, RedisClusterException, OSError, asyncio.TimeoutError)
"""What a client raises when the store fails (``RedisClusterException``, e.g. "no node covers this
slot", is not a ``RedisError``)."""

_NODE_CONNECTIONS: Final = 1 << 16
"""Connections per server or cluster node. redis-py refuses a command once a pool is full (100 by
default), and every follower holds one through each ``XREAD BLOCK``: the 101st resume on a host (a
reconnect storm after a host died) would count as the store being down."""


def connect(address: StoreAddress, *, timeout: float, connect_timeout: float) -> Client:
    """The client for a ``redis://`` or ``redis+cluster://`` address; no connection is made yet."""
    no_retry = Retry(NoBackoff(), 0)
    if not address.cluster:
        return Redis.from_url(
            address.url,
            socket_timeout=timeout,
            socket_connect_timeout=connect_timeout,
            retry=no_retry,
            max_connections=_NODE_CONNECTIONS,
        )
    (host, port), *others = address.nodes
    return RedisCluster.from_url(
        _first_node_url(address.url, host, port),
        startup_nodes=[ClusterNode(seed_host, seed_port) for seed_host, seed_port in others],
        socket_timeout=timeout,
        socket_connect_timeout=connect_timeout,
        retry=no_retry,
        max_connections=_NODE_CONNECTIONS,
    )


def _first_node_url(url: str, host: str, port: int) -> str:
    """``rediss+cluster://user:pw@a:1,b:2/0?x=y`` as redis-py's own URL for its first seed,
    ``rediss://user:pw@a:1/0?x=y`` (the credentials and options apply to every node)."""
    scheme, _, rest = url.strip().partition("://")
    netloc, slash, tail = rest.partition("/")
    netloc, query_mark, query = netloc.partition("?")  # a URL with a query and no path
    userinfo, at, _ = netloc.rpartition("@")
    node = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    base = scheme.lower().removesuffix("+cluster")
    return f"{base}://{userinfo}{at}{node}{slash}{tail}{query_mark}{query}"
