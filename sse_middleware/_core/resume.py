"""Resumable streams, sans-I/O: event ids, ``Last-Event-ID``, the caller binding, a log's bounds, store URLs.

**The id** of an event is ``<stream>.<position>``, e.g. ``q3J0bX6kKp1Jr8yTz1mW0A.42``. ``stream`` is 22
URL-safe base64 characters carrying 128 random bits from :mod:`secrets`: it names one stream and cannot
be guessed, so an id is a capability, not a counter anyone can walk. ``position`` is the event's number in
that stream, from 1, in decimal without leading zeros. Only ASCII letters, digits, ``-``, ``_`` and ``.``,
so it is a valid header value wherever a browser sends it back.

**Parsing** ``Last-Event-ID`` never raises: anything that is not exactly one such id (after trimming
spaces and tabs, which servers may leave on a header value) is *unknown*, and an unknown id means the
request goes to the app as if we were not there.

**The caller binding** is an HMAC-SHA256 of the caller's identity (by default the ``Authorization`` and
``Cookie`` request headers), keyed with the stream's own 128 random bits. The store keeps the digest,
never the headers; the same credentials give unrelated digests in two streams, so no precomputed table
applies and streams cannot be linked to one user by their digests. Any host that knows the stream (every
host sharing the store) can check a caller, with no secret to distribute.
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

STREAM_BYTES: Final = 16  # 128 random bits per stream
_ID: Final = re.compile(rb"([A-Za-z0-9_-]{22})\.([1-9][0-9]{0,17})")
_LAST_EVENT_ID: Final = b"last-event-id"

ENTRY_OVERHEAD: Final = 64
"""Bytes a log counts per event on top of the event's own, so that a bound in bytes bounds the number of
events too (a log of one-byte events would otherwise hold millions of entries)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Position:
    """Where a client is: it has every event of ``stream`` up to and including ``seq``."""

    stream: str
    seq: int


def new_stream() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(STREAM_BYTES)).rstrip(b"=").decode("ascii")


def parse_id(raw: bytes | str | None) -> Position | None:
    """The position an id names; None for anything else (never raises, whatever the bytes)."""
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    match = _ID.fullmatch(raw.strip(b" \t"))
    if match is None:
        return None
    return Position(match.group(1).decode("ascii"), int(match.group(2)))


def last_event_id(headers: Iterable[tuple[bytes, bytes]]) -> Position | None:
    """The request's ``Last-Event-ID`` position; None without exactly one header holding one of our ids."""
    found: Position | None = None
    seen = False
    for name, value in headers:
        if len(name) == 13 and name.lower() == _LAST_EVENT_ID:
            if seen:
                return None  # two of them: which one the client meant is anyone's guess
            seen = True
            found = parse_id(value)
    return found


# -- the caller binding --------------------------------------------------------------------------------

Caller = Callable[[Mapping[str, Any]], "bytes | str | None"]
"""A hook that names the caller of a request from its ASGI scope (for apps whose identity is not in the
``Authorization`` and ``Cookie`` headers, e.g. ``scope["user"]`` set by an authentication middleware
outside ours). None or empty means anonymous: then the id alone grants the resume."""

_IDENTITY_HEADERS: Final = (b"authorization", b"cookie")


def default_caller(scope: Mapping[str, Any]) -> bytes:
    """The ``Authorization`` and ``Cookie`` headers, each length-prefixed so no two pairs encode alike.

    Several ``Cookie`` headers (HTTP/2 may split them) are joined as one with ``; ``, as RFC 9113 says.
    """
    found: dict[bytes, list[bytes]] = {name: [] for name in _IDENTITY_HEADERS}
    for name, value in scope.get("headers") or ():
        lowered = name.lower()
        if lowered in found:
            found[lowered].append(value.strip())
    out = bytearray()
    for name in _IDENTITY_HEADERS:
        joined = b"; ".join(found[name])
        out += len(joined).to_bytes(8, "big") + joined
    return bytes(out)


def identity(caller: Caller, scope: Mapping[str, Any]) -> bytes:
    named = caller(scope)
    if named is None:
        return b""
    return named.encode("utf-8", "surrogatepass") if isinstance(named, str) else bytes(named)


def bind(stream: str, who: bytes) -> bytes:
    """The digest stored with a stream: an HMAC of the caller's identity, keyed with the stream's secret."""
    key = stream.encode("ascii", "replace")  # the stream's 128 random bits, as its id spells them
    return hmac.new(key, b"sse_middleware.resume.caller\x00" + who, hashlib.sha256).digest()


def same_caller(stream: str, who: bytes, stored: bytes) -> bool:
    return hmac.compare_digest(bind(stream, who), stored)


# -- the request kept with a log ------------------------------------------------------------------------

CREDENTIALS: Final = frozenset((*_IDENTITY_HEADERS, b"proxy-authorization", b"x-api-key", b"api-key"))
"""Headers a kept request never holds (the providers' API keys among them: Anthropic's ``x-api-key``,
Azure OpenAI's ``api-key``): a re-run takes the resuming request's own."""
_NOT_KEPT: Final = CREDENTIALS | {_LAST_EVENT_ID}


@dataclasses.dataclass(frozen=True, slots=True)
class KeptRequest:
    """What a re-run of a stream's request needs on another host: its request line, its headers but the
    caller's credentials (:data:`CREDENTIALS`, never stored: the resuming request, the same caller,
    brings its own) and its body (the user's prompt; at most recovery's bound)."""

    method: str
    path: str
    raw_path: bytes
    query: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes

    def encode(self) -> bytes:
        head = {
            "m": self.method,
            "p": self.path,
            "r": self.raw_path.decode("latin-1"),
            "q": self.query.decode("latin-1"),
            "h": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in self.headers],
        }
        return json.dumps(head).encode("utf-8") + b"\n" + self.body

    @classmethod
    def decode(cls, data: bytes) -> KeptRequest | None:
        """The request :meth:`encode` wrote; None for anything else (never raises)."""
        head, _, body = data.partition(b"\n")
        try:
            fields = json.loads(head)
            return cls(
                str(fields["m"]),
                str(fields["p"]),
                str(fields["r"]).encode("latin-1"),
                str(fields["q"]).encode("latin-1"),
                tuple((str(k).encode("latin-1"), str(v).encode("latin-1")) for k, v in fields["h"]),
                body,
            )
        except (ValueError, TypeError, KeyError, UnicodeError):
            return None

    def scope(self, resuming: Mapping[str, Any]) -> dict[str, Any]:
        """The scope of a re-run on behalf of ``resuming`` (the resume request, the same caller): this
        request's line, headers and the resuming request's credentials, the rest (server, client, state,
        what a middleware outside ours set) the resuming request's."""
        own = [(k, v) for k, v in resuming.get("headers") or () if k.lower() in CREDENTIALS]
        return {
            **resuming,
            "method": self.method,
            "path": self.path,
            "raw_path": self.raw_path,
            "query_string": self.query,
            "headers": [*self.headers, *own],
        }


def keep_request(scope: Mapping[str, Any], body: bytes) -> KeptRequest:
    path = scope.get("path", "")
    return KeptRequest(
        scope.get("method", "GET"),
        path,
        scope.get("raw_path") or path.encode("utf-8", "surrogateescape"),
        scope.get("query_string", b""),
        tuple((k, v) for k, v in scope.get("headers") or () if k.lower() not in _NOT_KEPT),
        body,
    )


# -- a log's bounds ------------------------------------------------------------------------------------


class Window:
    """Which events a log keeps: the newest ones, up to ``max_bytes`` (each counted with
    :data:`ENTRY_OVERHEAD`). ``first`` is the oldest position still kept; a client behind it cannot be
    resumed without a gap, so its resume is unknown. An event larger than the whole bound is not kept,
    and neither is anything before it."""

    __slots__ = ("_costs", "_max", "first", "last", "size")

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._costs: collections.deque[int] = collections.deque()
        self.size = 0
        self.first = 1
        self.last = 0

    def add(self, size: int | None) -> bool:
        """Count the next event (None: too large to keep at all); True when ``first`` moved."""
        self.last += 1
        cost = self._max + 1 if size is None else size + ENTRY_OVERHEAD
        if cost > self._max:
            self._costs.clear()
            self.size = 0
            self.first = self.last + 1
            return True
        self._costs.append(cost)
        self.size += cost
        moved = False
        while self.size > self._max:
            self.size -= self._costs.popleft()
            self.first += 1
            moved = True
        return moved


# -- store URLs ----------------------------------------------------------------------------------------

MEMORY_DEFAULT_MAX_BYTES: Final = 128 << 20


@dataclasses.dataclass(frozen=True, slots=True)
class StoreAddress:
    kind: str  # "memory" or "redis"
    url: str
    max_bytes: int = MEMORY_DEFAULT_MAX_BYTES  # memory://: the bound on all of its logs together
    cluster: bool = False  # redis+cluster://: a Redis Cluster, found from its seed ``nodes``
    nodes: tuple[tuple[str, int], ...] = ()  # redis+cluster://: the seeds, as (host, port)


def parse_store_url(url: str) -> StoreAddress:
    """``memory://`` (optionally ``?max_bytes=N``), ``redis://host:port/db`` (``rediss://`` for TLS), or
    ``redis+cluster://host:port`` (``rediss+cluster://``) for a Redis Cluster, with more seed nodes as
    ``host:port,host:port`` if one may be down when a host starts.

    Raises ``ValueError`` saying what is wrong; the settings turn it into a ConfigError naming the field.
    """
    if not isinstance(url, str):
        raise ValueError(f"expected a URL string, got {url!r}")
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme == "memory":
        if parts.netloc or parts.path not in ("", "/"):
            raise ValueError(f"memory:// takes no host or path, got {url!r}")
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        unknown = sorted(set(query) - {"max_bytes"})
        if unknown:
            raise ValueError(f"unknown memory:// option(s) {', '.join(unknown)}; known: max_bytes")
        raw = query.get("max_bytes", str(MEMORY_DEFAULT_MAX_BYTES))
        if not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"memory://?max_bytes must be an integer >= 1, got {raw!r}")
        return StoreAddress("memory", url, int(raw))
    if scheme in ("redis", "rediss"):
        if not parts.hostname:
            raise ValueError(f"a redis URL needs a host, as in redis://127.0.0.1:6379/0; got {url!r}")
        try:
            parts.port  # noqa: B018 - urllib validates the port when it is read
        except ValueError as exc:
            raise ValueError(f"bad port in {url!r}: {exc}") from None
        db = parts.path.lstrip("/")
        if db and not db.isdigit():
            raise ValueError(f"the path of a redis URL is the database number, got {parts.path!r}")
        return StoreAddress("redis", url)
    if scheme in ("redis+cluster", "rediss+cluster"):
        return StoreAddress("redis", url, cluster=True, nodes=_cluster_nodes(url, parts.netloc, parts.path))
    raise ValueError(f"expected memory:// or redis://host:port/db or redis+cluster://host:port; got {url!r}")


def _cluster_nodes(url: str, netloc: str, path: str) -> tuple[tuple[str, int], ...]:
    """The seeds of ``[user:password@]host:port[,host:port...]``; a cluster has database 0 only."""
    if path.strip("/") not in ("", "0"):
        raise ValueError(f"a Redis Cluster has database 0 only, got the path {path!r} in {url!r}")
    nodes: list[tuple[str, int]] = []
    for seed in netloc.rpartition("@")[2].split(","):
        if seed.startswith("["):  # an IPv6 address: [::1]:7000
            host, _, rest = seed[1:].partition("]")
            port = rest.removeprefix(":")
        else:
            host, _, port = seed.partition(":")
        if not host:
            raise ValueError(
                f"a redis+cluster URL needs host:port seeds, as in redis+cluster://10.0.0.1:6379; got {url!r}"
            )
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(f"bad port {port!r} in {url!r}")
        nodes.append((host, int(port) if port else 6379))
    return tuple(nodes)
