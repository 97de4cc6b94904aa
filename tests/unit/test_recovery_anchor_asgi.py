"""Continuation without prefill in the shell, raw ASGI (asyncio and trio): the re-run's body the app
reads, and a prefill re-run the app answers with 400 followed by an anchored one the client never
tells apart from the first run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ..support.harness import Wire
from ..support.upstream import ANSWER, chat_events, tokens
from ..support.upstream_anchor import reply
from .test_recovery_asgi import Flaky, cut_chat, serve
from .test_recovery_splice import chat_read

pytestmark = pytest.mark.anyio
PARTS = tokens(ANSWER)
HAD = "".join(PARTS[:6])
REQUEST = json.dumps({"model": "m", "messages": [{"role": "user", "content": "Why stream?"}]}).encode()
REFUSAL = b'{"error": {"type": "invalid_request_error", "message": "no prefill"}}'


def anchored_rerun() -> list[bytes | None]:
    from sse_middleware._core.recovery.anchor import anchor_of

    return chat_events(tokens(reply("exact", ANSWER, HAD, anchor_of(HAD))), "chatcmpl-C")


def roles(seen: Any) -> list[str]:
    return [m["role"] for m in json.loads(seen[1])["messages"]]


async def test_a_prefill_answered_400_is_followed_by_the_anchor() -> None:
    app = Flaky(
        [cut_chat(6), [REFUSAL], anchored_rerun()],
        [(200, b"text/event-stream"), (400, b"application/json"), (200, b"text/event-stream")],
    )
    wire = await serve(app, Wire(request_body=REQUEST), recover_body="prefill")
    got = chat_read(wire.data)
    assert got["text"] == ANSWER and got["ids"] == {"chatcmpl-A"} and not got["errors"]
    assert [roles(seen) for seen in app.seen] == [
        ["user"],
        ["user", "assistant"],
        ["user", "assistant", "user"],
    ]
    assert [seen[0] and seen[0].attempt for seen in app.seen] == [None, 1, 2]


async def test_control_a_refused_rerun_of_the_same_body_gives_up() -> None:
    app = Flaky(
        [cut_chat(6), [REFUSAL], anchored_rerun()],
        [(200, b"text/event-stream"), (400, b"application/json"), (200, b"text/event-stream")],
    )
    wire = await serve(app, Wire(request_body=REQUEST))
    got = chat_read(wire.data)
    assert got["text"] == HAD and len(app.seen) == 2
    assert b"no prefill" not in wire.data  # the 400 is never what the client reads


async def test_anchor_mode_asks_with_one_user_turn_and_splices_the_repeat_away() -> None:
    app = Flaky([cut_chat(6), anchored_rerun()])
    wire = await serve(app, Wire(request_body=REQUEST), recover_body="anchor")
    assert chat_read(wire.data)["text"] == ANSWER
    asked = json.loads(app.seen[1][1])["messages"]
    assert asked[1] == {"role": "assistant", "content": HAD} and asked[2]["role"] == "user"
    assert app.seen[1][0].text == HAD  # recovery() as ever
