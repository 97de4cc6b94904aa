"""What the middleware does to a stream's headers and bytes that only its classification decides, at the
raw ASGI level (a dict scope, a recording ``send``) on asyncio and trio: an app's own compressed event
stream passes byte for byte (anti-buffering headers only), and an app's ``Cache-Control`` is kept, with
``no-transform`` added. Each against its control: the same response without the feature's condition."""

from __future__ import annotations

import gzip
import zlib
from typing import Any

import anyio
import pytest

from ..support.harness import Wire, serve

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_signals"), pytest.mark.timeout(30)]

EVENTS = [b"data: tick %d\n\n" % n for n in range(6)]
# Heartbeats after 20 ms of silence, and the app pauses 50 ms between writes: anything the middleware
# would add to an event stream it handles (a comment) lands between the app's writes.
SETTINGS: dict[str, Any] = {"heartbeat_interval": 0.02, "telemetry": True}


def gzipped(pieces: list[bytes]) -> list[bytes]:
    """Gzip with a sync flush per piece, as an app that streams compressed SSE writes it."""
    compressor = zlib.compressobj(wbits=31)
    out = [compressor.compress(piece) + compressor.flush(zlib.Z_SYNC_FLUSH) for piece in pieces]
    return [*out[:-1], out[-1] + compressor.flush()]


def sse_app(bodies: list[bytes], headers: list[tuple[bytes, bytes]]) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for chunk in bodies:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await anyio.sleep(0.05)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


def bodies(wire: Wire) -> list[bytes]:
    return [m["body"] for m in wire.messages if m["type"] == "http.response.body" and m["body"]]


# -- an app's own compressed event stream ------------------------------------------------------------


async def test_an_apps_gzipped_event_stream_passes_byte_for_byte(anyio_backend: str) -> None:
    compressed = gzipped(EVENTS)
    headers = [(b"content-type", b"text/event-stream"), (b"content-encoding", b"gzip")]
    wire = await serve(sse_app(compressed, headers), **SETTINGS)
    assert bodies(wire) == compressed  # each write as it came: nothing added, merged or held
    assert gzip.decompress(wire.data) == b"".join(EVENTS)
    sent = wire.headers()
    assert sent[b"content-encoding"] == b"gzip" and sent[b"x-accel-buffering"] == b"no"  # still unbuffered
    assert wire.complete


async def test_control_the_same_stream_uncompressed_is_handled_as_sse(anyio_backend: str) -> None:
    """Without Content-Encoding the middleware does write into the stream (heartbeats between the app's
    events), which is what it must never do to bytes it cannot parse."""
    wire = await serve(sse_app(EVENTS, [(b"content-type", b"text/event-stream")]), **SETTINGS)
    assert any(body.startswith(b":") for body in bodies(wire)), bodies(wire)
    assert [e.data for e in wire.events()] == [f"tick {n}" for n in range(6)]


# -- the app's Cache-Control ---------------------------------------------------------------------------


def cache_control(wire: Wire) -> list[bytes]:
    return [v for k, v in wire.starts[0]["headers"] if k.lower() == b"cache-control"]


@pytest.mark.parametrize(
    ("app_sets", "sent"),
    [
        ([b"private, max-age=0"], b"private, max-age=0, no-transform"),
        ([b"no-store", b"private"], b"no-store, private, no-transform"),  # two headers, one list
        ([b"public, No-Transform"], b"public, No-Transform"),  # already there: not doubled
    ],
)
async def test_an_apps_cache_control_is_kept_and_gains_no_transform(
    anyio_backend: str, app_sets: list[bytes], sent: bytes
) -> None:
    headers = [(b"content-type", b"text/event-stream"), *((b"Cache-Control", value) for value in app_sets)]
    wire = await serve(sse_app(EVENTS[:1], headers), **SETTINGS)
    assert cache_control(wire) == [sent]


async def test_control_without_one_the_stream_gets_no_cache_and_a_non_stream_keeps_its_own(
    anyio_backend: str,
) -> None:
    wire = await serve(sse_app(EVENTS[:1], [(b"content-type", b"text/event-stream")]), **SETTINGS)
    assert cache_control(wire) == [b"no-cache, no-transform"]
    json_headers = [(b"content-type", b"application/json"), (b"cache-control", b"private, max-age=0")]
    passed = await serve(sse_app([b"{}"], json_headers), **SETTINGS)
    assert cache_control(passed) == [b"private, max-age=0"]  # not a stream: untouched
