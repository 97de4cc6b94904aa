"""Heartbeats at the raw ASGI level, on asyncio and trio: comments in a silence, none on a busy stream,
never inside an event (held, or already on the wire), none on non-SSE streams, no task while none is due,
and through httpx's ASGI transport. Each against its control: heartbeats off, or a silent stream."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from sse_middleware import StreamingMiddleware, StreamingSettings
from sse_middleware._core.sse import Comment, Event

from ..support.harness import Message, Script, Wire, body, mw, run_all, run_for, start

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_signals"), pytest.mark.timeout(60)]


SILENT = (b"data: a\n\n", 0.45, b"data: b\n\n")


async def test_silence_gets_heartbeats_and_zero_disables_them() -> None:
    ours, off = Wire(), Wire()
    assert await run_all(
        (5, mw(Script(SILENT), heartbeat_interval=0.1, heartbeat_comment="hb"), ours),
        (5, mw(Script(SILENT), heartbeat_interval=0), off),
    ) == [False, False]
    assert ours.events() == off.events() == [Event("a"), Event("b")]
    assert 2 <= len(ours.comments()) <= 5 and set(ours.comments()) == {Comment("hb")}
    assert b"data: a\n\n: hb\n\n" in ours.data and ours.data.endswith(b": hb\n\ndata: b\n\n")
    assert off.comments() == []  # the control


async def test_busy_stream_gets_no_heartbeat() -> None:
    busy, idle = Wire(), Wire()
    steps = tuple(x for i in range(20) for x in (b"data: %d\n\n" % i, 0.02))
    await run_all(
        (5, mw(Script(steps), heartbeat_interval=0.25), busy),
        (5, mw(Script(SILENT), heartbeat_interval=0.25), idle),
    )
    assert len(busy.events()) == 20 and busy.comments() == []  # idle-based, not periodic
    assert idle.comments()  # control: the same interval on a silent stream does send comments


HALF = (b"data: before\n\n", b"data: hel", 0.4, b"lo\n\n", 0.3, b"data: after\n\n")


async def test_heartbeat_never_lands_inside_a_held_partial_event() -> None:
    """The half event is held until its blank line, so comments go out before it, never inside."""
    ours, off = Wire(), Wire()
    await run_all(
        (5, mw(Script(HALF), heartbeat_interval=0.1), ours), (5, mw(Script(HALF), heartbeat_interval=0), off)
    )
    assert ours.events() == off.events() == [Event("before"), Event("hello"), Event("after")]
    assert b"data: hello\n\n" in ours.data and len(ours.comments()) >= 3
    assert off.comments() == []  # control: the comments are the heartbeats


async def test_heartbeat_waits_for_the_end_of_an_event_already_on_the_wire() -> None:
    """Past max_event_bytes a partial event streams through; no comment is written until it ends."""
    client = Wire()
    assert not await run_for(5, mw(Script(HALF), heartbeat_interval=0.1, max_event_bytes=4), client)
    assert b"data: hel" in client.messages[2]["body"]  # the half event went out as it came
    assert b"data: hello\n\n" in client.data and client.events()[1] == Event("hello")
    during, after = client.data.split(b"data: hello\n\n")
    assert b": ping" not in during  # control: the silence after the event does get comments
    assert after.count(b": ping\n\n") >= 1


async def test_no_task_while_nothing_is_due(anyio_backend: str) -> None:
    """asyncio: deadlines wait on a loop timer handle that peeks at the stream; no task until work is
    due, whether a heartbeat is 15 s or 0.3 s away. trio has no timer callbacks: one sleeping task per
    stream with a deadline. Control: a stream whose app does not listen gets the listener's task."""

    async def count_tasks(heartbeat: float, style: str = "2.4") -> int:
        seen: list[int] = []

        async def app(scope: Message, receive: Any, send: Any) -> None:
            await send(start())
            await send(body(b"data: x\n\n"))
            await anyio.sleep(0.05)
            seen.append(len(anyio.get_running_tasks()))
            await send(body(b"", more=False))

        # ASGI 2.4: the server reports a disconnect on send, so no listener either
        # send_timeout off: its deadline would be one more to wait for (trio: a sleeping task)
        settings = {"heartbeat_interval": heartbeat, "coalesce": False, "send_timeout": 0}
        await run_for(5, mw(app, **settings), Wire(style=style))
        return seen[0]

    none = await count_tasks(0)
    trio = anyio_backend == "trio"
    assert await count_tasks(0.3) == await count_tasks(15) == none + trio
    assert await count_tasks(0, style="2.3") == none + 1  # control: a task that listens


async def test_a_parked_heartbeat_still_arrives() -> None:
    """The heartbeat 1.5 s away waits on a timer handle alone; it spawns the watcher when due."""
    client, control = Wire(), Wire()
    await run_all(
        (5, mw(Script((b"data: a\n\n", 1.8, b"data: b\n\n")), heartbeat_interval=1.5), client),
        (5, mw(Script((b"data: a\n\n", 1.8, b"data: b\n\n")), heartbeat_interval=0), control),
    )
    assert client.data.count(b": ping\n\n") == 1 and b": ping" not in control.data


async def test_no_heartbeats_on_non_sse_streams() -> None:
    steps = (b"line 1\n", 0.5, b"line 2\n")
    plain, ndjson, sse = Wire(), Wire(), Wire()
    await run_all(
        (5, mw(Script(steps, b"text/plain"), heartbeat_interval=0.1), plain),
        (5, mw(Script(steps, b"application/x-ndjson"), heartbeat_interval=0.1), ndjson),
        (5, mw(Script(steps), heartbeat_interval=0.1), sse),
    )
    for client in (plain, ndjson):
        assert client.messages[0]["headers"][-1] == (b"x-accel-buffering", b"no")  # a stream we handle
        assert client.data == b"line 1\nline 2\n"
    assert b": ping" in sse.data  # control: the same silence as SSE gets comments


# -- a real client through httpx's ASGI transport --------------------------------------------------------


async def test_httpx_asgi_transport_sees_heartbeats() -> None:
    from ..support.apps import api

    async def fetch(heartbeat: float) -> bytes:
        app = StreamingMiddleware(api, StreamingSettings(heartbeat_interval=heartbeat))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as client:
            response = await client.get("/silence?gap=0.2")
        return response.content

    body = await fetch(0.08)
    assert b": ping\n\n" in body and b"data: hello\n\n" in body
    assert b": ping" not in await fetch(0)  # control


# -- Streams with event ids: one comment line, no blank line -------------------------------------------
# openai-python's decoder (a real client, the oracle here) keeps the last event id and then dispatches an
# event for every blank line; its SDK fails to parse that empty event as JSON.


def _decoded(data: bytes) -> list[str]:
    from openai._streaming import SSEDecoder

    return [sse.data for sse in SSEDecoder().iter_bytes(iter([data]))]


IDS = (b"id: 1\ndata: a\n\n", 0.35, b"id: 2\ndata: b\n\n")
IDS_CR = (b"id: 1\rdata: a\r\r", 0.35, b"data: b\r\r")
NO_IDS = (b"data: valid: yes\nid\n\n", 0.35, b"data: b\n\n")  # "id:" inside a value; a bare "id" sets none


@pytest.mark.parametrize("steps", [IDS, IDS_CR], ids=["lf", "cr"])
async def test_after_an_id_a_heartbeat_is_one_comment_line(steps: tuple[Any, ...]) -> None:
    ours = Wire()
    await run_all((5, mw(Script(steps), heartbeat_interval=0.1), ours))
    assert _decoded(ours.data) == ["a", "b"]  # no empty event between them
    beats = [m["body"] for m in ours.messages[1:] if m["body"].startswith(b":")]
    assert beats and set(beats) == {b": ping\n"}
    # Control: the same heartbeats with their blank line make the decoder dispatch empty events.
    assert "" in _decoded(ours.data.replace(b": ping\n", b": ping\n\n"))


async def test_our_own_resume_ids_count_and_before_any_id_the_blank_line_stays() -> None:
    steps = (0.35, b"data: a\n\n", 0.35, b"data: b\n\n")
    ours = Wire()
    await run_all((5, mw(Script(steps), heartbeat_interval=0.1, resume=True), ours))
    beats = [m["body"] for m in ours.messages[1:] if m["body"].startswith(b":")]
    first = ours.data.index(b"data: a")
    assert b": ping\n\n" in ours.data[:first] and b": ping\n\n" not in ours.data[first:]  # ids from "a" on
    assert b": ping\n" in beats and _decoded(ours.data) == ["a", "b"]


async def test_without_ids_a_heartbeat_keeps_its_blank_line() -> None:
    ours = Wire()
    await run_all((5, mw(Script(NO_IDS), heartbeat_interval=0.1), ours))
    beats = [m["body"] for m in ours.messages[1:] if m["body"].startswith(b":")]
    assert beats and set(beats) == {b": ping\n\n"}  # a reader splitting on blank lines sees its own block
