"""Compression of a stream that holds nothing back: which content coding a request accepts, and one
compressor per stream that makes every frame decodable the moment it arrives.

A compression layer that knows nothing of frames either buffers a stream until its buffer fills or skips
it; here the writer knows where every frame ends, so each frame (and each heartbeat) is followed by a
``Z_SYNC_FLUSH``: the bytes written so far decode to everything written so far, and the deflate stream
goes on, its window shared by every frame, which is where the gain is (an LLM chunk repeats the same
JSON envelope around a few characters of text). The final body ends the stream with ``Z_FINISH``.

Sans-I/O: bytes in, bytes out. What the resume log stores and replays stays uncompressed: the
compressor is one client connection's, and a resumed response is another connection.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Final

from .headers import RawHeaders, content_coding

GZIP: Final = "gzip"
ENCODINGS: Final = (GZIP,)
"""What ``compress="auto"`` may choose, best first. gzip only: zlib is in the standard library, and a
sync-flushed deflate stream already takes most of an LLM chunk stream's bytes (docs/benchmarks.md)."""

# An LLM chunk repeats within a few hundred bytes: a 4 KiB window finds nearly all of it, with a sixteenth
# of the zlib state per open stream that the defaults (a 32 KiB window, memLevel 8) keep (docs/benchmarks.md).
_WBITS: Final = 16 + 12  # a gzip wrapper, a 4 KiB window
_MEM_LEVEL: Final = 5
_LEVEL: Final = 6


def choose(request: RawHeaders, response: RawHeaders) -> str | None:
    """The coding we compress a stream with (None: none): what the request accepts, unless the app set
    a ``Content-Encoding`` of its own (any, ``identity`` too: its bytes are its business)."""
    if content_coding(response) is not None:
        return None
    return accepted(value for name, value in request if name.lower() == b"accept-encoding")


def accepted(accept_encoding: Iterable[bytes]) -> str | None:
    """The coding to compress a response with, by the request's ``Accept-Encoding`` values (RFC 9110
    12.5.3): gzip when it is acceptable (named, as ``x-gzip`` too, or through ``*``, with a q-value above
    0) and not less preferred than ``identity``, which is acceptable unless excluded (``identity;q=0``,
    or ``*;q=0`` with no entry of its own), at the lowest q-value the request gives anything. No header:
    None (a client that says nothing is not sent what it may not read). A malformed q-value counts as 0."""
    q: dict[bytes, float] = {}
    found = False
    for value in accept_encoding:
        found = True
        for item in value.split(b","):
            coding, _, params = item.partition(b";")
            name = coding.strip().lower()
            if not name:
                continue
            weight = 1.0
            for param in params.split(b";"):
                key, _, raw = param.partition(b"=")
                if key.strip().lower() == b"q":
                    weight = _qvalue(raw.strip())
            q[b"gzip" if name == b"x-gzip" else name] = weight
    if not found:
        return None
    star = q.get(b"*")
    gzip = q.get(b"gzip", star if star is not None else 0.0)
    identity = q.get(b"identity", star if star is not None else min(q.values(), default=1.0))
    return GZIP if gzip > 0 and gzip >= identity else None


def _qvalue(raw: bytes) -> float:
    try:
        value = float(raw)
    except ValueError:
        return 0.0
    return value if 0.0 <= value <= 1.0 else 0.0


class Compressor:
    """One stream's gzip stream. :meth:`frame`: ``data`` compressed and sync-flushed (every byte of it
    decodable from what this returns and all before); :meth:`end`: the last of it, and the gzip trailer."""

    __slots__ = ("_flush", "_z")

    coding: Final = GZIP

    def __init__(self) -> None:
        self._z = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WBITS, _MEM_LEVEL)
        self._flush = zlib.Z_SYNC_FLUSH

    def frame(self, data: bytes) -> bytes:
        z = self._z
        return z.compress(data) + z.flush(self._flush)

    def end(self, data: bytes) -> bytes:
        z = self._z
        return z.compress(data) + z.flush(zlib.Z_FINISH)
