"""Heartbeats in a silence, read by the official openai SDK, on streams that carry event ids (the
middleware's resume ids, or the app's own). openai-python's SSE decoder keeps the last event id, as the
spec asks, but then also dispatches an event for every blank line, and the SDK fails to parse that
empty event as JSON: so once a stream has ids, a heartbeat is one comment line with no blank line.

Controls: the bare app writing ``: ping`` and a blank line after its own ids (the SDK raises: the
hazard is real), and the same silences with no ids (the blank line kept, byte for byte)."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from ..support.apps import TOKENS
from ..support.clients import read_stream
from ..support.servers import Server, served_and_bare

pytestmark = pytest.mark.timeout(120)
APP = "tests.support.apps_heartbeat:app"
ANSWER = "".join(TOKENS)
ours, bare = served_and_bare(APP)


def answer(server: Server, **query: Any) -> str:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    stream = client.chat.completions.create(  # type: ignore[call-overload]
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True, extra_query=query
    )
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


@pytest.mark.parametrize("ids", ["ours", "app"])
def test_the_openai_sdk_reads_a_stream_with_ids_through_its_heartbeats(ids: str, ours: Server) -> None:
    assert answer(ours, ids=ids) == ANSWER
    body = read_stream(ours.url + f"/v1/chat/completions?ids={ids}", method="POST").body
    assert b"\n\n: ping\n" in body and b": ping\n\n" not in body  # the heartbeats went out, one line each


def test_control_a_blank_line_after_ids_breaks_the_openai_sdk(bare: Server) -> None:
    assert answer(bare, ids="none", beat="1") == ANSWER  # without ids the SDK skips such a comment
    with pytest.raises(ValueError):  # json.JSONDecodeError: the empty event the blank line dispatched
        answer(bare, ids="app", beat="1")


def test_without_ids_a_heartbeat_keeps_its_blank_line(ours: Server) -> None:
    body = read_stream(ours.url + "/v1/chat/completions?ids=none", method="POST").body
    assert b"\n\n: ping\n\n" in body  # a reader that splits on blank lines sees it as its own block
    assert answer(ours, ids="none") == ANSWER
