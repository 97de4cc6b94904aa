"""A guard's trip ends each format the way its own clients read "stopped by a content filter", at the
raw ASGI level on asyncio and trio: Anthropic closes every content block still open before its
``message_delta``; OpenAI chat gives every choice of an ``n > 1`` completion the ``content_filter``
finish. The unguarded app is each one's control."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from ..support.harness import SSE, Wire, body, serve, start
from .test_guards import _blocker

pytestmark = pytest.mark.anyio


def _event(name: str | None, obj: dict[str, Any]) -> bytes:
    head = f"event: {name}\n".encode() if name else b""
    return head + b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


class Events:
    """Writes ``events`` one body each, a little apart, then ends."""

    def __init__(self, events: list[bytes]) -> None:
        self.events = events

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send(start(SSE))
        for event in self.events:
            await send(body(event))
            await anyio.sleep(0.002)
        await send(body(b"", more=False))


# -- Anthropic: the open blocks closed --------------------------------------------------------------------


def _anthropic(words: list[str]) -> list[bytes]:
    """A thinking block (0) that ends, then a text block (1) of ``words`` that the trip finds open."""
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": []}
    thinking = {"type": "thinking_delta", "thinking": "Let me see. "}
    out = [
        _event("message_start", {"type": "message_start", "message": message}),
        _event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": ""},
            },
        ),
        _event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": thinking}),
        _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _event(
            "content_block_start",
            {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        ),
    ]
    out += [
        _event(
            "content_block_delta",
            {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": w}},
        )
        for w in words
    ]
    out.append(_event("content_block_stop", {"type": "content_block_stop", "index": 1}))
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}}
    return [*out, _event("message_delta", delta), _event("message_stop", {"type": "message_stop"})]


def _blocks(wire: Wire) -> tuple[list[str], set[int]]:
    """The event names in order, and the content blocks started and never stopped before message_delta."""
    names = [event.event or "" for event in wire.events()]
    open_: set[int] = set()
    for event in wire.events()[: names.index("message_delta")]:
        if event.event == "content_block_start":
            open_.add(json.loads(event.data)["index"])
        elif event.event == "content_block_stop":
            open_.discard(json.loads(event.data)["index"])
    return names, open_


async def test_anthropic_closes_the_open_block_before_its_refusal(anyio_backend: str) -> None:
    words = ["Hello ", "the ", "secret ", "is ", "out."]
    control = await serve(Events(_anthropic(words)), heartbeat_interval=0)
    assert _blocks(control)[1] == set() and b"secret" in control.data
    wire = await serve(Events(_anthropic(words)), guards=[_blocker("secret")], heartbeat_interval=0)
    names, open_ = _blocks(wire)
    assert b"secret" not in wire.data
    # Block 1 was open at the trip: the ending stops it (and only it: block 0 stopped itself).
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert json.loads(wire.events()[-3].data) == {"type": "content_block_stop", "index": 1}
    assert open_ == set() and names.count("content_block_stop") == 2
    delta = json.loads(wire.events()[-2].data)
    assert delta["delta"]["stop_reason"] == "refusal" and delta["content_filter"]["code"] == "word"


# -- OpenAI chat, n > 1: every choice filtered ------------------------------------------------------------


def _choices(words: list[str], n: int) -> list[bytes]:
    """One completion with ``n`` choices, their deltas interleaved under one chunk id (as OpenAI sends)."""

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": index, "delta": delta, "finish_reason": finish}
        return _event(
            None,
            {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]},
        )

    out = [chunk(i, {"role": "assistant", "content": ""}) for i in range(n)]
    out += [chunk(i, {"content": w}) for w in words for i in range(n)]
    out += [chunk(i, {}, "stop") for i in range(n)]
    return [*out, b"data: [DONE]\n\n"]


def _finishes(wire: Wire) -> dict[int, str]:
    found = {}
    for event in wire.events():
        if event.data != "[DONE]":
            for choice in json.loads(event.data)["choices"]:
                if choice.get("finish_reason"):
                    found[choice["index"]] = choice["finish_reason"]
    return found


async def test_openai_gives_every_choice_the_content_filter_finish(anyio_backend: str) -> None:
    words = ["Hello ", "the ", "secret ", "is ", "out."]
    control = await serve(Events(_choices(words, 3)), heartbeat_interval=0)
    assert _finishes(control) == {0: "stop", 1: "stop", 2: "stop"}
    wire = await serve(Events(_choices(words, 3)), guards=[_blocker("secret")], heartbeat_interval=0)
    assert b"secret" not in wire.data and wire.events()[-1].data == "[DONE]"
    assert _finishes(wire) == {0: "content_filter", 1: "content_filter", 2: "content_filter"}
    one = await serve(Events(_choices(words, 1)), guards=[_blocker("secret")], heartbeat_interval=0)
    assert _finishes(one) == {0: "content_filter"}  # n = 1: the one choice, no other
