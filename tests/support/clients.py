"""Timed stream readers for behaviour tests."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import httpx

from sse_middleware._core.sse import Comment, Event, Parser


@dataclass
class Timed:
    """What a client saw: each item with its arrival time (s since the request was sent), and raw reads."""

    status: int = 0
    headers: httpx.Headers = field(default_factory=httpx.Headers)
    items: list[tuple[float, Event | Comment]] = field(default_factory=list)
    reads: list[tuple[float, bytes]] = field(default_factory=list)
    error: Exception | None = None
    total: float = 0.0

    @property
    def events(self) -> list[Event]:
        return [item for _, item in self.items if isinstance(item, Event)]

    @property
    def comments(self) -> list[Comment]:
        return [item for _, item in self.items if isinstance(item, Comment)]

    def first(self, predicate: object = Event) -> float:
        return next(t for t, item in self.items if isinstance(item, predicate))  # type: ignore[arg-type]

    @property
    def body(self) -> bytes:
        return b"".join(chunk for _, chunk in self.reads)


def read_stream(
    url: str,
    *,
    method: str = "GET",
    timeout: float = 30.0,
    headers: dict[str, str] | None = None,
    max_seconds: float | None = None,
) -> Timed:
    """Read a whole stream with httpx, timing every read and every parsed event and comment."""
    out = Timed()
    parser = Parser(comments=True)
    start = time.monotonic()
    try:
        with httpx.Client(timeout=timeout) as client, client.stream(method, url, headers=headers) as response:
            out.status, out.headers = response.status_code, response.headers
            for chunk in response.iter_bytes():
                now = time.monotonic() - start
                out.reads.append((now, chunk))
                out.items += [(now, item) for item in parser.feed(chunk)]
                if max_seconds is not None and now > max_seconds:
                    break
    except httpx.HTTPError as exc:
        out.error = exc
    out.total = time.monotonic() - start
    return out
