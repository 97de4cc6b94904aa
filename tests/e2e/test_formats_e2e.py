"""Every stream format of issue 13 end to end: real uvicorn, default settings, the official clients
(openai and anthropic in Python, the Vercel AI SDK in Node), against the bare app as the control."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from ..support.apps import TOKENS
from ..support.clients import read_stream
from ..support.formats import TOOL_ARGS, events_per_key, read
from ..support.node import run_node
from ..support.servers import Server, served_and_bare, uvicorn

pytestmark = pytest.mark.timeout(180)
APP = "tests.support.apps_formats:app"
N, DELAY = 150, 0.003  # a fast API; the structural events (starts, ends) stay few beside the deltas
QUERY = {"n": N, "delay": DELAY}
EXPECTED = "".join((TOKENS * (N // len(TOKENS) + 1))[:N])
MESSAGES = [{"role": "user", "content": "hi"}]

# The rows of the table: format -> (path, method).
ROWS = {
    "openai-minimal": ("/openai-minimal/v1/chat/completions", "POST"),
    "openai": ("/openai/v1/chat/completions", "POST"),  # reasoning_content and tool calls
    "openai-responses": ("/openai-responses/v1/responses", "POST"),
    "anthropic": ("/anthropic/v1/messages", "POST"),
    "ai-sdk": ("/ai-sdk/api/chat", "POST"),
}


ours, bare = served_and_bare(APP)


def url(server: Server, path: str, **query: Any) -> str:
    return server.url + path + "?" + "&".join(f"{k}={v}" for k, v in {**QUERY, **query}.items())


@pytest.mark.parametrize("fmt", ROWS)
def test_each_format_arrives_in_several_fold_fewer_events(fmt: str, ours: Server, bare: Server) -> None:
    path, method = ROWS[fmt]
    mine, theirs = read_stream(url(ours, path), method=method), read_stream(url(bare, path), method=method)
    assert read(fmt, mine.body) == read(fmt, theirs.body)  # text per key, everything else in its place
    assert len(mine.events) * 4 <= len(theirs.events), (len(mine.events), len(theirs.events))
    per_key, control = events_per_key(fmt, mine.body), events_per_key(fmt, theirs.body)
    assert all(per_key[key] * 3 <= control[key] for key in control), (per_key, control)  # arguments too


def test_a_relay_is_merged_from_the_stream_after_the_one_that_proved_it(bare: Server) -> None:
    """``data: {"text": ...}`` then ``[DONE]``: the first stream of the route goes out byte for byte and
    proves it a relay; the next ones are merged."""
    theirs = read_stream(url(bare, "/relay"))
    with uvicorn(APP) as server:
        first, second = read_stream(url(server, "/relay")), read_stream(url(server, "/relay"))
    assert first.body == theirs.body  # never merged on a guess
    assert read("relay", second.body) == read("relay", theirs.body)
    assert len(second.events) * 4 <= len(theirs.events), (len(second.events), len(theirs.events))


def test_a_named_json_relay_is_merged_from_its_first_event(bare: Server) -> None:
    env = {"SSE_MIDDLEWARE_DIALECT": "json", "SSE_MIDDLEWARE_JSON_TEXT_FIELD": "payload.t"}
    theirs = read_stream(url(bare, "/json"))
    with uvicorn(APP, env) as server:
        mine = read_stream(url(server, "/json"))
    assert read("json", mine.body) == read("json", theirs.body)
    assert len(mine.events) * 4 <= len(theirs.events), (len(mine.events), len(theirs.events))
    first_token = next(e.data for e in mine.events if "payload" in e.data)
    assert first_token.startswith('{"type":"token","payload":{"t":"')  # the app's envelope and key order


@pytest.mark.parametrize("kind", ["lines", "messages", "notes", "ids"])
def test_generic_sse_stays_byte_identical(kind: str, ours: Server, bare: Server) -> None:
    """Plain text lines, JSON messages (relay-looking ones without [DONE] too, asked twice), events with
    ``id:``: exactly the app's bytes."""
    theirs = read_stream(url(bare, f"/generic/{kind}"))
    for _ in range(2):
        assert read_stream(url(ours, f"/generic/{kind}")).body == theirs.body


# -- The official Python SDKs read the merged streams back --------------------------------------------


def chat_read(server: Server, prefix: str) -> tuple[str, str, dict[int, dict[str, Any]], int]:
    """(content, reasoning, tool calls by index, chunks) as the openai SDK hands them to an app."""
    client = openai.OpenAI(base_url=server.url + prefix + "/v1", api_key="test", max_retries=0)
    content, reasoning, calls, chunks = "", "", {}, 0
    stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True, extra_query=QUERY)  # type: ignore[call-overload]
    for chunk in stream:
        chunks += 1
        delta = chunk.choices[0].delta
        content += delta.content or ""
        extra = delta.model_extra or {}
        reasoning += extra.get("reasoning_content") or extra.get("reasoning") or ""
        for call in delta.tool_calls or []:
            slot = calls.setdefault(call.index, {"id": None, "name": None, "arguments": ""})
            slot["id"] = slot["id"] or call.id
            if call.function is not None:
                slot["name"] = slot["name"] or call.function.name
                slot["arguments"] += call.function.arguments or ""
    return content, reasoning, calls, chunks


@pytest.mark.parametrize("prefix", ["/openai", "/openai-minimal"])
def test_openai_sdk_reads_text_reasoning_and_tool_calls_back(prefix: str, ours: Server, bare: Server) -> None:
    mine, theirs = chat_read(ours, prefix), chat_read(bare, prefix)
    assert mine[:3] == theirs[:3]
    assert mine[0] == mine[1] == EXPECTED
    assert all(json.loads(call["arguments"]) == TOOL_ARGS for call in mine[2].values())
    assert len(mine[2]) == (2 if prefix == "/openai" else 0)
    assert mine[3] * 4 <= theirs[3], (mine[3], theirs[3])


def responses_read(server: Server) -> tuple[dict[str, str], int]:
    client = openai.OpenAI(base_url=server.url + "/openai-responses/v1", api_key="test", max_retries=0)
    texts: dict[str, str] = {}
    events = 0
    for event in client.responses.create(model="m", input="hi", stream=True, extra_query=QUERY):
        events += 1
        delta = getattr(event, "delta", None)
        if isinstance(delta, str):
            key = f"{event.type} {getattr(event, 'item_id', '')}"
            texts[key] = texts.get(key, "") + delta
    return texts, events


def test_openai_sdk_reads_responses_reasoning_and_arguments_back(ours: Server, bare: Server) -> None:
    (mine, mine_events), (theirs, theirs_events) = responses_read(ours), responses_read(bare)
    assert mine == theirs
    assert (
        mine["response.reasoning_summary_text.delta rs_1"]
        == mine["response.output_text.delta msg_1"]
        == EXPECTED
    )
    assert json.loads(mine["response.function_call_arguments.delta fc_0"]) == TOOL_ARGS
    assert mine_events * 4 <= theirs_events, (mine_events, theirs_events)


def anthropic_read(server: Server) -> tuple[list[Any], int]:
    client = anthropic.Anthropic(base_url=server.url + "/anthropic", api_key="test", max_retries=0)
    with client.messages.stream(model="m", max_tokens=10, messages=MESSAGES, extra_query=QUERY) as stream:  # type: ignore[arg-type]
        events = sum(1 for _ in stream)
        final = stream.get_final_message()
    return [block.model_dump() for block in final.content], events


def test_anthropic_sdk_final_message_holds_thinking_text_and_tool_input(ours: Server, bare: Server) -> None:
    (mine, mine_events), (theirs, theirs_events) = anthropic_read(ours), anthropic_read(bare)
    assert mine == theirs
    assert [mine[0]["thinking"], mine[1]["text"], mine[2]["input"]] == [EXPECTED, EXPECTED, TOOL_ARGS]
    assert mine_events * 4 <= theirs_events, (mine_events, theirs_events)


# -- The Vercel AI SDK's own reader, in Node ----------------------------------------------------------


def read_ui(address: str) -> dict[str, Any]:
    """The message the ``ai`` package builds from a UI message stream (tests/e2e/node/read_ui_stream.mjs)."""
    return run_node("read_ui_stream.mjs", address)


def deltas(result: dict[str, Any]) -> int:
    return sum(n for kind, n in result["chunks"].items() if kind.endswith("-delta"))


@pytest.mark.parametrize("path", ["/ai-sdk/api/chat", "/ai-sdk-bare/api/chat"], ids=["header", "first-part"])
def test_ai_sdk_reads_the_ui_message_stream_back(path: str, ours: Server, bare: Server) -> None:
    """With the protocol's header, and without it (detected from its first part)."""
    mine, theirs = read_ui(url(ours, path)), read_ui(url(bare, path))
    assert mine["error"] is None and mine["parts"] == theirs["parts"]
    texts = {part["type"]: part.get("text") for part in mine["parts"]}
    assert texts["reasoning"] == texts["text"] == EXPECTED
    assert mine["streamed"] == theirs["streamed"] == {"call_0": TOOL_ARGS}  # parsed from the deltas alone
    assert deltas(mine) * 4 <= deltas(theirs), (mine["chunks"], theirs["chunks"])


# -- Failures arrive in each format's own error shape -------------------------------------------------

ERROR_SHAPES = {
    "openai-minimal": lambda e, b: (
        e.event is None and set(b["error"]) == {"message", "type", "param", "code"}
    ),
    "openai-responses": lambda e, b: e.event == "error" and b["type"] == "error",
    "anthropic": lambda e, b: e.event == "error" and b["error"]["type"] == "api_error",
    "ai-sdk": lambda e, b: e.event is None and set(b) == {"type", "errorText"} and b["type"] == "error",
}


@pytest.mark.parametrize("fmt", ERROR_SHAPES)
def test_a_failure_ends_the_stream_with_its_formats_error_event(fmt: str, ours: Server, bare: Server) -> None:
    path, method = ROWS[fmt]
    mine = read_stream(url(ours, path, fail_at=30), method=method)
    theirs = read_stream(url(bare, path, fail_at=30), method=method)
    assert mine.error is None and ERROR_SHAPES[fmt](mine.events[-1], json.loads(mine.events[-1].data))
    assert "error id" in mine.events[-1].data and "hunter2" not in mine.body.decode()
    assert theirs.error is not None  # the control: a dropped connection, no error event


def test_ai_sdk_reports_a_failure_through_its_error_part(ours: Server, bare: Server) -> None:
    mine = read_ui(url(ours, "/ai-sdk/api/chat", fail_at=30))
    theirs = read_ui(url(bare, "/ai-sdk/api/chat", fail_at=30))
    assert mine["chunks"]["error"] == 1
    assert mine["error"]["message"].startswith("The stream failed on the server. (error id: ")
    assert "hunter2" not in json.dumps(mine)
    assert "error" not in theirs["chunks"] and theirs["error"]["message"] == "terminated"  # a dropped read


def test_openai_sdk_raises_api_error_on_a_minimal_stream(ours: Server, bare: Server) -> None:
    def run(server: Server) -> BaseException:
        client = openai.OpenAI(base_url=server.url + "/openai-minimal/v1", api_key="test", max_retries=0)
        with pytest.raises(Exception) as caught:
            for _ in client.chat.completions.create(  # type: ignore[call-overload]
                model="m", messages=MESSAGES, stream=True, extra_query={**QUERY, "fail_at": 30}
            ):
                pass
        return caught.value

    mine, theirs = run(ours), run(bare)
    assert isinstance(mine, openai.APIError) and not isinstance(mine, openai.APIConnectionError)
    assert "error id" in str(mine)
    assert not isinstance(theirs, openai.APIError) or isinstance(theirs, openai.APIConnectionError)
