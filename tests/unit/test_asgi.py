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
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse

from sse_middleware import StreamingMiddleware, StreamingSettings
from sse_middleware._core.sse import Comment, Event

from ..support.harness import Message, Script, Wire, body, mw, run_all, run_for, start

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_signals"), pytest.mark.timeout(60)]


# -- heartbeats ----------------------------------------------------------------------------------------

SILENT = (b"data: a\n\n", 0.45, b"data: b\n\n")


async def test_silence_gets_heartbeats_and_zero_disables_them() -> None:
    ours, off = Wire(), Wire()
    assert await run_all(
        (5, mw(Script(SILENT), heartbeat_interval=0.1, heartbeat_comment="hb"), ours),
        (5, mw(Script(SILENT), heartbeat_interval=0), off),
    ) == [False, False]
    assert ours.events() == off.events() == [Event("a"), Event("b")]
    assert 2 <= len(ours.comments()) <= 5 and set(ours.comments()) == {Comment("hb")}
    assert b"data: a\n\n: hb\n\n" in ours.data and ours.data.endswith(b": hb\n\ndata: b\n\n")
    assert off.comments() == []  # the control


async def test_busy_stream_gets_no_heartbeat() -> None:
    busy, idle = Wire(), Wire()
    steps = tuple(x for i in range(20) for x in (b"data: %d\n\n" % i, 0.02))
    await run_all(
        (5, mw(Script(steps), heartbeat_interval=0.25), busy),
        (5, mw(Script(SILENT), heartbeat_interval=0.25), idle),
    )
    assert len(busy.events()) == 20 and busy.comments() == []  # idle-based, not periodic
    assert idle.comments()  # control: the same interval on a silent stream does send comments


HALF = (b"data: before\n\n", b"data: hel", 0.4, b"lo\n\n", 0.3, b"data: after\n\n")


async def test_heartbeat_never_lands_inside_a_held_partial_event() -> None:
    """The half event is held until its blank line, so comments go out before it, never inside."""
    ours, off = Wire(), Wire()
    await run_all(
        (5, mw(Script(HALF), heartbeat_interval=0.1), ours), (5, mw(Script(HALF), heartbeat_interval=0), off)
    )
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


async def test_no_task_while_nothing_is_due(anyio_backend: str) -> None:
    """asyncio: deadlines wait on a loop timer handle that peeks at the stream; no task until work is
    due, whether a heartbeat is 15 s or 0.3 s away. trio has no timer callbacks: one sleeping task per
    stream with a deadline. Control: a stream whose app does not listen gets the listener's task."""

    async def count_tasks(heartbeat: float, style: str = "2.4") -> int:
        seen: list[int] = []

        async def app(scope: Message, receive: Any, send: Any) -> None:
            await send(start())
            await send(body(b"data: x\n\n"))
            await anyio.sleep(0.05)
            seen.append(len(anyio.get_running_tasks()))
            await send(body(b"", more=False))

        # ASGI 2.4: the server reports a disconnect on send, so no listener either
        # send_timeout off: its deadline would be one more to wait for (trio: a sleeping task)
        settings = {"heartbeat_interval": heartbeat, "coalesce": False, "send_timeout": 0}
        await run_for(5, mw(app, **settings), Wire(style=style))
        return seen[0]

    none = await count_tasks(0)
    trio = anyio_backend == "trio"
    assert await count_tasks(0.3) == await count_tasks(15) == none + trio
    assert await count_tasks(0, style="2.3") == none + 1  # control: a task that listens


async def test_a_parked_heartbeat_still_arrives() -> None:
    """The heartbeat 1.5 s away waits on a timer handle alone; it spawns the watcher when due."""
    client, control = Wire(), Wire()
    await run_all(
        (5, mw(Script((b"data: a\n\n", 1.8, b"data: b\n\n")), heartbeat_interval=1.5), client),
        (5, mw(Script((b"data: a\n\n", 1.8, b"data: b\n\n")), heartbeat_interval=0), control),
    )
    assert client.data.count(b": ping\n\n") == 1 and b": ping" not in control.data


async def test_no_heartbeats_on_non_sse_streams() -> None:
    steps = (b"line 1\n", 0.5, b"line 2\n")
    plain, ndjson, sse = Wire(), Wire(), Wire()
    await run_all(
        (5, mw(Script(steps, b"text/plain"), heartbeat_interval=0.1), plain),
        (5, mw(Script(steps, b"application/x-ndjson"), heartbeat_interval=0.1), ndjson),
        (5, mw(Script(steps), heartbeat_interval=0.1), sse),
    )
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
async def test_send_raising_oserror_reaches_the_app_as_without_us(
    error: type[OSError], caplog: pytest.LogCaptureFixture
) -> None:
    """ASGI >= 2.4: the server says the client is gone by raising from ``send``; the app hears it there,
    exactly as without us (its ``except`` and cleanup run as the app wrote them), and we log no error."""
    app, client = Script(endless=True), gone_after(3, error)
    with pytest.raises(error):
        await run_for(3, mw(app, heartbeat_interval=0.1), client)
    assert app.finished and isinstance(app.failed, error) and no_errors(caplog)
    bare, control = Script(endless=True), gone_after(3, error)  # control: the same without us
    with pytest.raises(error):
        await run_for(3, bare, control)
    assert [e.data for e in client.events()] == [e.data for e in control.events()] == ["0", "1", "2"]


async def test_starlette_hears_a_disconnect_itself_and_its_generator_finally_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """ASGI 2.3: Starlette's StreamingResponse listens on receive itself; it cancels its own generator,
    whose finally runs, and then runs its background task: we cancel nothing."""
    done: list[str] = []

    async def tokens() -> AsyncIterator[str]:
        try:
            while True:
                for _ in range(4):
                    yield "data: token\n\n"
                await anyio.sleep(0.02)
        finally:
            done.append("finally")

    async def background() -> None:
        await anyio.sleep(0.05)  # an await that a cancelled scope would interrupt
        done.append("background")

    def app() -> StreamingResponse:
        task = BackgroundTask(background)
        return StreamingResponse(tokens(), media_type="text/event-stream", background=task)

    for wrap in (True, False):  # with us, and the control without
        done.clear()
        client = Wire()
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_for, 3, mw(app()) if wrap else app(), client)
            await anyio.sleep(0.2)
            client.leave()
        assert done == ["finally", "background"], wrap
        assert client.events()
    assert no_errors(caplog)


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


async def test_head_gets_the_stream_headers_and_runs_as_without_us() -> None:
    """HEAD: the headers GET would have (anti-buffering included); the app's messages pass through to the
    server, which sends no body, and the app runs exactly as without us."""
    app, client, bare, control = Script((b"data: 1\n\n",)), Wire(), Script((b"data: 1\n\n",)), Wire()
    assert await run_all((2.0, mw(app), client, "HEAD"), (2.0, bare, control, "HEAD")) == [False, False]
    assert app.finished and bare.finished and app.failed is None
    assert client.messages[0]["status"] == 200 and client.headers()[b"x-accel-buffering"] == b"no"
    assert client.messages[1:] == control.messages[1:]  # the app's own messages, untouched
    assert b"x-accel-buffering" not in control.headers()  # control: we added it


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
