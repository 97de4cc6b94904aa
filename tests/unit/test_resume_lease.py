"""A producer's lease and its kept request in a shared store (a real redis-server). A producer that dies
mid-stream (its flusher stops, as when its host is SIGKILLed) lets its lease run out, and a resume of its
log ends with the format's error event, never a clean end that reads as the whole answer. A recoverable
stream keeps its request with its log (without the caller's credentials), for a host that takes it over.
The memory store keeps neither (a dead process takes its readers with it). Two hosts and a real SIGKILL:
tests/e2e/test_takeover.py.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from sse_middleware import StreamingMiddleware, StreamingSettings
from sse_middleware._core.resume import KeptRequest
from sse_middleware._resume import redis_store
from sse_middleware._resume.log import StreamLog
from sse_middleware._types import Receive, Scope, Send

from ..support.harness import Wire, scope
from ..support.redis import RedisServer, redis_client
from ..support.resume_matrix import _redis  # noqa: F401

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # a real redis-server: the full run
ALICE = [(b"authorization", b"Bearer alice")]
SSE = [(b"content-type", b"text/event-stream")]
LEASE = 0.3


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # redis-py is asyncio only


async def _nobody(scope: Scope, receive: Receive, send: Send) -> None:
    raise AssertionError("a resume of a known log never reaches the app")


def chunk(text: str | None) -> bytes:
    delta = {"content": text} if text is not None else {}
    finish = None if text is not None else "stop"
    body = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


async def producing(mw: StreamingMiddleware, words: list[str]) -> StreamLog:
    log = await mw.resume.open(scope() | {"headers": ALICE}, mw.settings, SSE)
    assert log is not None
    for word in words:
        log.append(chunk(word))
    await anyio.sleep(redis_store.GATHER * 4)  # flushed
    return log


def die(log: StreamLog) -> None:
    """The producer's host is gone: its flusher stops, so nothing renews its lease."""
    writer: Any = log._writer
    writer._task.cancel()


async def resume(mw: StreamingMiddleware, log: StreamLog, seq: int) -> Wire:
    client = Wire()
    headers = [*ALICE, (b"last-event-id", f"{log.stream}.{seq}".encode())]
    with anyio.fail_after(20):
        await mw(scope() | {"headers": headers}, client.receive, client.send)
    return client


async def test_a_dead_producers_log_resumes_with_the_formats_error(redis: RedisServer) -> None:
    settings = StreamingSettings(
        resume=True, resume_store=redis.url, resume_lease=LEASE, heartbeat_interval=0
    )
    mw = StreamingMiddleware(_nobody, settings)
    log = await producing(mw, ["Hello", " world"])
    die(log)
    client = await resume(mw, log, 1)
    events = client.events()
    assert [json.loads(e.data)["choices"][0]["delta"]["content"] for e in events[:1]] == [" world"]
    assert len(events) == 2 and "error" in json.loads(events[1].data)  # the openai format's error
    assert client.complete and b"[DONE]" not in client.data
    # The same at the log's last position (the client has all the log holds): the error alone.
    at_end = await resume(mw, log, 2)
    assert [list(json.loads(e.data)) for e in at_end.events()] == [["error"]]
    # Control: a producer that lives, and ends its stream, gives a clean, whole resume.
    alive = await producing(mw, ["Hello", " world"])
    await anyio.sleep(LEASE * 3)  # longer than the lease: renewed, not run out
    alive.append(chunk(None))
    alive.append(b"data: [DONE]\n\n")
    await alive.close(True)
    whole = await resume(mw, alive, 1)
    assert [e.data for e in whole.events()][-1] == "[DONE]" and b'"error"' not in whole.data


# -- the request kept with the log ----------------------------------------------------------------


async def _chat_app(scope: Scope, receive: Receive, send: Send) -> None:
    while (await receive()).get("more_body"):  # the body read whole: recovery can hold it
        pass
    await send({"type": "http.response.start", "status": 200, "headers": SSE})
    await send({"type": "http.response.body", "body": chunk("Hi"), "more_body": True})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


async def _kept(redis: RedisServer, **changes: Any) -> tuple[KeptRequest | None, int]:
    """A POST streamed through the middleware; the request its log kept, and the key's time to live."""
    settings = StreamingSettings(resume=True, resume_store=redis.url, resume_ttl=120, **changes)
    mw = StreamingMiddleware(_chat_app, settings)
    headers = [
        *ALICE,
        (b"cookie", b"s=1"),
        (b"x-api-key", b"sk-ant"),
        (b"content-type", b"application/json"),
        (b"content-length", b"13"),
    ]
    client = Wire(request_body=b'{"prompt":1}\n')
    with anyio.fail_after(10):
        await mw(scope("POST", headers, "/v1/chat", b"a=1"), client.receive, client.send)
    stream = client.events()[0].id.partition(".")[0]
    raw = await mw.resume.store.request(stream)
    kept = KeptRequest.decode(raw) if raw is not None else None
    async with redis_client(redis) as direct:
        ttl = await direct.pttl(f"sse_middleware:{{{stream}}}:request")
    return kept, ttl


async def test_a_recoverable_stream_keeps_its_request_with_the_log_and_its_ttl(redis: RedisServer) -> None:
    kept, ttl = await _kept(redis, recover="continue")
    assert kept is not None and kept.body == b'{"prompt":1}\n'
    assert (kept.method, kept.path, kept.query) == ("POST", "/v1/chat", b"a=1")
    assert (b"content-type", b"application/json") in kept.headers
    names = {name for name, _ in kept.headers}
    assert not names & {b"authorization", b"cookie", b"x-api-key"}  # credentials are never stored
    assert 110_000 < ttl <= 120_000  # the ended log's TTL (resume_ttl)
    # A re-run's scope: the kept request with the resuming caller's credentials.
    credentials = [(b"authorization", b"Bearer alice"), (b"x-api-key", b"sk-2")]
    resuming = scope("GET", [*credentials, (b"last-event-id", b"x.1")], "/other")
    again = kept.scope(resuming)
    assert (b"x-api-key", b"sk-2") in again["headers"]
    assert again["method"] == "POST" and again["path"] == "/v1/chat" and again["query_string"] == b"a=1"
    assert (b"authorization", b"Bearer alice") in again["headers"]
    assert b"last-event-id" not in {name for name, _ in again["headers"]}
    # Control: with recovery off (the default) nothing of the request is kept.
    assert await _kept(redis) == (None, -2)


# -- a reconnect storm --------------------------------------------------------------------------------


async def test_more_followers_than_redis_pys_default_pool_all_follow(redis: RedisServer) -> None:
    """Every follower holds a connection through its XREAD BLOCK: 150 of them on one host (what a host's
    death sends to the survivors) all follow, none reaches the app (redis-py's default pool stops at 100,
    and the 101st would count as the store being down)."""
    reached: list[Scope] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        reached.append(scope)
        await send({"type": "http.response.start", "status": 200, "headers": SSE})
        await send({"type": "http.response.body", "body": b"data: fresh\n\n", "more_body": False})

    settings = StreamingSettings(resume=True, resume_store=redis.url, heartbeat_interval=0)
    mw = StreamingMiddleware(app, settings)
    log = await producing(mw, ["Hello"])
    clients = [Wire() for _ in range(150)]
    headers = [*ALICE, (b"last-event-id", f"{log.stream}.1".encode())]
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for client in clients:
                tg.start_soon(mw, scope() | {"headers": headers}, client.receive, client.send)
            await anyio.sleep(1.5)  # every one of them waiting in its XREAD
            log.append(chunk(" world"))
            await log.close(True)
    assert reached == []
    assert all([e.data for e in c.events()] == [chunk(" world")[6:-2].decode()] for c in clients)


async def test_a_producer_whose_lease_another_host_took_writes_nothing_more(redis: RedisServer) -> None:
    """Every append is fenced by the lease: a producer that paused past its lease while another host took
    the stream over (the lease now holds that host's token) appends nothing, and its log says it failed;
    its live client is not affected (append still tags)."""
    settings = StreamingSettings(
        resume=True, resume_store=redis.url, resume_lease=LEASE, heartbeat_interval=0
    )
    mw = StreamingMiddleware(_nobody, settings)
    log = await producing(mw, ["Hello"])
    key = f"sse_middleware:{{{log.stream}}}"
    async with redis_client(redis) as direct:
        log.append(chunk(" world"))  # control: while it holds its lease, its events land
        await anyio.sleep(redis_store.GATHER * 4)
        assert await direct.xlen(key) == 2 and not log.failed
        await direct.set(key + ":writer", b"another host's token", px=60_000)
        tagged = log.append(chunk(" again"))
        await anyio.sleep(redis_store.GATHER * 4)
        assert b"id: " in tagged and log.failed
        newest = await direct.xrevrange(key, count=1)
        assert newest[0][0] == b"2-0"  # its third event never reached the log
