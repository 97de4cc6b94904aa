"""The stall timeout at the raw ASGI level, on asyncio and trio: a silent upstream ends the stream with
each format's timeout error (heartbeats do not reset it) and the app is cancelled, even one whose only
await is ``send``; a busy upstream never stalls. Control: no stall timeout, the silence holds it open."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import pytest

from ..support.harness import Message, Script, Wire, body, mw, run_all, run_for, start

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_signals"), pytest.mark.timeout(60)]


@pytest.mark.parametrize("spec", ["2.3", "2.4"])
async def test_an_app_that_awaits_nothing_but_send_stops_when_we_end_it(spec: str) -> None:
    """A stall ends the stream and cancels the app; an app whose only await is ``send`` (an async
    generator over a list) must still stop: the writes that go nowhere are checkpoints."""
    sends = 0
    entered = anyio.Event()

    async def app(scope: Message, receive: Any, send: Any) -> None:
        nonlocal sends
        await send(start())
        await send(body(b"data: x\n\n"))
        with anyio.CancelScope(shield=True):  # silent past the stall timeout, deaf to the cancellation
            entered.set()
            await anyio.sleep(0.4)
        while sends < 100_000:  # bounded, so that a failure is a count and not a hung test
            sends += 1
            await send(body(b"data: x\n\n"))

    client = Wire(style=spec)
    assert not await run_for(5, mw(app, coalesce=False, stall_timeout=0.1), client)
    assert sends == 1  # cancelled at its first write that went nowhere; without the checkpoint, 100,000
    assert json.loads(client.events()[-1].data)["error"]["type"] == "timeout"


OPENAI_CHUNK = (
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
)
ANTHROPIC_CHUNK = (
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"hi"}}\n\n'
)


DIALECTS = {
    "sse": (b"data: hi\n\n", "timeout"),
    "openai": (OPENAI_CHUNK, "timeout"),
    "anthropic": (ANTHROPIC_CHUNK, "timeout_error"),
}


async def test_stall_timeout_ends_the_stream_with_a_timeout_error() -> None:
    apps = {name: Script((first, 30.0)) for name, (first, _) in DIALECTS.items()}
    clients = {name: Wire() for name in DIALECTS}
    started = time.monotonic()
    running = await run_all(
        *((5, mw(apps[n], stall_timeout=0.3, heartbeat_interval=0.1), clients[n]) for n in DIALECTS),
        (0.6, mw(Script((b"data: hi\n\n", 30.0)), stall_timeout=0), Wire()),
    )
    assert running == [False, False, False, True]  # control: no stall timeout, the silence holds it open
    assert time.monotonic() - started >= 0.3  # never before the timeout (no upper bound: load moves it)
    for name, (_, kind) in DIALECTS.items():
        client, last = clients[name], clients[name].events()[-1]
        assert apps[name].finished and client.complete
        assert json.loads(last.data)["error"]["type"] == kind
        assert (last.event == "error") == (name != "openai")
        assert b"[DONE]" not in client.data and client.comments()  # heartbeats do not reset the stall


async def test_busy_upstream_never_stalls() -> None:
    steps = tuple(x for i in range(12) for x in (b"data: %d\n\n" % i, 0.05))
    client = Wire()
    assert not await run_for(5, mw(Script(steps), stall_timeout=0.4), client)
    assert len(client.events()) == 12 and client.complete
