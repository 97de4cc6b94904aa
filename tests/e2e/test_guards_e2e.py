"""Guards end to end: real uvicorn, the official SDKs, a guard that blocks ``Here``; the unguarded app
is the control."""

from __future__ import annotations

import json
import time
from typing import Any

import anthropic
import httpx
import openai
import pytest

from ..support.servers import Server, served_and_bare
from .test_formats_e2e import read_ui, url

pytestmark = pytest.mark.timeout(120)
APP = "tests.support.apps_guards:app"
MESSAGES: Any = [{"role": "user", "content": "hi"}]
QUERY = {"n": 40, "delay": 0.003}


ours, bare = served_and_bare(APP)


def _chat(server: Server) -> tuple[str, list[str | None]]:
    client = openai.OpenAI(base_url=server.url + "/openai-minimal/v1", api_key="t", max_retries=0)
    text, reasons = "", []
    for chunk in client.chat.completions.create(model="m", messages=MESSAGES, stream=True, extra_query=QUERY):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            reasons.append(choice.finish_reason)
    return text, reasons


def test_openai_sees_content_filter_and_no_prefix_of_the_word(ours: Server, bare: Server) -> None:
    theirs, _ = _chat(bare)
    mine, reasons = _chat(ours)
    assert "Here" in theirs
    assert "content_filter" in reasons and "content_filter" not in _chat(bare)[1]
    # A check covers all text new since the last one: text checked with the word goes with it.
    assert theirs[: theirs.index("Here")].startswith(mine) and "H" not in mine[len("Hello, world!") :]


def test_anthropic_final_message_is_a_refusal(ours: Server, bare: Server) -> None:
    def final(server: Server) -> Any:
        client = anthropic.Anthropic(base_url=server.url + "/anthropic", api_key="t", max_retries=0)
        with client.messages.stream(model="m", max_tokens=9, messages=MESSAGES, extra_query=QUERY) as s:
            return s.get_final_message()

    assert final(bare).stop_reason != "refusal"
    message = final(ours)
    assert message.stop_reason == "refusal"
    assert "Here" not in "".join(getattr(block, "text", "") for block in message.content)


def test_a_json_relay_gets_one_content_filter_error(ours: Server, bare: Server) -> None:
    def body(server: Server) -> str:
        return httpx.get(server.url + "/relay", params=QUERY, timeout=30).text

    assert "content_filter" not in body(bare)
    mine = body(ours)
    assert mine.count("event: error") == 1 and '"type":"content_filter"' in mine
    assert '"code":"banned_word"' in mine and "[DONE]" not in mine


def test_openai_responses_sees_an_incomplete_response_for_content_filter(ours: Server, bare: Server) -> None:
    def read(server: Server) -> tuple[str, list[Any]]:
        client = openai.OpenAI(base_url=server.url + "/openai-responses/v1", api_key="t", max_retries=0)
        text, ends = "", []
        for event in client.responses.create(model="m", input="hi", stream=True, extra_query=QUERY):
            if event.type == "response.output_text.delta":
                text += event.delta
            elif event.type in ("response.completed", "response.incomplete", "response.failed"):
                ends.append(event)
        return text, ends

    theirs, their_ends = read(bare)
    assert "Here" in theirs and all(e.type != "response.incomplete" for e in their_ends)
    mine, (end,) = read(ours)  # exactly one ending, and it is the filtered one
    assert end.type == "response.incomplete" and end.response.id == "resp_1"
    assert end.response.incomplete_details.reason == "content_filter"
    assert end.response.content_filter["code"] == "banned_word"  # type: ignore[attr-defined]
    assert "Here" not in mine and theirs.startswith(mine)


def test_ai_sdk_finishes_with_its_own_content_filter_reason(ours: Server, bare: Server) -> None:
    path = "/ai-sdk/api/chat"
    theirs = read_ui(url(bare, path, **QUERY))
    mine = read_ui(url(ours, path, **QUERY))
    assert theirs["finish"]["finishReason"] == "stop"
    assert mine["error"] is None and "error" not in mine["chunks"]  # no error: a filtered finish
    assert mine["finish"]["finishReason"] == "content-filter"  # as the ai package's schema parsed it
    assert mine["finish"]["content_filter"]["code"] == "banned_word"  # the schema's objects are loose
    assert "Here" not in json.dumps(mine["parts"]) and "Here" in json.dumps(theirs["parts"])
    assert all(part.get("state") != "streaming" for part in mine["parts"])  # the open parts were ended


def test_the_app_stops_producing_soon_after_a_trip(ours: Server, bare: Server) -> None:
    """100 tokens 10 ms apart, the word at token 10: once the app would have finished (1 s), count what
    it produced. Unguarded (the control), all 100; guarded, the trip cancelled it within a few tokens."""
    query = {"n": 100, "trip": 10, "delay": 0.01}

    def run(server: Server, name: str) -> tuple[str, int]:
        client = openai.OpenAI(base_url=server.url + "/counted/v1", api_key="t", max_retries=0)
        text = ""
        stream = client.chat.completions.create(
            model="m", messages=MESSAGES, stream=True, extra_query={**query, "run": name}
        )
        for chunk in stream:
            text += "".join(choice.delta.content or "" for choice in chunk.choices)
        time.sleep(1.5)  # past the app's own end, had it gone on
        return text, httpx.get(f"{server.url}/produced/{name}", timeout=10).json()["produced"]

    theirs, all_of_it = run(bare, "bare")
    assert "Here" in theirs and all_of_it == 100
    mine, produced = run(ours, "ours")
    assert "Here" not in mine and mine.startswith("w0 ")
    assert produced <= 10 + 5, produced  # the app was cancelled right after the trip
