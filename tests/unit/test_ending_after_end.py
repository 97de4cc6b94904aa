"""An ending after the app's own end adds nothing: once the client has the stream's end marker, or the
error event the app sent itself, an exception (or a stall, a shutdown) after it is logged, not told.

Each format's official reader treats an event after the end as part of the stream: the Anthropic SDK
raises on an ``error`` event after ``message_stop``, an AG-UI client reports a ``RUN_ERROR`` after
``RUN_FINISHED`` as the run's failure, and a second error after the app's own contradicts it. The end to
end proofs with the real readers are in tests/e2e/test_errors.py and test_agent_agui.py; here, every
format at raw ASGI. Control: the same stream without its last event gets our error event. Mutation:
``Pipeline.answered`` returning False -> every case fails; the writer's ``last_frame`` also set by
heartbeats -> the heartbeat case fails.
"""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import anyio
import pytest

from sse_middleware import StreamingMiddleware, StreamingSettings
from sse_middleware._types import ASGIApp, Message, Receive, Scope, Send

from ..support.harness import Wire, scope

pytestmark = pytest.mark.anyio


def data(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def named(name: str, obj: dict[str, object]) -> bytes:
    return b"event: " + name.encode() + b"\n" + data({"type": name, **obj})


CHUNK = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
MESSAGE = {"id": "m", "type": "message", "role": "assistant", "content": [], "model": "x"}
TEXT_DELTA = {"index": 0, "delta": {"type": "text_delta", "text": "hi"}}
RESPONSE = {"id": "r", "object": "response", "status": "completed", "output": []}
# Each stream ends with the app's own end (its end marker, or its own error event); the text before it
# comes in pieces, so that with coalescing on some of it is merged and flushed before the end.
STREAMS: dict[str, list[bytes]] = {
    "openai [DONE]": [
        data({**CHUNK, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
        *[data({**CHUNK, "choices": [{"index": 0, "delta": {"content": w}}]}) for w in ("a", " b", " c")],
        b"data: [DONE]\n\n",
    ],
    "openai error chunk": [
        data({**CHUNK, "choices": [{"index": 0, "delta": {"content": "a"}}]}),
        data({"error": {"message": "upstream overloaded", "type": "server_error"}}),
    ],
    "anthropic message_stop": [
        named("message_start", {"message": MESSAGE}),
        named("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        named("content_block_delta", TEXT_DELTA),
        named("content_block_stop", {"index": 0}),
        named("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}),
        named("message_stop", {}),
    ],
    "responses completed": [
        named("response.created", {"response": {**RESPONSE, "status": "in_progress"}}),
        named(
            "response.output_text.delta",
            {"item_id": "i", "output_index": 0, "content_index": 0, "delta": "a"},
        ),
        named("response.completed", {"response": RESPONSE}),
    ],
    "ai-sdk finish": [
        data({"type": "start"}),
        data({"type": "text-start", "id": "t"}),
        *[data({"type": "text-delta", "id": "t", "delta": w}) for w in ("a", " b")],
        data({"type": "text-end", "id": "t"}),
        data({"type": "finish"}),
        b"data: [DONE]\n\n",
    ],
    "ag-ui RUN_FINISHED": [
        data({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
        data({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}),
        *[data({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": w}) for w in ("a", " b")],
        data({"type": "TEXT_MESSAGE_END", "messageId": "m"}),
        data({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}),
    ],
    "ag-ui RUN_ERROR": [
        data({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
        data({"type": "RUN_ERROR", "message": "the model failed"}),
    ],
    "generic event: error": [b"data: one\n\n", b"event: error\ndata: the app's own\n\n"],
}
SSE = [(b"content-type", b"text/event-stream")]
ENDS = {"ai-sdk finish": 2}  # how many last events are the end (one unless said): the control drops them


def failing_app(frames: list[bytes], silence: float) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": SSE})
        for frame in frames:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await anyio.sleep(silence)
        raise RuntimeError("a cleanup after the stream failed")

    return app


async def run(frames: list[bytes], *, silence: float = 0.0, **settings: Any) -> Wire:
    mw = StreamingMiddleware(failing_app(frames, silence), StreamingSettings(**settings))
    client = Wire()
    await mw(scope(), client.receive, client.send)
    return client


@pytest.mark.parametrize("coalesce", [True, False], ids=["merged", "as-sent"])
@pytest.mark.parametrize("name", sorted(STREAMS))
async def test_nothing_follows_the_apps_own_end(name: str, coalesce: bool) -> None:
    frames = STREAMS[name]
    client = await run(frames, heartbeat_interval=0, coalesce=coalesce)
    assert client.complete  # ended cleanly, not cut
    assert client.data.endswith(frames[-1])  # the app's own end is the last thing the client has
    assert client.data.count(b"failed on the server") == 0
    control = await run(frames[: -ENDS.get(name, 1)], heartbeat_interval=0, coalesce=coalesce)
    assert control.complete and b"failed on the server" in control.data  # without it: our error event


async def test_a_resumable_stream_is_told_the_same() -> None:
    """Resumable, each frame goes through the log first (``Writer.frame``, not the inlined send): the
    same look at the last event. Control: without its end, our error event, with its id."""
    frames = STREAMS["anthropic message_stop"]
    client = await run(frames, heartbeat_interval=0, resume=True)
    assert client.complete and b"failed on the server" not in client.data
    assert all(event.id for event in client.events())  # resumable: every event has its id
    control = await run(frames[:-1], heartbeat_interval=0, resume=True)
    assert b"failed on the server" in control.data and control.events()[-1].id


async def test_a_heartbeat_after_the_end_does_not_reopen_it() -> None:
    """The app is silent after its end marker, heartbeats go out, then it raises: still nothing added."""
    frames = STREAMS["openai [DONE]"]
    client = await run(frames, heartbeat_interval=0.02, silence=0.15)
    assert client.comments(), "heartbeats went out after the end marker"
    assert client.complete and b"failed on the server" not in client.data
    assert client.events()[-1].data == "[DONE]"


BIG = 8 << 20


async def held_through_silence(heartbeat: float) -> tuple[int, list[int], list[bytes]]:
    """An 8 MiB event, a silence, then ``[DONE]`` and a raise: the bytes our side holds during the
    silence (tracemalloc), each body's size and the end of each."""
    quiet, measured = anyio.Event(), anyio.Event()
    sizes: list[int] = []
    tails: list[bytes] = []  # the end of each body: nothing big kept on the client's side

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": SSE})
        big = b"data: " + b"x" * BIG + b"\n\n"
        await send({"type": "http.response.body", "body": big, "more_body": True})
        del big
        quiet.set()
        await measured.wait()
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": True})
        raise RuntimeError("a cleanup after the stream failed")

    async def receive() -> Message:
        await anyio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def send(message: Message) -> None:
        data = message.get("body", b"")
        sizes.append(len(data))
        tails.append(bytes(data[-64:]))

    settings = StreamingSettings(heartbeat_interval=heartbeat, coalesce=False, telemetry=False)
    mw = StreamingMiddleware(app, settings)
    tracemalloc.start()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(mw, scope(), receive, send)
            await quiet.wait()
            await anyio.sleep(0.1)  # a few heartbeats' worth of silence
            held = tracemalloc.get_traced_memory()[0]
            measured.set()
    finally:
        tracemalloc.stop()
    return held, sizes, tails


async def test_a_large_frame_is_not_held_through_the_silence_after_it() -> None:
    """The writer keeps the last frame for the ending's look, but a heartbeat cuts it to its tail: an
    8 MiB event, then a silence, costs the stream no 8 MiB while it lasts; the end marker after the
    silence is still the app's own end. Control: with heartbeats off the frame is kept until the next
    one. Mutation: no cut in ``Writer.heartbeat`` -> the first case keeps 8 MiB."""
    for heartbeat in (0.02, 0.0):
        held, sizes, tails = await held_through_silence(heartbeat)
        assert (held < BIG // 2) is (heartbeat > 0), (heartbeat, held)
        assert max(sizes) > BIG and b"data: [DONE]\n\n" in tails  # the big event, then the end marker
        assert not any(b"failed on the server" in tail for tail in tails)  # nothing added after it
