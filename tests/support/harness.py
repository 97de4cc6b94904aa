"""The raw ASGI harness: the server's side of one request (a dict scope, a scripted ``receive`` and a
recording ``send``, the "wire") with the faults real servers show, and scripted raw ASGI apps. Works on
asyncio and on trio.

Server styles: ``"2.3"`` (uvicorn, granian: a send to a gone client silently does nothing; the disconnect
is only seen on ``receive``) and ``"2.4"`` (a send to a gone client raises ``OSError``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from sse_middleware import StreamingMiddleware, StreamingSettings
from sse_middleware._core.sse import Comment, Event, Parser

Message = dict[str, Any]
SSE = [(b"content-type", b"text/event-stream")]
PLAIN = [(b"content-type", b"text/plain; charset=utf-8")]


def scope(
    method: str = "GET",
    headers: list[tuple[bytes, bytes]] | None = None,
    path: str = "/s",
    query: bytes = b"",
    spec: str = "2.3",
) -> Message:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": spec},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": headers or [(b"host", b"test")],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }


def start(headers: list[tuple[bytes, bytes]] = SSE, **extra: Any) -> Message:
    return {"type": "http.response.start", "status": 200, "headers": headers, **extra}


def body(data: Any, more: bool = True) -> Message:
    return {"type": "http.response.body", "body": data, "more_body": more}


@dataclass
class Wire:
    """The server side of one request. ``leave()``: the client disconnects now. ``leave_at``: it leaves
    when the Nth body send arrives (before it is delivered). ``block_at``: the Nth body send blocks (a
    client that stopped reading) until cancelled, or for ``block_for`` seconds. ``raise_at``: the Nth body
    send raises RuntimeError (a server-side protocol error). Under style ``"2.4"`` a send after the
    client left raises ``error``; ``quiet_receive`` keeps ``receive`` from telling (only ``send`` does).
    ``yield_for``: every body send yields to the loop for that long before it is delivered, as a real
    server's does under flow control (uvicorn's awaits its transport's drain), so other tasks run while a
    write is in flight; ``on_body(n)`` is called as the Nth body send arrives (a test acts mid-write)."""

    style: str = "2.3"
    request_body: bytes = b""
    leave_at: int | None = None
    block_at: int | None = None
    block_for: float = math.inf
    raise_at: int | None = None
    error: type[OSError] = OSError
    quiet_receive: bool = False
    yield_for: float = 0.0
    on_body: Callable[[int], object] | None = None
    messages: list[Message] = field(default_factory=list)
    gone: bool = False
    raised: int = 0  # errors raised to the middleware
    after_gone: int = 0  # sends that arrived after the client left
    bodies: int = 0
    blocked: bool = False

    def __post_init__(self) -> None:
        self._left = anyio.Event()
        self._request_sent = False

    def leave(self) -> None:
        self.gone = True
        if not self.quiet_receive:
            self._left.set()

    async def receive(self) -> Message:
        if not self._request_sent:
            self._request_sent = True
            return {"type": "http.request", "body": self.request_body, "more_body": False}
        await self._left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.body":
            self.bodies += 1
            if self.on_body is not None:
                self.on_body(self.bodies)
            if self.bodies == self.leave_at:
                self.leave()
            if self.bodies == self.block_at and not self.gone:
                await self._block()
            if self.bodies == self.raise_at:
                self.raised += 1
                raise RuntimeError("protocol error in the server")
            if self.yield_for:
                await anyio.sleep(self.yield_for)
        if self.gone:
            self.after_gone += 1
            if self.style == "2.4":
                self.raised += 1
                raise self.error("the client is gone")
            return
        self.messages.append(message)

    async def _block(self) -> None:
        self.blocked = True
        try:
            await anyio.sleep(self.block_for)  # the client reads again after block_for
        except BaseException:
            self.leave()  # cancelled while stuck: the server gives the connection up
            raise
        finally:
            self.blocked = False

    # -- what the client got ---------------------------------------------------------------------------

    @property
    def starts(self) -> list[Message]:
        return [m for m in self.messages if m["type"] == "http.response.start"]

    @property
    def data(self) -> bytes:
        return b"".join(bytes(m.get("body", b"")) for m in self.messages if m["type"] == "http.response.body")

    @property
    def complete(self) -> bool:
        """Whether the response was ended cleanly (a final body with more_body False)."""
        return any(m["type"] == "http.response.body" and not m.get("more_body", False) for m in self.messages)

    def items(self) -> list[Event | Comment]:
        return Parser(comments=True).feed(self.data)

    def events(self) -> list[Event]:
        return [i for i in self.items() if isinstance(i, Event)]

    def comments(self) -> list[Comment]:
        return [i for i in self.items() if isinstance(i, Comment)]

    def headers(self) -> dict[bytes, bytes]:
        return dict(self.starts[0]["headers"]) if self.starts else {}


def text_of_events(events: list[Event], dialect: str) -> str:
    """The content text a client reads from a stream in ``dialect`` (errors and non-text skipped)."""
    out = []
    for e in events:
        if dialect in ("sse", "text"):
            if e.event != "error":
                out.append(e.data)
            continue
        try:
            obj = json.loads(e.data)
        except ValueError:
            continue
        if dialect == "openai" and isinstance(obj, dict) and obj.get("choices"):
            out.append(obj["choices"][0]["delta"].get("content") or "")
        elif dialect == "anthropic" and e.event == "content_block_delta":
            out.append(obj["delta"]["text"])
        elif dialect == "openai-responses" and e.event == "response.output_text.delta":
            out.append(obj["delta"])
    return "".join(out)


# -- scripted apps and runs ------------------------------------------------------------------------------


@dataclass
class Script:
    """A raw ASGI app that never calls ``receive``: it writes ``steps`` (bytes, or a float to sleep),
    then ends, or with ``endless`` writes ``data: n`` every ``every`` seconds forever."""

    steps: tuple[bytes | float, ...] = ()
    content_type: bytes = b"text/event-stream"
    endless: bool = False
    every: float = 0.05
    finished = False  # the app's finally ran
    failed: BaseException | None = None

    async def __call__(self, scope: Message, receive: Any, send: Any) -> None:
        await send(start([(b"content-type", self.content_type)]))
        try:
            for step in self.steps:
                if isinstance(step, float):
                    await anyio.sleep(step)
                else:
                    await send(body(step))
            n = 0
            while self.endless:
                await send(body(b"data: %d\n\n" % n))
                n += 1
                await anyio.sleep(self.every)
            await send(body(b"", more=False))
        except Exception as exc:
            self.failed = exc
            raise
        finally:
            self.finished = True


class Apps:
    """One middleware serving a new endless Script per request (as a server would, concurrently)."""

    def __init__(self, **script: Any) -> None:
        self.made: list[Script] = []
        self.script = script

    async def __call__(self, scope: Message, receive: Any, send: Any) -> None:
        self.made.append(Script(**self.script))
        await self.made[-1](scope, receive, send)


def mw(app: Any, **changes: Any) -> StreamingMiddleware:
    return StreamingMiddleware(app, StreamingSettings(**changes))


async def serve(
    app: Any,
    *,
    guards: Any = (),
    request: Message | None = None,
    wire: Wire | None = None,
    **settings: Any,
) -> Wire:
    """Serve one request (``request``: its scope, a GET by default) through a new middleware around
    ``app`` (telemetry off unless ``settings`` say otherwise) into ``wire`` (a new one by default), within
    10 s; a :class:`StreamingMiddleware` given as ``app`` serves as it is."""
    wire = wire or Wire()
    if not isinstance(app, StreamingMiddleware):
        app = StreamingMiddleware(app, StreamingSettings(**{"telemetry": False, **settings}), guards=guards)
    with anyio.fail_after(10):
        await app(request or scope(spec=wire.style), wire.receive, wire.send)
    return wire


async def run_for(seconds: float, app: Any, wire: Wire, method: str = "GET") -> bool:
    """Serve one request; True when it was still running after ``seconds`` (then it is cancelled)."""
    with anyio.move_on_after(seconds) as timer:
        await app(scope(method, spec=wire.style), wire.receive, wire.send)
    return timer.cancelled_caught


async def run_all(*runs: tuple[float, Any, Wire] | tuple[float, Any, Wire, str]) -> list[bool]:
    """Several ``run_for`` at once (a subject and its control share the wall clock)."""
    results: list[bool] = [False] * len(runs)

    async def one(i: int) -> None:
        results[i] = await run_for(*runs[i])

    async with anyio.create_task_group() as tg:
        for i in range(len(runs)):
            tg.start_soon(one, i)
    return results
