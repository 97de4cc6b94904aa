"""Security: nothing from an exception, the request headers or the request data reaches a stream, in any
dialect; no header or query parameter lets a client switch a protection off; an app's StreamError text
cannot forge events. Raw ASGI. The controls: ``error_detail=True`` (set by the server) does let the text
through, so the checks can see a leak; a naive encoder forges events, so the injection check can see that.
"""

from __future__ import annotations

import json
import sys
from functools import partial
from typing import Any

import anyio
import pytest

from sse_middleware import StreamError, override
from sse_middleware._core.sse import parse

from ..support.harness import Wire, body, scope, serve, start

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import ExceptionGroup

pytestmark = pytest.mark.timeout(60)
SECRET, TOKEN, QUERY_SECRET, BODY_SECRET = "db-pass-7781", "sk-live-4242", "q-secret-99", "b-secret-55"
HEADERS = [
    (b"authorization", f"Bearer {TOKEN}".encode()),
    (b"cookie", b"session=c-secret-11"),
    (b"content-length", str(len(BODY_SECRET)).encode()),
]
LEAKS = [SECRET, TOKEN, QUERY_SECRET, BODY_SECRET, "c-secret-11"]


def chunk(dialect: str, text: str) -> bytes:
    if dialect == "openai":
        obj = {
            "id": "c",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": text}}],
        }
        return b"data: " + json.dumps(obj).encode() + b"\n\n"
    if dialect == "openai-responses":
        obj = {
            "type": "response.output_text.delta",
            "item_id": "i",
            "output_index": 0,
            "content_index": 0,
            "delta": text,
        }
        return b"event: response.output_text.delta\ndata: " + json.dumps(obj).encode() + b"\n\n"
    if dialect == "anthropic":
        obj = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}
        return b"event: content_block_delta\ndata: " + json.dumps(obj).encode() + b"\n\n"
    if dialect in ("sse", "text"):
        return f"data: {text}\n\n".encode()
    if dialect == "ndjson":
        return json.dumps({"text": text}).encode() + b"\n"
    return text.encode()  # plain


CTYPES = {"plain": b"text/plain", "ndjson": b"application/x-ndjson"}
DIALECTS = ["openai", "openai-responses", "anthropic", "sse", "text", "plain", "ndjson"]
IN_BAND = {"openai", "openai-responses", "anthropic", "sse", "text"}


def failing_app(dialect: str, how: str, server_side: Any = None) -> Any:
    async def app(scope_: Any, receive: Any, send: Any) -> None:
        request = await receive()
        if server_side is not None:
            server_side(scope_)
        await send(start([(b"content-type", CTYPES.get(dialect, b"text/event-stream"))]))
        await send(body(chunk(dialect, "hello ")))
        await send(body(chunk(dialect, "world")))
        auth = dict(scope_["headers"])[b"authorization"].decode()
        text = f"{SECRET} {auth} {scope_['query_string'].decode()} {request['body'].decode()} c-secret-11"
        if how == "chained":
            raise RuntimeError("wrapper") from ValueError(text)
        if how == "group":
            raise ExceptionGroup("several", [KeyError(text)])
        raise RuntimeError(text)

    return app


def run(app: Any, **settings: Any) -> Wire:
    """One request carrying secrets in its headers, query and body (a synchronous test's own loop)."""
    request = scope(headers=HEADERS, query=f"token={QUERY_SECRET}".encode())
    wire = Wire(request_body=BODY_SECRET.encode())
    return anyio.run(partial(serve, app, request=request, wire=wire, **settings))


def everything(wire: Wire) -> str:
    """All bytes the client could see: status line data, headers and body."""
    heads = b"".join(k + v for m in wire.starts for k, v in m["headers"])
    return (heads + wire.data).decode("utf-8", "replace")


@pytest.mark.parametrize("how", ["plain", "chained", "group"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_nothing_from_the_exception_or_the_request_reaches_the_stream(dialect: str, how: str) -> None:
    settings = {"dialect": "text"} if dialect == "text" else {}
    wire = run(failing_app(dialect, how), **settings)
    seen = everything(wire)
    assert not [leak for leak in LEAKS if leak in seen], seen
    if dialect in IN_BAND:
        assert wire.complete and "error" in wire.events()[-1].data  # told, in the stream's own dialect
    else:
        assert not wire.complete  # no channel: cut, never a clean end
    if dialect in IN_BAND and how == "plain":  # the control: the server's own switch lets the text out
        assert SECRET in everything(run(failing_app(dialect, how), error_detail=True, **settings))


HOSTILE = [
    (b"x-sse-middleware", b"off"),
    (b"sse-middleware-enabled", b"false"),
    (b"sse-middleware-error-detail", b"true"),
    (b"sse_middleware_error_detail", b"1"),
    (b"x-accel-buffering", b"yes"),
    (b"cache-control", b"no-cache"),
    (b"te", b"trailers"),
    (b"accept-encoding", b"gzip"),
]
HOSTILE_QUERY = b"sse_middleware=off&enabled=false&error_detail=true&heartbeat_interval=0"


def silent_then_failing(server_side: Any = None) -> Any:
    async def app(scope_: Any, receive: Any, send: Any) -> None:
        if server_side is not None:
            server_side(scope_)
        await send(start())
        await send(body(b"data: a\n\n"))
        await anyio.sleep(0.08)  # silence: heartbeats are due
        raise RuntimeError(SECRET)

    return app


def hostile_run(app: Any) -> Wire:
    request = scope(headers=HEADERS[:2] + HOSTILE, query=HOSTILE_QUERY)
    return anyio.run(partial(serve, app, request=request, heartbeat_interval=0.02))


def test_no_client_header_or_query_turns_a_protection_off() -> None:
    wire = hostile_run(silent_then_failing())
    headers = wire.headers()
    assert headers[b"x-accel-buffering"] == b"no" and b"no-transform" in headers[b"cache-control"]
    assert b": ping" in wire.data  # heartbeats still on
    assert SECRET not in everything(wire) and wire.events()[-1].event == "error"
    # The controls: only the server side can change these, and then the same checks see it.
    detailed = hostile_run(silent_then_failing(lambda s: override(s, error_detail=True)))
    assert SECRET in everything(detailed)
    quiet = hostile_run(silent_then_failing(lambda s: override(s, heartbeat_interval=0)))
    assert b": ping" not in quiet.data


def strings(obj: Any) -> list[str]:
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in strings(v)]
    return [obj] if isinstance(obj, str) else []


INJECT = "quota\n\ndata: [DONE]\n\nevent: message_stop\ndata: {}\r\n\r\nid: 9\nretry: 1\n\n"


@pytest.mark.parametrize("dialect", sorted(IN_BAND))
def test_stream_error_text_cannot_forge_events(dialect: str) -> None:
    async def app(scope_: Any, receive: Any, send: Any) -> None:
        await send(start())
        await send(body(chunk(dialect, "hello")))
        raise StreamError(INJECT, type="rate\nlimit", code="c\r\nid: 1")

    settings = {"dialect": "text"} if dialect == "text" else {}
    wire = run(app, **settings)
    events = wire.events()
    assert len(events) == 2, events  # the content event and exactly one error event
    assert "[DONE]" not in [e.data for e in events] and events[-1].id is None and events[-1].retry is None
    assert any(INJECT in v for v in strings(json.loads(events[-1].data)))  # whole, as data
    naive = f"event: error\ndata: {INJECT}\n\n".encode()  # the control: what an unescaped encoder sends
    assert len(parse(naive)) > 1
