"""MCP (Streamable HTTP) through the middleware, with the ``mcp`` SDK's own server and client.

The server is tests/support/apps_mcp.py (an ``MCPServer`` with a progress tool, a failing tool, and one
that closes its own stream halfway), served by uvicorn with the middleware and without it (the control).
The SDK's ``Client`` talks to each through a recording proxy (tests/support/wiretap.py), so besides the
results the tests compare the raw wire: every response body byte for byte. Normalized, and only that:
the ``Mcp-Session-Id`` (random per session), the JSON-RPC request ids in request and response bodies
(the client numbers concurrent calls in the order they reach it), the ``Date`` header, a stream's bytes
after the event with the JSON-RPC answer (the client closes there: whether a priming event after it
made it onto the wire is a race), and where the middleware differs on purpose in headers (it drops the
app's ``Connection: keep-alive``, which a test asserts).

Both handshakes: ``legacy`` (``initialize``, a session) and the 2026-07-28 per-request protocol. The
resumable mode (an ``EventStore``: every event carries the app's own ``id:``) with the middleware's
``resume`` off and on: the client must resume the app's way, by ``Last-Event-ID`` to the app.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from mcp import Client

from ..support.servers import Server, uvicorn
from ..support.wiretap import Exchange, tap

APP = "tests.support.apps_mcp:app"
OUR_ID = re.compile(rb"^id: [A-Za-z0-9_-]{22}\.[0-9]+\r?$", re.M)  # the middleware's resume ids


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Server]]:
    """Every variant at once (module scope): plain and resumable, bare and behind the middleware."""
    variants = {
        "bare": {"TEST_WRAP": "0"},
        "ours": {},
        "ours-resume-on": {"SSE_MIDDLEWARE_RESUME": "1"},
        "bare-resumable": {"TEST_WRAP": "0", "TEST_MCP_RESUMABLE": "1"},
        "ours-resumable": {"TEST_MCP_RESUMABLE": "1"},
        "ours-resumable-resume-on": {"TEST_MCP_RESUMABLE": "1", "SSE_MIDDLEWARE_RESUME": "1"},
    }
    with contextlib.ExitStack() as stack:
        yield {name: stack.enter_context(uvicorn(APP, env)) for name, env in variants.items()}


@dataclass
class Session:
    """What the SDK's client got, and the wire under it."""

    results: dict[str, Any] = field(default_factory=dict)
    progress: dict[str, list[tuple[float, float | None, str | None]]] = field(default_factory=dict)
    wire: list[Exchange] = field(default_factory=list)


def _result(result: Any) -> dict[str, Any]:
    return {
        "text": [c.text for c in result.content],
        "error": result.is_error,
        "structured": result.structured_content,
    }


async def _call(client: Client, session: Session, name: str, tool: str, arguments: dict[str, Any]) -> None:
    seen = session.progress.setdefault(name, [])

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    session.results[name] = _result(await client.call_tool(tool, arguments, progress_callback=on_progress))


def run(server: Server, mode: str, calls: str = "plain") -> Session:
    """One client session against ``server`` through a wire tap: ``plain`` (progress, a failing tool,
    three concurrent calls on one session) or ``halfway`` (the tool that closes its stream halfway)."""
    session = Session()

    async def main(url: str) -> None:
        async with Client(f"{url}/mcp", mode=mode) as client:
            if calls == "halfway":
                await _call(client, session, "halfway", "halfway", {"n": 6})
                return
            await _call(client, session, "count", "count", {"n": 5})
            await _call(client, session, "fail", "fail", {})
            async with anyio.create_task_group() as group:
                for k in (3, 4, 6):
                    group.start_soon(
                        _call, client, session, f"concurrent-{k}", "count", {"n": k, "pause": 0.02}
                    )

    with tap(server.port) as wire:
        anyio.run(main, wire.url)
        session.wire = wire.exchanges()
    return session


# -- normalizing the wire -----------------------------------------------------------------------------

_SAME_EITHER_WAY = {"date", "mcp-session-id", "connection", "transfer-encoding"}


def _request_id(exchange: Exchange) -> str | None:
    try:
        body = json.loads(exchange.request_body)
    except ValueError:
        return None
    return str(body["id"]) if isinstance(body, dict) and "id" in body else None


def _without_ids(data: bytes, request_id: str | None) -> bytes:
    if request_id is None:
        return data
    return re.sub(rb'("id"|"progressToken"):' + request_id.encode() + rb"\b", rb"\1:ID", data)


def _answered(exchange: Exchange, request_id: str | None) -> bytes:
    """The body up to the end of the event with the JSON-RPC answer to this request: where the SDK's
    client stops reading and closes (whether a priming event after it is on the wire is a race)."""
    body = exchange.body
    if request_id is None or not exchange.header("content-type", "").startswith("text/event-stream"):
        return body
    match = re.search(rb'data: \{"jsonrpc":"2.0","id":' + request_id.encode() + rb",[^\r\n]*\r?\n\r?\n", body)
    return body[: match.end()] if match else body


def wire_of(session: Session) -> dict[tuple[str, str, bytes], tuple[int, dict[str, str], bytes]]:
    """Each exchange by (method, target, request body), normalized as the module docstring says."""
    out = {}
    for exchange in session.wire:
        rid = _request_id(exchange)
        key = (exchange.method, exchange.target, _without_ids(exchange.request_body, rid))
        headers = {k: v for k, v in exchange.headers if k not in _SAME_EITHER_WAY}
        out[key] = (exchange.status, headers, _without_ids(_answered(exchange, rid), rid))
    return out


def assert_same_wire(ours: Session, bare: Session) -> None:
    got, want = wire_of(ours), wire_of(bare)
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == want[key], key


# -- the tests ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_mcp_through_the_middleware_is_the_bare_app_byte_for_byte(
    servers: dict[str, Server], mode: str
) -> None:
    ours, bare = run(servers["ours"], mode), run(servers["bare"], mode)
    # The control first: what the SDK's client gets from the app itself.
    assert bare.results["count"] == {
        "text": ["counted to 5"],
        "error": False,
        "structured": {"result": "counted to 5"},
    }
    assert [p for p, _, _ in bare.progress["count"]] == [1, 2, 3, 4, 5]
    assert bare.progress["count"][0] == (1, 5, "step 1 of 5 · ✓")
    assert bare.results["fail"]["error"] is True and bare.progress["fail"] == [(1, 2, "about to fail")]
    for k in (3, 4, 6):  # three calls at once on one session, each with its own progress and answer
        assert bare.results[f"concurrent-{k}"]["text"] == [f"counted to {k}"]
        assert [p for p, _, _ in bare.progress[f"concurrent-{k}"]] == list(range(1, k + 1))
    streams = [e for e in bare.wire if e.header("content-type", "").startswith("text/event-stream")]
    assert sum(e.body.count(b"notifications/progress") for e in streams) >= 5 + 1 + 3 + 4 + 6
    # Through the middleware: the same results, progress and wire.
    assert ours.results == bare.results
    assert ours.progress == bare.progress
    assert_same_wire(ours, bare)
    served = [e for e in ours.wire if e.header("content-type", "").startswith("text/event-stream")]
    assert served and all(e.header("x-accel-buffering") == "no" for e in served)
    assert all(e.header("connection") is None for e in served)  # hop-by-hop: never passed on


def test_mcp_without_an_event_store_gets_the_middlewares_ids_under_resume(servers: dict[str, Server]) -> None:
    """The other side of the decision: MCP streams with no ids of their own are tagged (a client that
    loses one can resume it from the middleware's log), and the SDK's client works the same."""
    ours, bare = run(servers["ours-resume-on"], "legacy"), run(servers["bare"], "legacy")
    assert ours.results == bare.results and ours.progress == bare.progress
    tools = [e for e in ours.wire if b'"tools/call"' in e.request_body]
    assert tools and all(OUR_ID.search(e.body) for e in tools)
    assert not any(OUR_ID.search(e.body) for e in bare.wire)  # control


@pytest.fixture(scope="module")
def bare_halfway(servers: dict[str, Server]) -> Session:
    """The control, run once: the store's ids count per request id, so a second session on the same
    server would get other ids."""
    return run(servers["bare-resumable"], "legacy", "halfway")


@pytest.mark.parametrize("middleware", ["ours-resumable", "ours-resumable-resume-on"])
def test_mcp_resumable_mode_resumes_the_apps_way(
    servers: dict[str, Server], bare_halfway: Session, middleware: str
) -> None:
    ours, bare = run(servers[middleware], "legacy", "halfway"), bare_halfway
    done = {
        "text": ["resumed and counted to 6"],
        "error": False,
        "structured": {"result": "resumed and counted to 6"},
    }
    for session in (bare, ours):
        assert session.results["halfway"] == done
        assert [p for p, _, _ in session.progress["halfway"]] == [1, 2, 3, 4, 5, 6]  # each once, in order
        post = next(e for e in session.wire if b'"halfway"' in e.request_body)
        resumed = [e for e in session.wire if e.method == "GET" and "last-event-id" in e.request_headers]
        assert len(resumed) == 1, "the stream closed halfway: the client reconnected once"
        (again,) = resumed
        # The client came back with the app's own id of the last event it had, and the app answered it.
        assert re.fullmatch(r"ev-\d+-\d+", again.request_headers["last-event-id"])
        assert again.status == 200 and b"resumed and counted to 6" in again.body
        assert not OUR_ID.search(post.body + again.body), "the app's ids are the stream's ids"

    # Byte for byte: the two responses of the call, together (where the first stops is a race of the app's
    # own close with its writer, the same with and without the middleware; together they are every event).
    def call(session: Session) -> bytes:
        post = next(e for e in session.wire if b'"halfway"' in e.request_body)
        again = next(e for e in session.wire if "last-event-id" in e.request_headers)
        return post.body + _answered(again, _request_id(post))

    assert call(ours) == call(bare)
