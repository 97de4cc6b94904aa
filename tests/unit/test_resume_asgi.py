"""The resume side at raw ASGI level, through ``StreamingMiddleware``: a log produced by hand with the
producer API, then requests carrying ``Last-Event-ID``. Memory (asyncio, trio) and a real redis-server.
Each behaviour has its control: the same request that must reach the app, or the feature switched off.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sse_middleware import StreamingMiddleware, StreamingSettings
from sse_middleware._core.resume import ENTRY_OVERHEAD, new_stream
from sse_middleware._resume.log import StreamLog
from sse_middleware._telemetry import resume as rt

from ..support.harness import Wire, scope
from ..support.otel import Otel
from ..support.redis import redis_server
from ..support.resume_matrix import _anyio_backend, _backend_and_store, _redis, _store_url  # noqa: F401
from ..support.servers import free_port

pytestmark = pytest.mark.anyio
ALICE = [(b"authorization", b"Bearer alice")]
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"access-control-allow-origin", b"*")]


class App:
    """A stand-in for the app: counts the requests that reach it."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.calls.append(scope)
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        await send({"type": "http.response.body", "body": b"data: fresh\n\n", "more_body": False})


def middleware(store_url: str, **changes: Any) -> tuple[StreamingMiddleware, App]:
    app = App()
    providers = changes.pop("providers", {})
    settings = StreamingSettings(resume=True, resume_store=store_url, **{"heartbeat_interval": 0, **changes})
    return StreamingMiddleware(app, settings, **providers), app


async def produce(
    mw: StreamingMiddleware, n: int, *, end: bool | None = True
) -> tuple[StreamLog, list[bytes]]:
    """A log made by hand with the producer API, as the responder will: ``n`` events, then closed."""
    log = await mw.resume.open(scope() | {"headers": ALICE}, mw.settings, SSE_HEADERS)
    assert log is not None
    sent = [log.append(b"data: %d\n\n" % i) for i in range(1, n + 1)]
    if end is not None:
        await log.close(end)
    return log, sent


def request(log_stream: str, seq: int, headers: list[tuple[bytes, bytes]] = ALICE) -> dict[str, Any]:
    return scope() | {"headers": [*headers, (b"last-event-id", f"{log_stream}.{seq}".encode())]}


def answered_by_the_app(client: Wire) -> bool:
    """The app's own stream went out (resumable itself now: its event carries an id of its own)."""
    return [e.data for e in client.events()] == ["fresh"]


def start_of(client: Wire) -> dict[str, Any]:
    return next(m for m in client.messages if m["type"] == "http.response.start")


async def test_resume_replays_exactly_the_events_after_the_position(store_url: str) -> None:
    mw, app = middleware(store_url)
    log, sent = await produce(mw, 5)
    client = Wire()
    await mw(request(log.stream, 2), client.receive, client.send)
    assert app.calls == []  # answered from the log
    assert client.data == b"".join(sent[2:])
    assert [e.id for e in client.events()] == [f"{log.stream}.{n}" for n in (3, 4, 5)]
    assert client.complete
    headers = dict(start_of(client)["headers"])
    assert headers[b"x-accel-buffering"] == b"no" and b"no-transform" in headers[b"cache-control"]
    assert headers[b"access-control-allow-origin"] == b"*"  # the original's headers come along
    # Control: the same request without Last-Event-ID is the app's.
    fresh = Wire()
    await mw(scope() | {"headers": ALICE}, fresh.receive, fresh.send)
    assert len(app.calls) == 1 and answered_by_the_app(fresh)


async def test_the_oldest_position_a_trimmed_log_still_covers_resumes_and_one_older_goes_to_the_app(
    store_url: str,
) -> None:
    """The window's edge: a log that kept only its newest ten events (41 to 50) resumes a client that has
    up to 40, with no gap; a client at 39 lacks event 40, which is gone, so the app answers it instead."""
    entry = len(b"data: 10\nid: %s.10\n\n" % new_stream().encode()) + ENTRY_OVERHEAD  # events 10 to 99
    mw, app = middleware(store_url, resume_max_bytes=10 * entry + entry // 2)
    log, sent = await produce(mw, 50)
    edge = Wire()
    await mw(request(log.stream, 40), edge.receive, edge.send)
    assert app.calls == []
    assert edge.data == b"".join(sent[40:]) and [e.data for e in edge.events()] == [
        str(n) for n in range(41, 51)
    ]
    assert edge.complete
    older = Wire()
    await mw(request(log.stream, 39), older.receive, older.send)
    assert len(app.calls) == 1 and answered_by_the_app(older)


async def test_another_caller_or_an_unknown_id_goes_to_the_app(store_url: str) -> None:
    mw, app = middleware(store_url)
    log, _ = await produce(mw, 3)
    for req in (
        request(log.stream, 1, [(b"authorization", b"Bearer mallory")]),  # another caller
        request(log.stream, 1, []),  # no credentials at all
        request(new_stream(), 1),  # a stream no one made
        scope() | {"headers": [*ALICE, (b"last-event-id", b"not-one-of-ours")]},
    ):
        client = Wire()
        await mw(req, client.receive, client.send)
        assert answered_by_the_app(client)
    assert len(app.calls) == 4
    assert all(any(k == b"last-event-id" for k, _ in call["headers"]) for call in app.calls)  # as sent
    # Control: the right caller resumes, and the app is not called again.
    client = Wire()
    await mw(request(log.stream, 1), client.receive, client.send)
    assert len(app.calls) == 4 and [e.data for e in client.events()] == ["2", "3"]


async def test_follows_the_live_log_in_order_exactly_once_with_heartbeats(store_url: str) -> None:
    mw, app = middleware(store_url, heartbeat_interval=0.2)
    log, sent = await produce(mw, 3, end=None)
    client = Wire()
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(mw, request(log.stream, 1), client.receive, client.send)
            await anyio.sleep(0.3)
            assert log.unwatched_since == math.inf
            for i in range(4, 8):
                sent.append(log.append(b"data: %d\n\n" % i))
                await anyio.sleep(0.05)
            await anyio.sleep(0.7)  # a silence: heartbeats
            sent.append(log.append(b"data: 8\n\n"))
            await log.close(True)
    assert app.calls == []
    assert [e.data for e in client.events()] == [str(i) for i in range(2, 9)]
    assert b"".join(m["body"] for m in client.messages[1:] if not m["body"].startswith(b":")) == b"".join(
        sent[1:]
    )
    assert client.comments() and client.complete
    beats = [m["body"] for m in client.messages[1:] if m["body"].startswith(b":")]
    assert beats and set(beats) == {b": ping\n"}  # the client has an id: no blank line (see sse.comment)
    # Control: heartbeats off, the same silence sends none.
    quiet, _ = middleware(store_url)
    log, _ = await produce(quiet, 1, end=None)
    client = Wire()
    async with anyio.create_task_group() as tg:
        tg.start_soon(quiet, request(log.stream, 1), client.receive, client.send)
        await anyio.sleep(0.7)
        await log.close(True)
    assert client.comments() == [] and client.complete


async def test_a_client_with_everything_gets_204_so_eventsource_stops(store_url: str) -> None:
    mw, app = middleware(store_url)
    log, _ = await produce(mw, 3)
    client = Wire()
    await mw(request(log.stream, 3), client.receive, client.send)
    assert start_of(client)["status"] == 204 and client.data == b"" and app.calls == []
    # Control: one event short gets that event; a stream that was cut gets its error, not a 204 (which
    # would read as the whole answer) and not the app (a new answer after half of this one).
    client = Wire()
    await mw(request(log.stream, 2), client.receive, client.send)
    assert start_of(client)["status"] == 200 and [e.data for e in client.events()] == ["3"]
    cut, _ = await produce(mw, 3, end=False)
    client = Wire()
    await mw(request(cut.stream, 3), client.receive, client.send)
    assert start_of(client)["status"] == 200 and app.calls == []
    assert [e.event for e in client.events()] == ["error"] and client.complete


async def test_a_follower_that_leaves_leaves_the_log_unwatched(store_url: str) -> None:
    mw, _ = middleware(store_url)
    log, _ = await produce(mw, 2, end=None)
    log.client_left()
    assert log.unwatched_since != math.inf  # control: no one reads
    client = Wire()
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(mw, request(log.stream, 1), client.receive, client.send)
            while log.unwatched_since != math.inf:  # memory: at once; redis: by the next flush (2 s)
                await anyio.sleep(0.05)
            client.leave()
        while log.unwatched_since == math.inf:
            await anyio.sleep(0.05)
    await log.close(True)


async def test_drain_ends_resumed_responses(store_url: str) -> None:
    mw, _ = middleware(store_url)
    log, _ = await produce(mw, 2, end=None)
    drained, control = Wire(), Wire()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(mw, request(log.stream, 1), control.receive, control.send)
            await anyio.sleep(0.3)
            assert not control.complete  # control: a follower waits for the log's end
            mw.begin_shutdown()
            await anyio.sleep(0.3)
            assert control.complete  # ended cleanly: its client reconnects elsewhere
            tg.start_soon(mw, request(log.stream, 1), drained.receive, drained.send)
            await anyio.sleep(0.3)
            assert drained.complete  # a resume that starts while stopping ends at once
            await log.close(True)


# -- Redis: failures never fail a request ---------------------------------------------------------


@pytest.mark.slow  # a real redis-server: the full run
@pytest.mark.parametrize("backend_and_store", [("asyncio", "redis")], ids=["asyncio-redis"])
async def test_redis_killed_mid_follow_ends_the_follower_cleanly(store_url: str) -> None:
    with redis_server() as server:
        mw, _ = middleware(server.url)
        log, _ = await produce(mw, 2, end=None)
        killed, control = Wire(), Wire()
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(mw, request(log.stream, 1), killed.receive, killed.send)
                await anyio.sleep(0.5)
                assert [e.data for e in killed.events()] == ["2"] and not killed.complete  # following
                server.kill()
                await anyio.sleep(3)
                assert killed.complete  # ended with its final body: the client reconnects
                # The producer's side: live delivery goes on (append still tags), its log is failed.
                assert log.append(b"data: 3\n\n").startswith(b"data: 3\nid: ")
                await log.close(True)
                assert log.failed
        # Control: a store that stays up keeps the follower following for the same time.
    mw, _ = middleware(store_url)
    log, _ = await produce(mw, 2, end=None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(mw, request(log.stream, 1), control.receive, control.send)
        await anyio.sleep(3.5)
        assert not control.complete
        await log.close(True)
    assert control.complete


@pytest.mark.slow  # a real redis-server: the full run
@pytest.mark.parametrize("backend_and_store", [("asyncio", "redis")], ids=["asyncio-redis"])
async def test_redis_down_means_no_resume_logged_once(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with redis_server() as server:
        dead = server.url
    mw, app = middleware(dead)
    with caplog.at_level(logging.WARNING, "sse_middleware"):
        assert await mw.resume.open(scope(), mw.settings) is None
        mw.resume._rest_until = -math.inf  # past the rest after a failure: the store is tried again
        assert await mw.resume.open(scope(), mw.settings) is None
        client = Wire()
        await mw(request(new_stream(), 1), client.receive, client.send)
    assert answered_by_the_app(client) and len(app.calls) == 1  # the app answers
    assert len([r for r in caplog.records if "resume store" in r.message]) == 1
    live, _ = middleware(store_url)
    assert await live.resume.open(scope(), live.settings) is not None  # control: a store that is up


# -- telemetry -----------------------------------------------------------------------------------------


async def test_a_stream_whose_store_is_down_says_so_on_its_span(store_url: str) -> None:
    """Nothing listens on the port: the store fails at the stream's start, then rests; each stream that
    runs without resume says so on its span (the log line comes only once). Control: the live store."""
    otel = Otel()
    dead, _ = middleware(f"redis://127.0.0.1:{free_port()}/0", providers={"tracer_provider": otel.tp})
    for _ in range(2):  # the failure, then a stream inside the rest after it
        client = Wire()
        await dead(scope() | {"headers": ALICE}, client.receive, client.send)
        assert answered_by_the_app(client) and client.events()[0].id is None  # no id: not resumable
    live, _ = middleware(store_url, providers={"tracer_provider": otel.tp})
    client = Wire()
    await live(scope() | {"headers": ALICE}, client.receive, client.send)
    assert client.events()[0].id is not None  # the control is resumable
    marked = [(s.attributes or {}).get(rt.RESUME_UNAVAILABLE) for s in otel.ours()]
    assert marked == [True, True, None]


async def test_a_resumed_span_links_to_the_original_and_resumes_are_counted(store_url: str) -> None:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    metrics = InMemoryMetricReader()
    providers = {"tracer_provider": tracer_provider, "meter_provider": MeterProvider([metrics])}
    mw, _ = middleware(store_url, providers=providers)
    original = tracer_provider.get_tracer("test").start_span("original stream")
    log = await mw.resume.open(
        scope() | {"headers": ALICE}, mw.settings, SSE_HEADERS, original.get_span_context()
    )
    assert log is not None
    log.append(b"data: 1\n\n")
    log.append(b"data: 2\n\n")
    await log.close(True)
    for req in (request(log.stream, 1), request(new_stream(), 1)):
        client = Wire()
        await mw(req, client.receive, client.send)
    (resumed,) = [s for s in spans.get_finished_spans() if s.name == "stream resume"]
    assert [link.context.span_id for link in resumed.links] == [original.get_span_context().span_id]
    assert resumed.attributes is not None and resumed.attributes[rt.RESUME_EVENTS] == 1
    counted = {
        dict(point.attributes or {})[rt.RESUME_OUTCOME]: point.value
        for rm in metrics.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == rt.METRIC_RESUMES
        for point in metric.data.data_points
    }
    assert counted == {rt.RESUMED: 1, rt.UNKNOWN: 1}  # the unknown one made no span (control)


async def test_a_stream_made_resumable_per_request_resumes_with_resume_off(store_url: str) -> None:
    """``resume`` off for the middleware, on for one route (``override``): a request naming that stream's
    log is answered from it, although the middleware looks at no request's headers before any stream
    opened a log (a memory store holds only its own). Control: before that stream, the same kind of
    request (an id nobody made) goes to the app."""
    from sse_middleware import override

    app = App()

    async def resumable_route(scope_: dict[str, Any], receive: Any, send: Any) -> None:
        override(scope_, resume=True)
        await app(scope_, receive, send)

    settings = StreamingSettings(resume_store=store_url, heartbeat_interval=0)
    mw = StreamingMiddleware(resumable_route, settings)
    assert mw.resume.answers == store_url.startswith("redis")  # a shared store may hold others' logs
    unknown = Wire()
    await mw(request(new_stream(), 1), unknown.receive, unknown.send)
    assert len(app.calls) == 1 and answered_by_the_app(unknown)  # the control
    first = Wire()
    await mw(scope() | {"headers": ALICE}, first.receive, first.send)
    assert len(app.calls) == 2 and mw.resume.answers
    position = first.events()[0].id
    assert position is not None
    stream, seq = position.rsplit(".", 1)
    resumed = Wire()  # it has the stream's one event, and the log its clean end: 204, from the log
    await mw(request(stream, int(seq)), resumed.receive, resumed.send)
    assert len(app.calls) == 2 and start_of(resumed)["status"] == 204  # not the app's answer
