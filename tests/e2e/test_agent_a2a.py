"""A2A (JSON-RPC over SSE) through the middleware, with the ``a2a-sdk``'s own server and client.

The agent is tests/support/apps_a2a.py, served by uvicorn with the middleware and without it (the
control). The SDK's client (``ClientFactory`` from the agent's card) talks to each through a recording
proxy (tests/support/wiretap.py): the same stream of task events reaches it, and every response body is
byte for byte the bare app's. Normalized, and only that: UUIDs (the SDK makes up the JSON-RPC request
id and the task, context and message ids per run) and the ``Date`` header; in the headers the middleware
adds ``no-transform`` to the app's ``Cache-Control`` and drops its ``Connection``, on purpose.
"""

from __future__ import annotations

import re
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from ..support.apps_a2a import CHUNKS
from ..support.servers import Server, served_and_bare
from ..support.wiretap import Exchange, tap

ours, bare = served_and_bare("tests.support.apps_a2a:app")
UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def ask(server: Server, text: str) -> tuple[list[dict[str, Any]], str | None, list[Exchange]]:
    """Stream one message to the agent with the SDK's client: (its events, the error it raised, the wire)."""
    events: list[dict[str, Any]] = []
    error: list[str] = []

    async def main(url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
            card.supported_interfaces[0].url = f"{url}/"  # through the tap, as the card's URL
            client = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
            message = Message(role=Role.ROLE_USER, message_id="m-1", parts=[Part(text=text)])
            try:
                async for event in client.send_message(SendMessageRequest(message=message)):
                    events.append(MessageToDict(event))
            except Exception as exc:  # the SDK's own error for the stream's error event
                error.append(f"{type(exc).__name__}: {exc}")

    with tap(server.port) as wire:
        anyio.run(main, wire.url)
        exchanges = wire.exchanges()
    return events, (error[0] if error else None), exchanges


def _ids_out(value: Any) -> Any:
    """An event with its per-run ids replaced (as the wire's are normalized)."""
    if isinstance(value, dict):
        return {k: _ids_out(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ids_out(v) for v in value]
    if isinstance(value, str):
        return UUID.sub(b"<uuid>", value.encode()).decode()
    return value


def _stream(exchanges: list[Exchange]) -> Exchange:
    (stream,) = [e for e in exchanges if e.method == "POST"]
    return stream


def _headers(exchange: Exchange) -> dict[str, str]:
    return {k: v for k, v in exchange.headers if k not in ("date", "connection", "cache-control")}


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(
        part["text"]
        for e in events
        if "artifactUpdate" in e
        for part in e["artifactUpdate"]["artifact"]["parts"]
    )


@pytest.mark.parametrize("text", ["hello", "fail"])
def test_a2a_stream_through_the_middleware_is_the_bare_agents_byte_for_byte(
    ours: Server, bare: Server, text: str
) -> None:
    got, got_error, got_wire = ask(ours, text)
    want, want_error, want_wire = ask(bare, text)
    # The control: the SDK's client reads the agent's task events (or its error) from the app itself.
    if text == "hello":
        assert want_error is None
        assert text_of(want) == "".join(CHUNKS)
        assert want[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    else:
        assert want_error is not None and "the agent failed halfway" in want_error
        assert 0 < len(text_of(want)) < len("".join(CHUNKS))
    # Through the middleware: the same events, the same error, the same bytes.
    assert _ids_out(got) == _ids_out(want)
    assert got_error == want_error
    stream, control = _stream(got_wire), _stream(want_wire)
    assert stream.header("content-type", "").startswith("text/event-stream")
    assert UUID.sub(b"<uuid>", stream.body) == UUID.sub(b"<uuid>", control.body)
    assert stream.body.count(b"\r\n\r\n") == control.body.count(b"\r\n\r\n") > len(CHUNKS) // 2
    assert _headers(stream) == _headers(control)
    assert stream.header("cache-control") == f"{control.header('cache-control')}, no-transform"
