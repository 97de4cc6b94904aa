"""An app's lifespan runs through the middleware exactly as without it: startup before the first request,
the ``state`` it yields handed to every request, shutdown after the last, with a stream in between. In
process, driven by asgi-lifespan's ``LifespanManager`` (the lifespan protocol, and ``scope["state"]``
as servers hand it on) and ``httpx.ASGITransport``, on asyncio and trio; the bare app is the control.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from asgi_lifespan import LifespanManager
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from sse_middleware import StreamingMiddleware, StreamingSettings

from ..support.harness import SSE, Wire, scope

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_signals"), pytest.mark.timeout(30)]


def make_app(log: list[str]) -> Starlette:
    """Logs each lifespan step and what each request found in its state."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        log.append("startup")
        state = {"model": "tiny-model", "requests": []}
        yield state
        log.append(f"shutdown after {len(state['requests'])} requests")

    async def stream(request: Request) -> StreamingResponse:
        model = request.state.model
        request.state.requests.append("stream")
        log.append(f"stream saw {model}")

        async def events() -> AsyncIterator[str]:
            for n in range(3):
                yield f"data: {model} {n}\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def info(request: Request) -> JSONResponse:
        request.state.requests.append("info")
        return JSONResponse({"model": request.state.model})

    routes = [Route("/stream", stream), Route("/info", info)]
    return Starlette(routes=routes, lifespan=lifespan)


async def run(wrap: bool) -> tuple[list[str], list[httpx.Response]]:
    log: list[str] = []
    app: Any = make_app(log)
    if wrap:
        app = StreamingMiddleware(app, StreamingSettings(heartbeat_interval=0))
    responses = []
    async with LifespanManager(app) as manager:
        log.append("serving")
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            for path in ("/info", "/stream", "/info"):
                responses.append(await client.get(path))
        log.append("stopping")
    return log, responses


async def test_lifespan_startup_state_and_shutdown_run_unchanged_through_the_middleware(
    anyio_backend: str,
) -> None:
    bare_log, bare = await run(wrap=False)
    log, wrapped = await run(wrap=True)
    assert bare_log == [
        "startup",
        "serving",
        "stream saw tiny-model",
        "stopping",
        "shutdown after 3 requests",
    ]
    assert log == bare_log
    assert [r.status_code for r in wrapped] == [r.status_code for r in bare] == [200, 200, 200]
    assert [r.content for r in wrapped] == [r.content for r in bare]
    assert wrapped[1].text == "data: tiny-model 0\n\ndata: tiny-model 1\n\ndata: tiny-model 2\n\n"
    # The stream did go through the middleware (its anti-buffering header), the JSON passed untouched.
    assert wrapped[1].headers["x-accel-buffering"] == "no" and "x-accel-buffering" not in bare[1].headers
    assert dict(wrapped[0].headers) == dict(bare[0].headers)


async def test_a_failing_startup_fails_the_same_way_through_the_middleware(anyio_backend: str) -> None:
    """The control for 'unchanged': the app's startup error reaches the server as it is."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        raise RuntimeError("no model weights")
        yield

    raised = []
    for app in (Starlette(lifespan=lifespan), StreamingMiddleware(Starlette(lifespan=lifespan))):
        with pytest.raises(BaseException) as caught:  # on trio, asgi-lifespan's nursery wraps it in a group
            async with LifespanManager(app):
                pass
        raised.append(caught.value)
    assert [leaves(exc) for exc in raised] == [[("RuntimeError", "no model weights")]] * 2
    assert type(raised[0]) is type(raised[1])


def leaves(exc: BaseException) -> list[tuple[str, str]]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [(type(exc).__name__, str(exc))]


async def test_a_second_lifespan_resumes_again(anyio_backend: str) -> None:
    """An app started twice in one process (a test client's second lifespan): the first one's shutdown
    stopped every resumed response, and the next start must let them follow their log again. The
    control is a resume between the two lifespans, which the shutdown rightly stops: it gets what the log
    had and not the event written while it waited."""
    mw = StreamingMiddleware(make_app([]), StreamingSettings(resume=True, heartbeat_interval=0))
    caller = [(b"authorization", b"Bearer alice")]

    async def resume() -> list[str | None]:
        """A client back after event 1 of a live log that has three; event 4 comes while it follows."""
        log = await mw.resume.open(scope() | {"headers": caller}, mw.settings, SSE)
        assert log is not None
        for n in (1, 2, 3):
            log.append(b"data: %d\n\n" % n)
        wire = Wire()
        last = (b"last-event-id", f"{log.stream}.1".encode())
        async with anyio.create_task_group() as tg:
            tg.start_soon(mw, scope() | {"headers": [*caller, last]}, wire.receive, wire.send)
            await anyio.wait_all_tasks_blocked()
            log.append(b"data: 4\n\n")
            await log.close(True)
        return [event.data for event in wire.events()]

    async with LifespanManager(mw):
        assert await resume() == ["2", "3", "4"]
    assert await resume() == ["2", "3"]  # stopped: the server is shutting down
    async with LifespanManager(mw):
        assert await resume() == ["2", "3", "4"]
