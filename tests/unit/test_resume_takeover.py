"""Takeover at raw ASGI level, on a real redis-server and a real three-node Redis Cluster: two
middlewares ("hosts") share the store; a producer made by hand with the producer API dies mid-answer
(its flusher stops, as when its host is SIGKILLed); two resumes arrive at once, one on each host. Exactly
one host runs the app again (``recovery()``: ``"takeover"`` and the log's text); both clients read the
rest once, with the stream's own ids. Two hosts and a real SIGKILL: tests/e2e/test_takeover.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from sse_middleware import StreamingMiddleware, StreamingSettings, recovery
from sse_middleware._core import chat
from sse_middleware._resume import redis_store
from sse_middleware._resume.log import StreamLog
from sse_middleware._types import Receive, Scope, Send

from ..support.harness import Wire, scope
from ..support.redis import redis_server
from ..support.redis_cluster import redis_cluster

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # real redis-servers: the full run
ALICE = [(b"authorization", b"Bearer alice")]
SSE = [(b"content-type", b"text/event-stream")]
WORDS = ["One ", "two ", "three ", "four ", "five."]
LEASE = 0.3


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # redis-py is asyncio only


@pytest.fixture(scope="module", params=["redis", "cluster"])
def store_url(request: pytest.FixtureRequest) -> Iterator[str]:
    with redis_server() if request.param == "redis" else redis_cluster() as server:
        yield server.url


def chunk(delta: dict[str, str], finish: str | None = None, ident: str = "c-first") -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return (
        b"data: "
        + json.dumps({"id": ident, "object": "chat.completion.chunk", "choices": [choice]}).encode()
        + b"\n\n"
    )


class App:
    """The app a takeover runs again: the whole answer from the start, under an id of its own."""

    def __init__(self) -> None:
        self.runs: list[Any] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = recovery(scope)
        self.runs.append((found.reason, found.text, (await receive())["body"]) if found else None)
        await send({"type": "http.response.start", "status": 200, "headers": SSE})
        await send(
            {
                "type": "http.response.body",
                "body": chunk({"role": "assistant"}, None, "c-again"),
                "more_body": True,
            }
        )
        for word in WORDS:
            await anyio.sleep(0.01)
            await send(
                {
                    "type": "http.response.body",
                    "body": chunk({"content": word}, None, "c-again"),
                    "more_body": True,
                }
            )
        done = chunk({}, "stop", "c-again") + b"data: [DONE]\n\n"
        await send({"type": "http.response.body", "body": done, "more_body": False})


def host(store_url: str, app: App) -> StreamingMiddleware:
    settings = StreamingSettings(
        resume=True, resume_store=store_url, resume_lease=LEASE, recover="continue", heartbeat_interval=0
    )
    return StreamingMiddleware(app, settings)


async def dead_producer(mw: StreamingMiddleware, words: int) -> StreamLog:
    """A stream that sent its role chunk and ``words`` words, then its host died."""
    log = await mw.resume.open(scope("POST", ALICE), mw.settings, SSE, None, b'{"q":1}')
    assert log is not None
    log.append(chunk({"role": "assistant"}))
    for word in WORDS[:words]:
        log.append(chunk({"content": word}))
    await anyio.sleep(redis_store.GATHER * 4)  # flushed
    writer: Any = log._writer
    writer._task.cancel()  # the host is gone: nothing renews its lease
    return log


def text_of(client: Wire) -> tuple[str, set[str], list[str]]:
    text, ids, finishes = "", set(), []
    for event in client.events():
        if event.data == "[DONE]":
            continue
        body = json.loads(event.data)
        ids.add(body["id"])
        choice = body["choices"][0]
        text += choice["delta"].get("content") or ""
        finishes += [choice["finish_reason"]] if choice["finish_reason"] else []
    return text, ids, finishes


async def test_two_hosts_race_one_takes_over_both_clients_read_the_rest_once(store_url: str) -> None:
    apps = App(), App()
    first, second = host(store_url, apps[0]), host(store_url, apps[1])
    log = await dead_producer(first, 2)
    clients = Wire(), Wire()
    headers = [*ALICE, (b"last-event-id", f"{log.stream}.3".encode())]
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for mw, client in zip((first, second), clients, strict=True):
                tg.start_soon(mw, scope("GET", headers, "/resume"), client.receive, client.send)
    assert sorted(map(len, (apps[0].runs, apps[1].runs))) == [0, 1]  # exactly one host ran it again
    (run,) = apps[0].runs + apps[1].runs
    assert run == ("takeover", "One two ", b'{"q":1}')  # the log's text, the kept body
    for client in clients:
        text, ids, finishes = text_of(client)
        assert text == "three four five." and ids == {"c-first"} and finishes == ["stop"]
        assert client.events()[-1].data == "[DONE]" and b'"error"' not in client.data
        assert client.events()[0].id == f"{log.stream}.4"  # the stream's own next ids
    # Control: a producer that lives is followed, never taken over.
    live = await first.resume.open(scope("POST", ALICE), first.settings, SSE, None, b"{}")
    assert live is not None
    live.append(chunk({"role": "assistant"}))
    client = Wire()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                second,
                scope("GET", [*ALICE, (b"last-event-id", f"{live.stream}.1".encode())]),
                client.receive,
                client.send,
            )
            await anyio.sleep(LEASE * 4)
            live.append(chunk({}, "stop") + b"data: [DONE]\n\n")
            await live.close(True)
    assert len(apps[0].runs + apps[1].runs) == 1 and [e.data for e in client.events()][-1] == "[DONE]"


# -- the AI SDK's own resume: GET <chat route>/<chatId>/stream ----------------------------------------

UI = [*SSE, (b"x-vercel-ai-ui-message-stream", b"v1")]


def part(obj: dict[str, str]) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


async def ui_app(scope: Scope, receive: Receive, send: Send) -> None:
    """The AI SDK's UI message stream of the whole answer, from the start, with part ids of its own."""
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": UI})
    head = [{"type": "start"}, {"type": "start-step"}, {"type": "text-start", "id": "t-again"}]
    for obj in head:
        await send({"type": "http.response.body", "body": part(obj), "more_body": True})
    for word in WORDS:
        await anyio.sleep(0.01)
        delta = part({"type": "text-delta", "id": "t-again", "delta": word})
        await send({"type": "http.response.body", "body": delta, "more_body": True})
    tail = [{"type": "text-end", "id": "t-again"}, {"type": "finish-step"}, {"type": "finish"}]
    done = b"".join(map(part, tail)) + b"data: [DONE]\n\n"
    await send({"type": "http.response.body", "body": done, "more_body": False})


async def test_the_ai_sdks_resume_of_a_dead_producers_chat_takes_it_over(store_url: str) -> None:
    settings = StreamingSettings(
        resume=True, resume_store=store_url, resume_lease=LEASE, recover="continue", heartbeat_interval=0
    )
    producer, other = StreamingMiddleware(ui_app, settings), StreamingMiddleware(ui_app, settings)
    post = scope("POST", ALICE, "/api/chat")
    log = await producer.resume.open(post, settings, UI, None, b'{"id":"chat-1","messages":[]}')
    assert log is not None
    log.index(chat.chat_key(chat.chat_path(b"/api/chat"), "chat-1", producer.resume.identity(post)))
    for obj in ({"type": "start"}, {"type": "start-step"}, {"type": "text-start", "id": "t1"}):
        log.append(part(obj))
    for word in WORDS[:2]:
        log.append(part({"type": "text-delta", "id": "t1", "delta": word}))
    await anyio.sleep(redis_store.GATHER * 4)
    writer: Any = log._writer
    writer._task.cancel()  # its host is gone
    await anyio.sleep(LEASE * 2)  # and known to be: its lease ran out before the page reloads
    client = Wire()
    with anyio.fail_after(30):
        await other(scope("GET", ALICE, "/api/chat/chat-1/stream"), client.receive, client.send)
    parts = [json.loads(e.data) for e in client.events() if e.data != "[DONE]"]
    assert "".join(p["delta"] for p in parts if p["type"] == "text-delta") == "".join(WORDS)
    assert {p["id"] for p in parts if "id" in p} == {"t1"}  # the client's part, continued
    assert [p["type"] for p in parts].count("finish") == 1 and client.events()[-1].data == "[DONE]"
    assert not any(p["type"] == "error" for p in parts)
