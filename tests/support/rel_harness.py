"""Drive the middleware at the raw ASGI level for the reliability tests: a dict scope, a scripted
``receive`` and a recording ``send`` (the "wire") with the faults real servers show, on anyio (asyncio
and trio); private OpenTelemetry SDK providers whose spans and metric points can be counted.

Server styles: ``"2.3"`` (uvicorn, granian: a send to a gone client silently does nothing; the disconnect
is only seen on ``receive``) and ``"2.4"`` (a send to a gone client raises ``OSError``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import anyio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sse_middleware._core.sse import Event, parse

Message = dict[str, Any]
SSE = [(b"content-type", b"text/event-stream")]
PLAIN = [(b"content-type", b"text/plain; charset=utf-8")]


def scope(
    method: str = "GET",
    headers: list[tuple[bytes, bytes]] | None = None,
    path: str = "/s",
    query: bytes = b"",
) -> Message:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": headers or [],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }


def start(headers: list[tuple[bytes, bytes]] = SSE, **extra: Any) -> Message:
    return {"type": "http.response.start", "status": 200, "headers": headers, **extra}


def body(data: Any, more: bool = True) -> Message:
    return {"type": "http.response.body", "body": data, "more_body": more}


@dataclass
class Wire:
    """The server side of one request. ``block_at``: the Nth body send blocks (a client that stopped
    reading) until cancelled, or for ``block_for`` seconds; ``leave_at``: the client leaves when the Nth
    body send arrives (before it is delivered)."""

    style: str = "2.3"
    request_body: bytes = b""
    leave_at: int | None = None
    block_at: int | None = None
    block_for: float = math.inf
    messages: list[Message] = field(default_factory=list)
    gone: bool = False
    raised: int = 0  # OSErrors raised to the middleware
    after_gone: int = 0  # sends that arrived after the client left
    bodies: int = 0
    blocked: bool = False
    raise_at: int | None = None  # the Nth body send raises RuntimeError (a server-side protocol error)

    def __post_init__(self) -> None:
        self._left = anyio.Event()
        self._request_sent = False

    def leave(self) -> None:
        self.gone = True
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
            if self.bodies == self.leave_at:
                self.leave()
            if self.bodies == self.block_at and not self.gone:
                await self._block()
            if self.bodies == self.raise_at:
                self.raised += 1
                raise RuntimeError("protocol error in the server")
        if self.gone:
            self.after_gone += 1
            if self.style == "2.4":
                self.raised += 1
                raise OSError("client disconnected")
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

    def events(self) -> list[Event]:
        return parse(self.data)

    def headers(self) -> dict[bytes, bytes]:
        return dict(self.starts[0]["headers"]) if self.starts else {}


class Otel:
    """Private SDK providers with in-memory exporters: spans and metric points can be counted."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tp = TracerProvider()
        self.tp.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.mp = MeterProvider(metric_readers=[self.reader])

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def count(self, name: str) -> int:
        """How many observations a histogram holds (summed over attribute sets); cumulative."""
        data = self.reader.get_metrics_data()
        if data is None:
            return 0
        return sum(
            p.count
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == name
            for p in m.data.data_points
        )


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
