"""Issue 12 at the raw ASGI level, on asyncio and trio: around and after its response the app runs
exactly as without us. Each case runs the same app bare (the control) and wrapped, against a server
that behaves like uvicorn: ``receive`` blocks until the client leaves or the response is complete, and
then answers ``http.disconnect`` at once (no checkpoint, as uvicorn's does once it knows)."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from sse_middleware import StreamingMiddleware, StreamingSettings
from sse_middleware._core.lifecycle import Lifecycle, LifecycleError, Phase

from ..support.harness import scope

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import ExceptionGroup

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]
Message = dict[str, Any]


class UvicornLike:
    """The server's side of one request, with uvicorn's ``receive`` semantics."""

    def __init__(self, request: list[Message] | None = None, *, reject_start: bool = False) -> None:
        self.request = list(request or [{"type": "http.request", "body": b"", "more_body": False}])
        self.sent: list[Message] = []
        self.done = anyio.Event()  # the response is complete, or the client left
        self.reject_start = reject_start

    def leave(self) -> None:
        self.done.set()

    async def receive(self) -> Message:
        if self.request:
            return self.request.pop(0)
        if not self.done.is_set():
            await self.done.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start" and self.reject_start:
            raise RuntimeError("Invalid HTTP header value")  # what h11 says of a header with a newline
        if self.done.is_set():
            return  # ASGI 2.3: a send to a client that left does nothing
        self.sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            self.done.set()


async def serve(app: Any, server: UvicornLike, *, wrap: bool, leave_after: float | None = None) -> None:
    """One request, as uvicorn would run it; what the app raises comes out as it was raised."""
    target = StreamingMiddleware(app, StreamingSettings(telemetry=False)) if wrap else app
    raised: Exception | None = None
    async with anyio.create_task_group() as tg:
        if leave_after is not None:
            tg.start_soon(_later, leave_after, server.leave)
        try:
            await target(scope(), server.receive, server.send)
        except Exception as exc:  # kept out of the task group, which would wrap it
            raised = exc
        tg.cancel_scope.cancel()
    if raised is not None:
        raise raised


async def _later(delay: float, action: Any) -> None:
    await anyio.sleep(delay)
    action()


def tokens(n: int) -> Any:
    async def gen() -> Any:
        for i in range(n):
            yield f"data: {i}\n\n"
            await anyio.sleep(0.005)

    return gen()


@pytest.mark.parametrize("kind", ["stream", "plain"])
@pytest.mark.parametrize("wrap", [True, False], ids=["wrapped", "bare"])
async def test_background_task_runs_after_the_final_body(kind: str, wrap: bool) -> None:
    """The server answers the app's pending ``receive`` with a disconnect the moment the final body is
    sent; the background task (which awaits, as saving a conversation does) still runs to its end."""
    ran: list[str] = []

    async def save() -> None:
        await anyio.sleep(0.05)
        ran.append("saved")

    async def app(scope_: Any, receive: Any, send: Any) -> None:
        task = BackgroundTask(save)
        if kind == "stream":
            response: Response = StreamingResponse(tokens(3), media_type="text/event-stream", background=task)
        else:
            response = PlainTextResponse("hello", background=task)
        await response(scope_, receive, send)

    server = UvicornLike()
    await serve(app, server, wrap=wrap)
    assert ran == ["saved"]
    assert server.sent[-1]["type"] == "http.response.body" and not server.sent[-1].get("more_body")


@pytest.mark.parametrize("wrap", [True, False], ids=["wrapped", "bare"])
async def test_is_disconnected_becomes_true_within_a_few_checks(wrap: bool) -> None:
    """A long poll that checks ``request.is_disconnected()``: Starlette probes ``receive`` inside an
    already-cancelled scope, so an await of ours before the server's call would hide the disconnect."""
    checks: list[int] = []

    async def poll(request: Request) -> Response:
        for n in range(200):
            if await request.is_disconnected():
                checks.append(n)
                break
            await anyio.sleep(0.01)
        return PlainTextResponse("done")

    server = UvicornLike()
    await serve(Starlette(routes=[Route("/s", poll)]), server, wrap=wrap, leave_after=0.1)
    assert checks and 5 <= checks[0] <= 15, checks  # left after 0.1 s: seen at about the 10th check


@pytest.mark.parametrize("wrap", [True, False], ids=["wrapped", "bare"])
async def test_an_aborted_upload_is_rolled_back_by_the_app(wrap: bool) -> None:
    """The client leaves mid-upload, before any response: the app's ``except ClientDisconnect`` cleanup
    (which awaits) runs to its end; we cancel nothing."""
    done: list[str] = []

    async def upload(request: Request) -> Response:
        try:
            await request.body()
        except ClientDisconnect:
            await anyio.sleep(0.02)  # e.g. a transaction rollback
            done.append("rolled back")
            raise
        return PlainTextResponse("stored")

    part = {"type": "http.request", "body": b"x" * 100, "more_body": True}
    server = UvicornLike([part])
    app = Starlette(routes=[Route("/s", upload, methods=["GET"])])
    with pytest.raises(ClientDisconnect):
        await serve(app, server, wrap=wrap, leave_after=0.05)
    assert done == ["rolled back"]


@pytest.mark.parametrize("wrap", [True, False], ids=["wrapped", "bare"])
async def test_a_start_the_server_refuses_is_the_apps_error(
    wrap: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The server raises from ``send(http.response.start)``: the app gets that exception, it leaves the
    middleware unchanged, and nothing is logged or sent as a failed stream."""
    raised: list[BaseException] = []

    async def app(scope_: Any, receive: Any, send: Any) -> None:
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"x-bad", b"a\nb")],
                }
            )
        except RuntimeError as exc:
            raised.append(exc)
            raise

    server = UvicornLike(reject_start=True)
    with pytest.raises(RuntimeError) as info:
        await serve(app, server, wrap=wrap)
    assert [info.value] == raised and server.sent == []
    assert not [r for r in caplog.records if r.name == "sse_middleware"]


@pytest.mark.parametrize("wrap", [True, False], ids=["wrapped", "bare"])
async def test_an_exception_group_before_the_start_comes_out_as_the_same_object(wrap: bool) -> None:
    group = ExceptionGroup("the app's own", [ValueError("a"), KeyError("b")])

    async def app(scope_: Any, receive: Any, send: Any) -> None:
        raise group

    with pytest.raises(ExceptionGroup) as info:
        await serve(app, UvicornLike(), wrap=wrap)
    assert info.value is group


def test_a_transition_the_table_does_not_allow_raises_and_changes_nothing() -> None:
    cancelled: list[bool] = []
    life = Lifecycle(lambda: cancelled.append(True))
    with pytest.raises(LifecycleError):
        life.closing()  # no stream yet
    assert life.phase is Phase.WAITING
    life.pass_through()
    with pytest.raises(LifecycleError):
        life.stream(lambda: None)  # a pass-through response never becomes a stream
    assert life.phase is Phase.PASSING and not life.ours and not cancelled


def test_the_named_transitions_do_their_bookkeeping_once() -> None:
    cancelled: list[bool] = []
    released: list[bool] = []
    life = Lifecycle(lambda: cancelled.append(True))
    life.stream(lambda: released.append(True))
    life.end()
    assert (life.phase, life.ours, cancelled, released) == (Phase.ENDING, True, [True], [])
    life.end()  # already ending: nothing more
    life.finished()
    life.let_go()
    life.let_go()
    assert (life.phase, cancelled, released) == (Phase.ENDED, [True], [True])
    closing = Lifecycle(lambda: cancelled.append(True))
    closing.stream(lambda: released.append(True))
    closing.closing()
    closing.closed()
    assert (closing.phase, closing.ours, released) == (Phase.ENDED, False, [True, True])
