"""The AI SDK's own resume at the raw ASGI level (memory store, asyncio and trio): a chat's stream, started
by a POST with ``{"id": ...}``, answered at ``GET <path>/<id>/stream`` from its first part while it is
generated, ``204`` once it ended, to the app when unknown (its ``404`` made ``204``), bound to the caller,
and stopped by ``DELETE``. Each against its control (resume off, another caller, the stream still live)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from sse_middleware import StreamingMiddleware, StreamingSettings
from sse_middleware._core import chat

from ..support.harness import Message, Wire, scope, serve

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_signals"), pytest.mark.timeout(60)]

ALICE = [(b"host", b"t"), (b"cookie", b"session=alice")]
BOB = [(b"host", b"t"), (b"cookie", b"session=bob")]
UI = [(b"content-type", b"text/event-stream"), (b"x-vercel-ai-ui-message-stream", b"v1")]
WORDS = [f"w{i} " for i in range(12)]


def part(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


class ChatApp:
    """POST /api/chat streams a UI message (one text delta of ``words`` every ``every`` s); anything else
    is 404."""

    def __init__(self, every: float = 0.05, words: list[str] = WORDS) -> None:
        self.every, self.words = every, words
        self.calls: list[tuple[str, str]] = []
        self.ended: list[str] = []

    async def __call__(self, scope_: Message, receive: Any, send: Any) -> None:
        self.calls.append((scope_["method"], scope_["path"]))
        if scope_["method"] != "POST":
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b"Not Found"})
            return
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": UI})
        try:
            for obj in [{"type": "start", "messageId": "m1"}, {"type": "text-start", "id": "t"}]:
                await send({"type": "http.response.body", "body": part(obj), "more_body": True})
            for word in self.words:
                await anyio.sleep(self.every)
                delta = part({"type": "text-delta", "id": "t", "delta": word})
                await send({"type": "http.response.body", "body": delta, "more_body": True})
            end = part({"type": "text-end", "id": "t"}) + part({"type": "finish"}) + b"data: [DONE]\n\n"
            await send({"type": "http.response.body", "body": end, "more_body": False})
            self.ended.append("finished")
        except anyio.get_cancelled_exc_class():
            self.ended.append("cancelled")
            raise


def text_of(data: bytes) -> str:
    out = []
    for block in data.split(b"\n\n"):
        for line in block.split(b"\n"):
            if line.startswith(b"data: {"):
                obj = json.loads(line[6:])
                if obj["type"] == "text-delta":
                    out.append(obj["delta"])
    return "".join(out)


def request(method: str, path: str, headers: list[tuple[bytes, bytes]]) -> Message:
    return scope(method, headers=headers, path=path)


async def call(mw: Any, method: str, path: str, headers: list[tuple[bytes, bytes]] = ALICE) -> Wire:
    return await serve(mw, request=request(method, path, headers))


def middleware(app: ChatApp, **changes: Any) -> StreamingMiddleware:
    return StreamingMiddleware(app, StreamingSettings(**{"resume": True, "telemetry": False, **changes}))


async def post_then(mw: StreamingMiddleware, after: float, then: Any) -> tuple[Wire, Any]:
    """POST the chat (its client leaves after ``after`` s), and run ``then()`` at that moment."""
    wire = Wire(request_body=json.dumps({"id": "chat-1", "messages": []}).encode())
    result: list[Any] = []

    async def later() -> None:
        await anyio.sleep(after)
        wire.leave()
        result.append(await then())

    async with anyio.create_task_group() as tg:
        tg.start_soon(later)
        await mw(request("POST", "/api/chat", ALICE), wire.receive, wire.send)
    return wire, result[0]


async def test_a_live_chat_stream_is_replayed_from_its_first_part_then_followed() -> None:
    app = ChatApp()
    mw = middleware(app)
    first, resumed = await post_then(mw, 0.2, lambda: call(mw, "GET", "/api/chat/chat-1/stream"))
    assert app.ended == ["finished"] and app.calls.count(("GET", "/api/chat/chat-1/stream")) == 0
    assert 0 < len(text_of(first.data)) < len("".join(WORDS))  # the first client left mid-answer
    assert resumed.starts[0]["status"] == 200 and resumed.complete
    assert resumed.headers()[b"x-vercel-ai-ui-message-stream"] == b"v1"
    assert text_of(resumed.data) == "".join(WORDS)  # the whole answer, once
    assert resumed.data.count(b'"type": "start"') == 1 and b"data: [DONE]\nid: " in resumed.data
    # Once it ended: 204 (the SDK has the finished message); an unknown chat: the app's 404 becomes 204.
    done = await call(mw, "GET", "/api/chat/chat-1/stream")
    unknown = await call(mw, "GET", "/api/chat/nope/stream")
    assert done.starts[0]["status"] == 204 and unknown.starts[0]["status"] == 204 and unknown.data == b""
    assert app.calls.count(("GET", "/api/chat/nope/stream")) == 1  # unknown: the app was asked


async def test_a_live_chat_whose_first_parts_the_log_dropped_is_no_content() -> None:
    """The SDK rebuilds the message from the stream's first part on: a log bounded below what was
    written no longer holds it, so there is nothing to resume from (204), though the stream is live. The
    control: the same chat, the log large enough, is answered from its first part (200)."""
    words = [f"w{i} " + "x" * 200 for i in range(12)]  # past 1 KiB of log by the fifth part
    answers = []
    for bound in (1024, 1 << 20):
        app = ChatApp(every=0.05, words=words)
        mw = middleware(app, resume_max_bytes=bound)
        _, resumed = await post_then(mw, 0.4, lambda mw=mw: call(mw, "GET", "/api/chat/chat-1/stream"))
        assert app.ended == ["finished"]  # it was live when asked: the app ran on to its end
        answers.append((resumed.starts[0]["status"], resumed.data))
    (trimmed, nothing), (whole, replayed) = answers
    assert trimmed == 204 and nothing == b""
    assert whole == 200 and text_of(replayed) == "".join(words)  # the control


async def test_control_without_resume_the_get_is_the_apps() -> None:
    app = ChatApp()
    mw = middleware(app, resume=False)
    _, resumed = await post_then(mw, 0.2, lambda: call(mw, "GET", "/api/chat/chat-1/stream"))
    assert resumed.starts[0]["status"] == 404 and resumed.data == b"Not Found"
    assert ("GET", "/api/chat/chat-1/stream") in app.calls


async def test_another_caller_finds_no_chat() -> None:
    app = ChatApp()
    mw = middleware(app)
    _, bob = await post_then(mw, 0.2, lambda: call(mw, "GET", "/api/chat/chat-1/stream", BOB))
    assert bob.starts[0]["status"] == 204 and ("GET", "/api/chat/chat-1/stream") in app.calls


async def test_delete_stops_the_chat_stream() -> None:
    app = ChatApp(every=0.1)
    mw = middleware(app)
    _, stopped = await post_then(mw, 0.3, lambda: call(mw, "DELETE", "/api/chat/chat-1/stream"))
    assert stopped.starts[0]["status"] == 204 and app.ended == ["cancelled"]  # its cleanup ran
    after = await call(mw, "GET", "/api/chat/chat-1/stream")
    assert after.starts[0]["status"] == 204


async def test_control_without_delete_the_detached_stream_runs_on() -> None:
    app = ChatApp(every=0.02)
    mw = middleware(app)
    await post_then(mw, 0.05, lambda: anyio.sleep(0))
    assert app.ended == ["finished"]


def test_chat_ids_and_paths() -> None:
    assert chat.chat_id(b'{"a": {"id": "x"}, "id": "y", "messages": []}') == "y"
    assert chat.chat_id(b'{"messages": [{"id": "u"}]}') is None and chat.chat_id(b"[]") is None
    assert chat.stream_request(b"/api/chat/a%2Fb/stream") == (b"/api/chat", "a/b")
    assert chat.stream_request(b"/api/chat/stream/x") is None and chat.stream_request(b"/stream") is None
    assert chat.chat_key(b"/p", "c", b"alice") != chat.chat_key(b"/p", "c", b"bob")
