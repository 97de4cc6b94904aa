"""Guards and an event larger than ``max_event_bytes``: it cannot be held whole to be checked (memory
stays bounded) and hold mode never lets unchecked text out, so it is a fault: ``guard_failure="block"``
ends the stream before any of it leaves; ``"allow"`` streams it through in pieces, unchecked, in its
place, and the text after it is checked again. Raw ASGI on asyncio and trio; unguarded as control."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from sse_middleware._core.guard import Check

from ..support.harness import body, serve, start
from .test_guards import _blocker, _chunk, _text

pytestmark = pytest.mark.anyio
LIMIT = 1024
BIG = "big " * 1000  # one chunk of about 4 KB: past LIMIT


class App:
    """Text, one large chunk sent in 256-byte pieces, more text (``after``), then [DONE]."""

    def __init__(self, after: list[str]) -> None:
        self.after = after

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send(start())
        for token in ("Hello ", "there. "):
            await send(body(_chunk(token)))
            await anyio.sleep(0.005)
        large = _chunk(BIG)
        for i in range(0, len(large), 256):
            await send(body(large[i : i + 256]))
            await anyio.sleep(0.001)
        for token in self.after:
            await send(body(_chunk(token)))
            await anyio.sleep(0.005)
        await send(body(b"data: [DONE]\n\n", more=False))


async def test_block_ends_the_stream_before_any_of_it_leaves(anyio_backend: str) -> None:
    control = await serve(App(["bye."]), max_event_bytes=LIMIT)
    assert BIG in _text(control)  # the plain pipeline forwards it
    seen: list[Check] = []
    wire = await serve(App(["bye."]), guards=[_blocker("nothing", seen)], max_event_bytes=LIMIT)
    assert b"big" not in wire.data and "big" not in "".join(c.new for c in seen)
    last = json.loads(wire.events()[-1].data)
    assert last["error"]["message"].startswith("The stream failed on the server.")
    assert _text(wire) == "Hello there. " and wire.complete


async def test_allow_streams_it_through_in_pieces_and_checks_what_follows(anyio_backend: str) -> None:
    seen: list[Check] = []
    wire = await serve(
        App(["the secret ", "is out."]),
        guards=[_blocker("secret", seen)],
        max_event_bytes=LIMIT,
        guard_failure="allow",
    )
    assert _text(wire).startswith("Hello there. " + BIG) and "sec" not in _text(wire)
    assert json.loads(wire.events()[-2].data)["choices"][0]["finish_reason"] == "content_filter"
    assert not any("big" in c.new for c in seen)  # the guards never saw it: it went out unchecked
    pieces = [m for m in wire.messages if b"big big" in m.get("body", b"")]
    assert len(pieces) > 2  # forwarded as it arrived, not held whole
    # Nothing else rode with the pieces: the text after it still went through the checks.
    clean = await serve(App(["all ", "fine."]), max_event_bytes=LIMIT, guard_failure="allow")
    assert _text(clean).endswith(BIG + "all fine.")
