"""An MCP server (the ``mcp`` SDK's ``MCPServer``) over Streamable HTTP at ``/mcp``, for
tests/e2e/test_agent_mcp.py. ``TEST_WRAP=0`` serves it without the middleware (the control); the
middleware's settings come from ``SSE_MIDDLEWARE_*``. ``TEST_MCP_RESUMABLE=1`` gives it an event store
(the SDK's resumable mode: every event gets an ``id:`` of the app's own, a client that lost its stream
reconnects with ``Last-Event-ID`` and the server replays the rest).

Tools: ``count`` (progress notifications, then a result), ``fail`` (a progress notification, then an
exception: an error result), ``halfway`` (closes its own SSE stream halfway, so the client reconnects).
"""

from __future__ import annotations

import os
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse

from sse_middleware import StreamingMiddleware

server = MCPServer("sse-middleware-test")


@server.tool()
async def count(n: int, ctx: Context, pause: float = 0.01) -> str:
    """Count to n, reporting progress at every step."""
    for i in range(1, n + 1):
        await anyio.sleep(pause)
        await ctx.report_progress(i, n, f"step {i} of {n} · ✓")
    return f"counted to {n}"


@server.tool()
async def fail(ctx: Context) -> str:
    """Report some progress, then fail."""
    await ctx.report_progress(1, 2, "about to fail")
    raise ValueError("the tool failed on purpose")


@server.tool()
async def halfway(n: int, ctx: Context) -> str:
    """Count to n with progress; after half of it, close this call's SSE stream (the client reconnects
    with Last-Event-ID and the server replays what it missed from its event store)."""
    for i in range(1, n + 1):
        if i == n // 2 + 1:
            await ctx.close_sse_stream()  # the rest goes to the store alone; the client replays it
        await ctx.report_progress(i, n, f"step {i}")
    return f"resumed and counted to {n}"


class Store(EventStore):
    """Events in memory, with ids ``ev-<stream>-<k>`` (k counting per stream): the same in every run, so
    two runs' wires compare byte for byte; never of the middleware's own id shape.

    A replay waits (a few seconds at most) for the stream's answer to be stored, so that what a
    reconnect gets does not depend on when it came: every run replays the same events."""

    def __init__(self) -> None:
        self.events: list[tuple[EventId, StreamId, JSONRPCMessage | None]] = []
        self._counts: dict[StreamId, int] = {}
        self._answered: dict[StreamId, anyio.Event] = {}

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        k = self._counts[stream_id] = self._counts.get(stream_id, 0) + 1
        event_id = f"ev-{stream_id}-{k}"
        self.events.append((event_id, stream_id, message))
        if isinstance(message, (JSONRPCResponse, JSONRPCError)):
            self._answered.setdefault(stream_id, anyio.Event()).set()
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        found = next((i for i, (eid, _, _) in enumerate(self.events) if eid == last_event_id), None)
        if found is None:
            return None
        stream = self.events[found][1]
        with anyio.move_on_after(5):
            await self._answered.setdefault(stream, anyio.Event()).wait()
        for eid, sid, message in self.events[found + 1 :]:
            if sid == stream and message is not None:
                await send_callback(EventMessage(message, eid))
        return stream


def build(wrap: bool, resumable: bool) -> Any:
    app = server.streamable_http_app(
        event_store=Store() if resumable else None,
        retry_interval=50 if resumable else None,  # how soon the client comes back (ms)
        # the tests reach it through a tap on another port: the Host check is not what they test
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return StreamingMiddleware(app) if wrap else app


app = build(os.environ.get("TEST_WRAP", "1") == "1", os.environ.get("TEST_MCP_RESUMABLE") == "1")
