"""The stream lifecycle at the ASGI level, on asyncio and on trio, through the raw harness in
``tests/support/harness.py``. Every behaviour is shown against a control that fails without it:
heartbeats off, no stall timeout, no shutdown, or the app without the middleware."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from starlette.responses import StreamingResponse

from sse_middleware import StreamingMiddleware, StreamingSettings
from sse_middleware._core.sse import Comment, Event

from ..support.harness import Message, Script, Wire, body, mw, run_all, run_for, start

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_signals"), pytest.mark.timeout(60)]


# -- heartbeats ----------------------------------------------------------------------------------------

SILENT = (b"data: a\n\n", 0.45, b"data: b\n\n")


async def test_silence_gets_heartbeats_and_zero_disables_them() -> None:
    ours, off = Wire(), Wire()
    assert await run_all((5, mw(Script(SILENT), heartbeat_interval=0.1, heartbeat_comment="hb"), ours),
                         (5, mw(Script(SILENT), heartbeat_interval=0), off)) == [False, False]
    assert ours.events() == off.events() == [Event("a"), Event("b")]
    assert 2 <= len(ours.comments()) <= 5 and set(ours.comments()) == {Comment("hb")}
    assert b"data: a\n\n: hb\n\n" in ours.data and ours.data.endswith(b": hb\n\ndata: b\n\n")
    assert off.comments() == []  # the control


async def test_busy_stream_gets_no_heartbeat() -> None:
    busy, idle = Wire(), Wire()
    steps = tuple(x for i in range(20) for x in (b"data: %d\n\n" % i, 0.02))
    await run_all((5, mw(Script(steps), heartbeat_interval=0.25), busy),
                  (5, mw(Script(SILENT), heartbeat_interval=0.25), idle))
    assert len(busy.events()) == 20 and busy.comments() == []  # idle-based, not periodic
    assert idle.comments()  # control: the same interval on a silent stream does send comments


HALF = (b"data: before\n\n", b"data: hel", 0.4, b"lo\n\n", 0.3, b"data: after\n\n")


async def test_heartbeat_never_lands_inside_a_held_partial_event() -> None:
    """The half event is held until its blank line, so comments go out before it, never inside."""
    ours, off = Wire(), Wire()
    await run_all((5, mw(Script(HALF), heartbeat_interval=0.1), ours),
                  (5, mw(Script(HALF), heartbeat_interval=0), off))
    assert ours.events() == off.events() == [Event("before"), Event("hello"), Event("after")]
    assert b"data: hello\n\n" in ours.data and len(ours.comments()) >= 3
    assert off.comments() == []  # control: the comments are the heartbeats


async def test_heartbeat_waits_for_the_end_of_an_event_already_on_the_wire() -> None:
    """Past max_event_bytes a partial event streams through; no comment is written until it ends."""
    client = Wire()
    assert not await run_for(5, mw(Script(HALF), heartbeat_interval=0.1, max_event_bytes=4), client)
    assert b"data: hel" in client.messages[2]["body"]  # the half event went out as it came
    assert b"data: hello\n\n" in client.data and client.events()[1] == Event("hello")
    during, after = client.data.split(b"data: hello\n\n")
    assert b": ping" not in during  # control: the silence after the event does get comments
    assert after.count(b": ping\n\n") >= 1


async def test_zero_interval_means_no_timer_task() -> None:
    async def count_tasks(heartbeat: float) -> int:
        seen: list[int] = []

        async def app(scope: Message, receive: Any, send: Any) -> None:
            await send(start())
            await send(body(b"data: x\n\n"))
            await anyio.sleep(0.05)
            seen.append(len(anyio.get_running_tasks()))
            await send(body(b"", more=False))

        await run_for(5, mw(app, heartbeat_interval=heartbeat, coalesce=False), Wire())
        return seen[0]

    assert await count_tasks(15) == await count_tasks(0) + 1  # the control has the timer


async def test_no_heartbeats_on_non_sse_streams() -> None:
    steps = (b"line 1\n", 0.5, b"line 2\n")
    plain, ndjson, sse = Wire(), Wire(), Wire()
    await run_all((5, mw(Script(steps, b"text/plain"), heartbeat_interval=0.1), plain),
                  (5, mw(Script(steps, b"application/x-ndjson"), heartbeat_interval=0.1), ndjson),
                  (5, mw(Script(steps), heartbeat_interval=0.1), sse))
    for client in (plain, ndjson):
        assert client.messages[0]["headers"][-1] == (b"x-accel-buffering", b"no")  # a stream we handle
        assert client.data == b"line 1\nline 2\n"
    assert b": ping" in sse.data  # control: the same silence as SSE gets comments


# -- client disconnects --------------------------------------------------------------------------------


def gone_after(bodies: int, error: type[OSError]) -> Wire:
    """An ASGI 2.4 server whose client left after ``bodies`` bodies: only ``send`` says so, by raising."""
    return Wire(style="2.4", error=error, leave_at=bodies + 1, quiet_receive=True)


def no_errors(caplog: pytest.LogCaptureFixture) -> bool:
    return not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_disconnect_message_cancels_an_app_that_never_listens(caplog: pytest.LogCaptureFixture) -> None:
    app, client, bare, control = Script(endless=True), Wire(), Script(endless=True), Wire()
    before = len(anyio.get_running_tasks())
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_for, 5, mw(app, heartbeat_interval=0.1), client)
        tg.start_soon(run_for, 1.2, bare, control)
        await anyio.sleep(0.3)
        client.leave()
        control.leave()
        left = time.monotonic()
        while not app.finished and time.monotonic() - left < 3:
            await anyio.sleep(0.01)
        stopped_after = time.monotonic() - left
        await anyio.sleep(0.3)
        assert not bare.finished  # control: without us the app never learns that the client left
    assert stopped_after < 0.5 and app.finished and app.failed is None
    assert len(anyio.get_running_tasks()) == before and no_errors(caplog)


@pytest.mark.parametrize("error", [OSError, BrokenPipeError, ConnectionResetError])
async def test_send_raising_oserror_cancels_the_app(error: type[OSError],
                                                     caplog: pytest.LogCaptureFixture) -> None:
    app, client = Script(endless=True), gone_after(3, error)
    assert not await run_for(3, mw(app, heartbeat_interval=0.1), client)
    assert app.finished and app.failed is None and no_errors(caplog)
    bare = Script(endless=True)  # control: without us the app sees the error
    with pytest.raises(error):
        await run_for(3, bare, gone_after(3, error))


@pytest.mark.parametrize("spec", ["2.3", "2.4"])
async def test_starlette_generator_finally_runs(spec: str, caplog: pytest.LogCaptureFixture) -> None:
    """Even a generator that yields bursts (several chunks between awaits): the cancellation lands inside
    it, at its next await, so its finally runs now rather than when the GC finds it at a yield."""
    done: list[str] = []

    async def tokens() -> AsyncIterator[str]:
        try:
            while True:
                for _ in range(4):
                    yield "data: token\n\n"
                await anyio.sleep(0.02)
        finally:
            done.append("finally")

    def app() -> StreamingResponse:
        return StreamingResponse(tokens(), media_type="text/event-stream")

    client = gone_after(5, OSError) if spec == "2.4" else Wire()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_for, 3, mw(app()), client)
        await anyio.sleep(0.2)
        client.leave()
    assert done == ["finally"] and no_errors(caplog)
    if spec == "2.4":  # control: without us Starlette turns the send error into an exception
        with pytest.raises(Exception) as info:
            await run_for(3, app(), gone_after(3, OSError))
        assert type(info.value).__name__ == "ClientDisconnect"
        assert done == ["finally"]  # and its generator is left suspended at a yield: no finally yet


async def test_an_app_that_awaits_nothing_but_send_still_stops() -> None:
    sends = 0

    async def app(scope: Message, receive: Any, send: Any) -> None:
        nonlocal sends
        await send(start())
        while sends < 100_000:  # bounded, so that a failure is a count and not a hung test
            sends += 1
            await send(body(b"data: x\n\n"))

    client = gone_after(3, BrokenPipeError)
    assert not await run_for(5, mw(app, coalesce=False), client)
    assert sends < 100  # cancelled within a few writes that go nowhere; without the check, 100,000


async def test_many_disconnects_leave_no_tasks_behind(caplog: pytest.LogCaptureFixture) -> None:
    async def open_streams(wrap: bool) -> int:
        before = len(anyio.get_running_tasks())
        clients = [Wire() for _ in range(25)]
        async with anyio.create_task_group() as tg:
            for client in clients:
                app = Script(endless=True)
                tg.start_soon(run_for, 3, mw(app, heartbeat_interval=0.05) if wrap else app, client)
            await anyio.sleep(0.2)
            for client in clients:
                client.leave()
            await anyio.sleep(0.5)
            left = len(anyio.get_running_tasks()) - before
            tg.cancel_scope.cancel()
        return left

    assert await open_streams(wrap=True) <= 1  # the task group's own host task at most
    assert await open_streams(wrap=False) >= 25  # control: each stream still running
    assert no_errors(caplog)


# -- stall timeout ---------------------------------------------------------------------------------------

OPENAI_CHUNK = (b'data: {"id":"c1","object":"chat.completion.chunk",'
                b'"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n')
ANTHROPIC_CHUNK = (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
                   b'"delta":{"type":"text_delta","text":"hi"}}\n\n')


DIALECTS = {"sse": (b"data: hi\n\n", "timeout"), "openai": (OPENAI_CHUNK, "timeout"),
            "anthropic": (ANTHROPIC_CHUNK, "timeout_error")}


async def test_stall_timeout_ends_the_stream_with_a_timeout_error() -> None:
    apps = {name: Script((first, 30.0)) for name, (first, _) in DIALECTS.items()}
    clients = {name: Wire() for name in DIALECTS}
    started = time.monotonic()
    running = await run_all(*((5, mw(apps[n], stall_timeout=0.3, heartbeat_interval=0.1), clients[n])
                              for n in DIALECTS),
                            (0.6, mw(Script((b"data: hi\n\n", 30.0)), stall_timeout=0), Wire()))
    assert running == [False, False, False, True]  # control: no stall timeout, the silence holds it open
    assert 0.3 <= time.monotonic() - started < 2.5
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


# -- HEAD ------------------------------------------------------------------------------------------------


async def test_head_answers_headers_without_running_an_endless_stream() -> None:
    app, client = Script(endless=True), Wire()
    # control: without us it runs on
    assert await run_all((2.0, mw(app), client, "HEAD"), (0.5, Script(endless=True), Wire(), "HEAD")) == [
        False, True]
    assert client.complete and client.data == b"" and len(client.messages) == 2  # the start, the end
    assert client.messages[0]["status"] == 200 and client.headers()[b"x-accel-buffering"] == b"no"
    assert app.failed is None and not app.finished  # cancelled in send(start): its loop never began


# -- a real client through httpx's ASGI transport --------------------------------------------------------


async def test_httpx_asgi_transport_sees_heartbeats() -> None:
    from ..support.apps import api

    async def fetch(heartbeat: float) -> bytes:
        app = StreamingMiddleware(api, StreamingSettings(heartbeat_interval=heartbeat))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as client:
            response = await client.get("/silence?gap=0.2")
        return response.content

    body = await fetch(0.08)
    assert b": ping\n\n" in body and b"data: hello\n\n" in body
    assert b": ping" not in await fetch(0)  # control
