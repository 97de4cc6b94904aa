"""Which responses are streams, and the headers that keep proxies from holding them.

Decided from ``http.response.start`` headers alone, so the start is never held back and a browser's
``onopen`` fires at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

RawHeaders = Sequence[tuple[bytes, bytes]]
"""Header pairs as ASGI carries them (names in any case)."""

SSE: Final = "sse"
BYTES: Final = "bytes"
TEXT: Final = "text"

_UTF8: Final = (b"", b"utf-8", b"utf8", b"us-ascii")
_LINE_TYPES: Final = (b"application/x-ndjson", b"application/jsonl")
_DROP: Final = frozenset((b"content-length", b"x-accel-buffering", b"cache-control", b"connection"))


def stream_kind(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """``sse`` for text/event-stream; ``text`` / ``bytes`` for text/plain / NDJSON without a
    Content-Length; None for everything else (passed through untouched)."""
    content_type = charset = b""
    has_length = encoded = False
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"content-type":
            content_type, _, params = value.lower().partition(b";")
            content_type = content_type.strip()
            charset = params.partition(b"charset=")[2].split(b";", 1)[0].strip(b' \t"')
        elif lowered == b"content-length":
            has_length = True
        elif lowered == b"content-encoding":
            encoded = value.strip().lower() not in (b"", b"identity")
    if content_type == b"text/event-stream":
        return BYTES if encoded else SSE  # compressed: anti-buffering only, never touch the bytes
    if has_length:
        return None
    if content_type == b"text/plain":  # merged as text only if it is UTF-8 (or says nothing)
        return BYTES if encoded or charset not in _UTF8 else TEXT
    if content_type in _LINE_TYPES:
        return BYTES
    return None


def stream_headers(headers: RawHeaders, coding: str | None = None) -> list[tuple[bytes, bytes]]:
    """The app's headers with anti-buffering added. An app's Cache-Control is kept and gains no-transform.

    ``Connection`` is never sent: it is forbidden in HTTP/2 and the server owns it in HTTP/1.1.
    ``Content-Encoding`` is left alone: a stream the app compressed itself is its own business.
    ``coding``: the stream is compressed by us (the app's had none): ``Content-Encoding`` says so, and
    ``Vary`` gains ``Accept-Encoding`` (appended to the app's own), so no cache serves it to a client
    that did not ask for it.
    """
    cache: list[bytes] = []
    out: list[tuple[bytes, bytes]] = []
    for name, value in headers:
        lowered = name.lower()
        if lowered in _DROP:
            if lowered == b"cache-control":
                cache.append(value)
            continue
        out.append((name, value))
    if coding is not None:
        _encoded(out, coding)
    if cache:
        directives = b", ".join(cache)
        if b"no-transform" not in directives.lower():
            directives += b", no-transform"
    else:
        directives = b"no-cache, no-transform"
    out.append((b"cache-control", directives))
    out.append((b"x-accel-buffering", b"no"))
    return out


def _encoded(out: list[tuple[bytes, bytes]], coding: str) -> None:
    """``Content-Encoding: coding``, and ``Accept-Encoding`` in ``Vary`` (the app's last ``Vary`` gains
    it, unless it names it or ``*`` already)."""
    out.append((b"content-encoding", coding.encode()))
    for i in range(len(out) - 1, -1, -1):
        name, value = out[i]
        if name.lower() == b"vary":
            named = [v.strip().lower() for v in value.split(b",")]
            if b"*" not in named and b"accept-encoding" not in named:
                out[i] = (name, value + b", accept-encoding" if value.strip() else b"accept-encoding")
            return
    out.append((b"vary", b"accept-encoding"))


def has_request_body(headers: RawHeaders) -> bool:
    """Whether the request may carry a body still to be read (then the app owns ``receive``)."""
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            return True
        if lowered == b"content-length":
            return value.strip() not in (b"0", b"")
    return False


def content_coding(headers: RawHeaders) -> bytes | None:
    """The response's ``Content-Encoding`` as the app set it (any value, ``identity`` too), or None."""
    for name, value in headers:
        if name.lower() == b"content-encoding":
            return value
    return None
