"""One write at a time on the server's ``send``, whatever the middleware's timer wants: a heartbeat or a
flush of merged text never starts while the app's own write is still in flight (a client that stopped
reading holds the server's send up). Black box, raw ASGI on asyncio and trio: a dict scope, a recording
``send`` that holds one write and notes any send that starts while another is in flight, and
:class:`StreamingMiddleware` with settings that make a timer write due during the hold.

Each case's control runs the same app against a client that never holds a write, the app sleeping as
long instead: the timer's write then shows on the wire, so it really was due in that window.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from sse_middleware import StreamingMiddleware, StreamingSettings

from ..support.harness import scope

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_signals"), pytest.mark.timeout(30)]

Message = dict[str, Any]
HOLD = 0.3  # seconds the slow client holds one write: many heartbeat intervals and flush deadlines


def chat_chunk(text: str) -> bytes:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": None}
    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
    return b"data: %s\n\n" % json.dumps(chunk).encode()


@dataclass(frozen=True)
class Case:
    settings: StreamingSettings
    bodies: list[bytes]  # the app's body sends, then its final empty one
    held: int  # which body send of the app is the write the client holds (counted from 1)
    held_write: int  # which body write on the wire that is (merged text may not go out on its own)


LONG = " ".join(["word"] * 40)  # past coalesce_max_bytes: the app's send writes a prefix, a rest waits
CASES = {
    # Generic SSE forwarded as sent; a heartbeat comes due while the app's second write is held.
    "heartbeat": Case(
        StreamingSettings(heartbeat_interval=0.02, coalesce=False, dialect="sse"),
        [b"data: a\n\n", b"data: b\n\n", b"data: c\n\n"],
        held=2,
        held_write=2,
    ),
    # Merged text: " b" waits in the buffer (the watcher now wants its flush deadline), then the app's
    # next send passes coalesce_max_bytes and writes the best prefix at once (held); the rest waits in
    # the buffer, and its flush deadline passes during the hold.
    "flush": Case(
        StreamingSettings(
            heartbeat_interval=0, coalesce_max_delay=0.02, coalesce_max_bytes=64, dialect="openai"
        ),
        [chat_chunk("a"), chat_chunk(" b"), chat_chunk(LONG), b"data: [DONE]\n\n"],
        held=3,
        held_write=2,
    ),
}


@dataclass
class SlowClient:
    """The server's side. ``hold_at``: the Nth body write is held ``HOLD`` seconds before it returns."""

    hold_at: int | None
    messages: list[Message] = field(default_factory=list)
    overlapping: list[Message] = field(default_factory=list)  # sends begun while another was in flight
    in_flight: int = 0
    bodies: int = 0

    async def receive(self) -> Message:
        if not self.messages:
            return {"type": "http.request", "body": b"", "more_body": False}
        await anyio.Event().wait()  # the client stays: no disconnect
        raise AssertionError("unreachable")

    async def send(self, message: Message) -> None:
        if self.in_flight:
            self.overlapping.append(message)
        self.in_flight += 1
        try:
            self.messages.append(message)
            if message["type"] == "http.response.body":
                self.bodies += 1
                if self.bodies == self.hold_at:
                    with anyio.move_on_after(HOLD):
                        await anyio.Event().wait()  # set by nobody: the client reads again after HOLD
        finally:
            self.in_flight -= 1

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages if m["type"] == "http.response.body")

    @property
    def complete(self) -> bool:
        return any(m["type"] == "http.response.body" and not m.get("more_body") for m in self.messages)


def app_for(bodies: list[bytes], sleep_after: int | None) -> Any:
    """A raw ASGI stream of ``bodies``; ``sleep_after``: a pause of HOLD after that many of them."""

    async def app(scope: Message, receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for n, chunk in enumerate(bodies, start=1):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if n == sleep_after:
                await anyio.sleep(HOLD)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


def text_of(body: bytes) -> str:
    """The content a client reads: the generic events' data, or the chat chunks' merged text."""
    out = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = b"\n".join(line[5:].lstrip(b" ") for line in block.split(b"\n") if line.startswith(b"data:"))
        if not data or data == b"[DONE]":
            continue
        if data.startswith(b"{"):
            out.append(json.loads(data)["choices"][0]["delta"]["content"])
        else:
            out.append(data.decode())
    return "".join(out)


async def serve(case: Case, client: SlowClient, sleep_after: int | None = None) -> None:
    middleware = StreamingMiddleware(app_for(case.bodies, sleep_after), case.settings)
    with anyio.fail_after(10):
        await middleware(scope(path="/stream"), client.receive, client.send)


@pytest.mark.parametrize("name", list(CASES))
async def test_no_timer_write_starts_while_the_apps_write_is_held(anyio_backend: str, name: str) -> None:
    case = CASES[name]
    client = SlowClient(hold_at=case.held_write)
    await serve(case, client)
    assert client.overlapping == [], "a write began while another was still in flight"
    assert client.complete
    assert text_of(client.body) == text_of(b"".join(case.bodies))


@pytest.mark.parametrize("name", list(CASES))
async def test_control_the_timer_writes_in_that_window_when_nothing_holds_the_send(
    anyio_backend: str, name: str
) -> None:
    case = CASES[name]
    client = SlowClient(hold_at=None)
    await serve(case, client, sleep_after=case.held)
    writes = [m.get("body", b"") for m in client.messages if m["type"] == "http.response.body"]
    after_the_held_write = writes[case.held_write :]
    if name == "heartbeat":
        assert after_the_held_write[0] == b": ping\n\n", writes
    else:  # the rest of the buffer went out on its own, before the app's [DONE]
        assert text_of(after_the_held_write[0]) == "word" and b"[DONE]" not in after_the_held_write[0], writes
    assert client.overlapping == []
    assert text_of(client.body) == text_of(b"".join(case.bodies))
