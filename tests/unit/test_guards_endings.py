"""How a guarded stream ends where the format has no in-band channel (text/plain, NDJSON: cut without the
terminating chunk), and in a resumable stream's log (a resume replays the same filtered ending). Raw ASGI
on asyncio and trio; the unguarded app is the control."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from sse_middleware import StreamingMiddleware, StreamingSettings

from ..support.harness import PLAIN, Wire, body, scope, serve, start
from .test_guards import App, _blocker, _text

pytestmark = pytest.mark.anyio
NDJSON = [(b"content-type", b"application/x-ndjson")]
WORDS = ["Hello ", "world, ", "the ", "secret ", "is ", "out."]


class Bytes:
    """A text/plain or NDJSON app: one body per token, no Content-Length (a stream)."""

    def __init__(self, headers: list[tuple[bytes, bytes]], pieces: list[bytes]) -> None:
        self.headers, self.pieces = headers, pieces

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send(start(self.headers))
        for piece in self.pieces:
            await send(body(piece))
            await anyio.sleep(0.002)
        await send(body(b"", more=False))


@pytest.mark.parametrize(
    ("headers", "pieces"),
    [
        (PLAIN, [w.encode() for w in WORDS]),
        (NDJSON, [json.dumps({"text": w}).encode() + b"\n" for w in WORDS]),
    ],
    ids=["text-plain", "ndjson"],
)
async def test_no_in_band_channel_means_cut_without_the_last_chunk(
    headers: list[tuple[bytes, bytes]], pieces: list[bytes], anyio_backend: str
) -> None:
    control = await serve(Bytes(headers, pieces))
    assert control.complete and b"secret" in control.data
    wire = await serve(Bytes(headers, pieces), guards=[_blocker("secret")])
    assert not wire.complete  # the client sees a failed response, never a clean end
    assert b"sec" not in wire.data and b"".join(pieces).startswith(wire.data)
    assert b"Hello" in wire.data  # what passed before the word went out


async def test_a_resume_replays_the_filtered_ending(anyio_backend: str) -> None:
    settings = StreamingSettings(telemetry=False, resume=True, heartbeat_interval=0)
    mw = StreamingMiddleware(App(), settings, guards=[_blocker("secret")])
    live = Wire()
    with anyio.fail_after(10):
        await mw(scope(), live.receive, live.send)
    events = live.events()
    assert [e.data for e in events[-1:]] == ["[DONE]"] and _text(live) == "Hello world, the "
    assert json.loads(events[-2].data)["choices"][0]["finish_reason"] == "content_filter"
    first = events[0].id
    assert first is not None
    resumed = Wire()
    request = scope(headers=[(b"host", b"test"), (b"last-event-id", first.encode())])
    with anyio.fail_after(10):
        await mw(request, resumed.receive, resumed.send)
    replayed = resumed.events()
    assert resumed.complete and [e.data for e in replayed] == [e.data for e in events[1:]]
    assert json.loads(replayed[-2].data)["content_filter"]["code"] == "word"
