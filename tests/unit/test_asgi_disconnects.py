"""Client disconnects at the raw ASGI level, on asyncio and trio: the disconnect message cancels an app
that never listens; under ASGI 2.4 the app hears the send's ``OSError`` as without us; Starlette hears a
disconnect itself and its generator's ``finally`` and background task run; many disconnects leave no
tasks. Each against its control: the app without the middleware."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

import anyio
import pytest
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse

from ..support.harness import Script, Wire, mw, run_for

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_signals"), pytest.mark.timeout(60)]


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
