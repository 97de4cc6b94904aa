"""Compressed streams (``compress="auto"``): the negotiation by ``Accept-Encoding``, the compressor's one
property (every frame decodes from the bytes written up to it, under any framing), and the stream at
the raw ASGI level on asyncio and trio: what is compressed and what never is, each against its control
(the setting off, the same request without the header)."""

from __future__ import annotations

import gzip
import zlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sse_middleware import ConfigError, StreamingMiddleware, StreamingSettings, opt_out, override
from sse_middleware._core.compress import Compressor, accepted
from sse_middleware._core.sse import Event, Parser

from ..support.harness import PLAIN, Message, Script, Wire, body, scope, serve, start

pytestmark = pytest.mark.anyio

GZIP = [(b"host", b"t"), (b"accept-encoding", b"gzip, deflate, br")]


@pytest.mark.parametrize(
    ("header", "coding"),
    [
        (b"gzip", "gzip"),
        (b"GZIP", "gzip"),
        (b"x-gzip", "gzip"),
        (b"deflate, gzip;q=1.0, *;q=0.5", "gzip"),
        (b"*", "gzip"),
        (b"gzip;q=0.5, br", "gzip"),  # identity is no more preferred than the least of what is listed
        (b"identity;q=0, gzip", "gzip"),
        (b"gzip;q=0", None),
        (b"*;q=0", None),
        (b"identity;q=0", None),  # gzip is not listed either: nothing but identity was ever offered
        (b"gzip;q=0.3, identity;q=0.7", None),  # identity preferred
        (b"br, zstd", None),
        (b"gzip;q=abc", None),  # a malformed q-value counts as 0
        (b"gzip;q=2", None),
        (b"", None),
    ],
)
def test_accept_encoding(header: bytes, coding: str | None) -> None:
    assert accepted([header]) == coding


def test_no_accept_encoding_is_no_compression() -> None:
    assert accepted([]) is None


@given(st.lists(st.binary(max_size=300), min_size=1, max_size=30))
def test_every_frame_decodes_from_the_bytes_written_up_to_it(frames: list[bytes]) -> None:
    """Killed by the frame's flush being anything but a sync flush (``Z_NO_FLUSH``: the frame waits
    in the compressor; ``Z_FULL_FLUSH`` would pass, at a cost: it resets the shared window)."""
    compressor, decoder = Compressor(), zlib.decompressobj(16 + 15)
    got = b""
    for i, frame in enumerate(frames):
        got += decoder.decompress(compressor.frame(frame))
        assert got == b"".join(frames[: i + 1])
    got += decoder.decompress(compressor.end(b"tail"))
    assert decoder.eof and got == b"".join(frames) + b"tail"


def test_control_without_the_flush_a_frame_waits() -> None:
    z = zlib.compressobj(6, zlib.DEFLATED, 16 + 12, 5)
    out = z.compress(b'data: {"choices": [{"delta": {"content": "Hi"}}]}\n\n')
    assert zlib.decompressobj(16 + 15).decompress(out) == b""


# -- through the middleware --------------------------------------------------------------------------------


def decoded(wire: Wire) -> list[bytes]:
    """What each body message decodes to, fed one at a time to one decoder (as a client reads them)."""
    decoder = zlib.decompressobj(16 + 15)
    return [decoder.decompress(m["body"]) for m in wire.messages if m["type"] == "http.response.body"]


def parsed(data: bytes) -> list[Event]:
    return [e for e in Parser().feed(data) if isinstance(e, Event)]


def bodies(wire: Wire) -> list[bytes]:
    return [m["body"] for m in wire.messages if m["type"] == "http.response.body"]


STEPS = (b"data: one\n\n", 0.05, b'event: x\ndata: {"two": 2}\n\n', 0.3, b"data: three\n\n")


async def test_a_stream_is_compressed_frame_by_frame() -> None:
    """Each body decodes, on arrival, to the frame the same stream sends uncompressed (the heartbeat
    in the silence too), and the whole is one complete gzip stream. Control: ``compress`` off."""
    plain = await serve(Script(steps=STEPS), request=scope(headers=GZIP), heartbeat_interval=0.1)
    wire = await serve(
        Script(steps=STEPS), request=scope(headers=GZIP), heartbeat_interval=0.1, compress="auto"
    )
    headers = wire.headers()
    assert headers[b"content-encoding"] == b"gzip" and headers[b"vary"] == b"accept-encoding"
    assert b"content-length" not in headers
    assert b"content-encoding" not in plain.headers() and b"vary" not in plain.headers()
    got = decoded(wire)
    assert b"".join(got) == plain.data and gzip.decompress(wire.data) == plain.data
    assert [g for g in got if g] == [b for b in bodies(plain) if b]  # frame for frame
    assert any(g.startswith(b":") for g in got)  # a heartbeat, compressed and flushed too
    assert len(wire.data) < len(plain.data) or len(plain.data) < 120


@pytest.mark.parametrize(
    "case", ["off", "no header", "HEAD", "app encoded", "not a stream", "opt_out", "override off"]
)
async def test_what_is_never_compressed(case: str) -> None:
    """Each the same request as the compressed one above, but for one thing."""
    settings: dict[str, Any] = {"compress": "off" if case == "off" else "auto"}
    headers = [(b"host", b"t")] if case == "no header" else GZIP
    request = scope("HEAD" if case == "HEAD" else "GET", headers=headers)
    content: list[tuple[bytes, bytes]] = [(b"content-type", b"text/event-stream")]
    if case == "app encoded":
        content.append((b"content-encoding", b"identity"))
    if case == "not a stream":
        content = [(b"content-type", b"application/json")]

    async def app(scope_: Message, receive: Any, send: Any) -> None:
        if case == "opt_out":
            opt_out(scope_)
        if case == "override off":
            override(scope_, compress="off")
        await send(start(content))
        await send(body(b"data: x\n\n"))
        await send(body(b"", more=False))

    wire = await serve(app, request=request, **settings)
    assert b"content-encoding" not in wire.headers() or case == "app encoded"
    assert wire.headers().get(b"content-encoding", b"identity") == b"identity"
    assert wire.data == b"data: x\n\n"  # as the app wrote it (for HEAD, the server drops it)
    control = await serve(app, request=scope(headers=GZIP), compress="auto")  # the same app, compressed
    if case in ("off", "no header", "HEAD"):
        assert control.headers()[b"content-encoding"] == b"gzip"


async def test_an_override_turns_it_on_for_one_route() -> None:
    async def app(scope_: Message, receive: Any, send: Any) -> None:
        override(scope_, compress="auto")
        await send(start())
        await send(body(b"data: x\n\n", more=False))

    wire = await serve(app, request=scope(headers=GZIP))
    assert wire.headers()[b"content-encoding"] == b"gzip" and gzip.decompress(wire.data) == b"data: x\n\n"


async def test_vary_is_appended_to_the_apps() -> None:
    async def app(scope_: Message, receive: Any, send: Any) -> None:
        await send(start([(b"content-type", b"text/event-stream"), (b"Vary", b"Origin")]))
        await send(body(b"data: x\n\n", more=False))

    wire = await serve(app, request=scope(headers=GZIP), compress="auto")
    assert [v for k, v in wire.starts[0]["headers"] if k.lower() == b"vary"] == [b"Origin, accept-encoding"]


async def test_an_error_ending_is_compressed_and_the_gzip_stream_complete() -> None:
    async def app(scope_: Message, receive: Any, send: Any) -> None:
        await send(start())
        await send(body(b"data: a\n\n"))
        raise RuntimeError("boom")

    wire = await serve(app, request=scope(headers=GZIP), compress="auto")
    events = parsed(gzip.decompress(wire.data))  # gzip.decompress: the trailer is there
    assert events[0].data == "a" and events[-1].event == "error"


async def test_a_text_stream_is_compressed_too() -> None:
    app = Script(steps=(b"Hello, ", 0.05, b"world"), content_type=PLAIN[0][1])
    wire = await serve(app, request=scope(headers=GZIP), compress="auto")
    assert gzip.decompress(wire.data) == b"Hello, world"


async def test_the_resume_log_keeps_the_uncompressed_stream() -> None:
    """A compressed stream's log replays uncompressed bytes under no Content-Encoding: a resume is
    another connection. Killed by the log storing the compressed frames (or the start's encoding)."""
    app: Any = Script(steps=(b"data: one\n\n", b"data: two\n\n"))
    mw = StreamingMiddleware(app, StreamingSettings(compress="auto", resume=True, heartbeat_interval=0))
    first = await serve(mw, request=scope(headers=GZIP))
    assert first.headers()[b"content-encoding"] == b"gzip"
    events = parsed(gzip.decompress(first.data))
    assert [e.data for e in events] == ["one", "two"] and events[0].id
    again = await serve(mw, request=scope(headers=[*GZIP, (b"last-event-id", events[0].id.encode())]))
    assert b"content-encoding" not in again.headers()
    assert [e.data for e in parsed(again.data)] == ["two"]


def test_the_setting() -> None:
    assert StreamingSettings().compress == "off"
    assert StreamingSettings.from_env({"SSE_MIDDLEWARE_COMPRESS": "auto"}).compress == "auto"
    with pytest.raises(ConfigError):
        StreamingSettings(compress="gzip")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        override({}, compress="on")  # type: ignore[arg-type]
