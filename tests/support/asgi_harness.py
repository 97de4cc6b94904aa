"""A raw ASGI harness for the shell's tests: a dict scope, a recording ``send`` and a scripted ``receive``
(the server's side of one request), and scripted raw ASGI apps. Works on asyncio and on trio."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio

from sse_middleware import StreamingMiddleware, StreamingSettings
from sse_middleware._core.sse import Comment, Event, Parser

Message = dict[str, Any]
SSE = b"text/event-stream"


class Client:
    """The server's side of one request: records what is sent, scripts what ``receive`` returns."""

    def __init__(self, *, send_error: type[OSError] | None = None, fail_after: int = 3) -> None:
        self.sent: list[Message] = []
        self.gone = anyio.Event()  # set it: the client disconnects (receive returns http.disconnect)
        self._request_read = False
        self._send_error, self._fail_after = send_error, fail_after

    async def receive(self) -> Message:
        if not self._request_read:
            self._request_read = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        bodies = sum(m["type"] == "http.response.body" for m in self.sent)
        if self._send_error is not None and bodies >= self._fail_after:
            raise self._send_error("the client is gone")  # how ASGI >= 2.4 servers say it
        self.sent.append(message)

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")

    @property
    def complete(self) -> bool:
        last = self.sent[-1] if self.sent else {}
        return last.get("type") == "http.response.body" and not last.get("more_body", False)

    def items(self) -> list[Event | Comment]:
        return Parser(comments=True).feed(self.body)

    def events(self) -> list[Event]:
        return [i for i in self.items() if isinstance(i, Event)]

    def comments(self) -> list[Comment]:
        return [i for i in self.items() if isinstance(i, Comment)]


def scope(method: str = "GET", spec: str = "2.3") -> Message:
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": spec}, "http_version": "1.1",
            "method": method, "scheme": "http", "path": "/", "raw_path": b"/", "query_string": b"",
            "root_path": "", "headers": [(b"host", b"test")], "client": ("127.0.0.1", 1234),
            "server": ("127.0.0.1", 80)}


@dataclasses.dataclass
class Script:
    """A raw ASGI app that never calls ``receive``: it writes ``steps`` (bytes, or a float to sleep),
    then ends, or with ``endless`` writes ``data: n`` every ``every`` seconds forever."""

    steps: tuple[bytes | float, ...] = ()
    content_type: bytes = SSE
    endless: bool = False
    every: float = 0.05
    finished = False  # the app's finally ran
    failed: BaseException | None = None

    async def __call__(self, scope: Message, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", self.content_type)]})
        try:
            for step in self.steps:
                if isinstance(step, float):
                    await anyio.sleep(step)
                else:
                    await send({"type": "http.response.body", "body": step, "more_body": True})
            n = 0
            while self.endless:
                await send({"type": "http.response.body", "body": b"data: %d\n\n" % n, "more_body": True})
                n += 1
                await anyio.sleep(self.every)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except Exception as exc:
            self.failed = exc
            raise
        finally:
            self.finished = True


def mw(app: Any, **changes: Any) -> StreamingMiddleware:
    return StreamingMiddleware(app, StreamingSettings(**changes))


async def run_for(seconds: float, app: Any, client: Client, method: str = "GET", spec: str = "2.3") -> bool:
    """Serve one request; True when it was still running after ``seconds`` (then it is cancelled)."""
    with anyio.move_on_after(seconds) as timer:
        await app(scope(method, spec), client.receive, client.send)
    return timer.cancelled_caught


async def run_all(*runs: tuple[float, Any, Client] | tuple[float, Any, Client, str]) -> list[bool]:
    """Several ``run_for`` at once (a subject and its control share the wall clock)."""
    results: list[bool] = [False] * len(runs)

    async def one(i: int) -> None:
        results[i] = await run_for(*runs[i])

    async with anyio.create_task_group() as tg:
        for i in range(len(runs)):
            tg.start_soon(one, i)
    return results


class Apps:
    """One middleware serving a new endless Script per request (as a server would, concurrently)."""

    def __init__(self, **script: Any) -> None:
        self.made: list[Script] = []
        self.script = script

    async def __call__(self, scope: Message, receive: Any, send: Any) -> None:
        self.made.append(Script(**self.script))
        await self.made[-1](scope, receive, send)
