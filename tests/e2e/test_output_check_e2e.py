"""The output check end to end: real uvicorn, the official openai and anthropic SDKs as clients, with
``validate_json`` off as the control. Bad tool-call arguments end early with the server's error (not a
dropped connection), naming the tool and the path, and the app stops within a few events; a valid
document with escapes, unicode and arrays passes whole; a request without a schema is not checked."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import anthropic
import httpx
import openai
import pytest

from ..support.servers import Server, uvicorn

pytestmark = pytest.mark.timeout(120)
APP = "tests.support.apps_output:app"
WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1},
        "hours": {"type": "array", "items": {"type": "integer"}},
        "note": {"type": "string"},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}
FILLER = ', "note": "' + "and then some more words the model goes on writing " * 8 + '"}'
BAD = '{"city": "Paris", "days": "three"' + FILLER  # "days" is a string: wrong from its first quote
GOOD = json.dumps({"city": 'Zürich "HB" 🚉', "days": 3, "hours": [1, 2, 3], "note": "tab\tand \\ slash"})
MESSAGES = [{"role": "user", "content": "weather?"}]


@pytest.fixture(scope="module")
def checked() -> Any:
    with uvicorn(APP, {"SSE_MIDDLEWARE_VALIDATE_JSON": "1"}) as server:
        yield server


@pytest.fixture(scope="module")
def unchecked() -> Any:
    with uvicorn(APP) as server:
        yield server


def openai_arguments(server: Server, doc: str, run: str, **create: Any) -> str:
    client = openai.OpenAI(base_url=server.url + "/openai/v1", api_key="test", max_retries=0)
    query = {"doc": doc, "run": run}
    stream = client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        stream=True,
        extra_query=query,
        **create,  # type: ignore[arg-type]
    )
    out = []
    for chunk in stream:
        for call in chunk.choices[0].delta.tool_calls or () if chunk.choices else ():
            out.append(call.function.arguments or "" if call.function else "")
    return "".join(out)


def produced(server: Server, run: str) -> int:
    time.sleep(0.3)  # long enough for an app that goes on to send many more events
    return int(httpx.get(f"{server.url}/produced/{run}").json())


def test_openai_sdk_raises_the_servers_error_at_bad_arguments(checked: Server, unchecked: Server) -> None:
    run = uuid.uuid4().hex
    with pytest.raises(openai.APIError) as info:
        openai_arguments(checked, BAD, run, tools=[TOOL])
    assert "get_weather" in info.value.message and "$.days" in info.value.message
    assert (info.value.body or {}).get("code") == "json_schema"  # type: ignore[union-attr]
    total = len(BAD) // 3 + 4
    assert produced(checked, run) <= 16 < total  # the fault is at event ~10 of ~170: the app was stopped
    control = uuid.uuid4().hex
    assert openai_arguments(unchecked, BAD, control, tools=[TOOL]) == BAD  # the control: all of it
    assert produced(unchecked, control) == total


def test_openai_sdk_gets_a_valid_nested_document_whole(checked: Server) -> None:
    got = openai_arguments(checked, GOOD, uuid.uuid4().hex, tools=[TOOL])
    assert got == GOOD and json.loads(got)["city"] == 'Zürich "HB" 🚉'


def test_no_schema_in_the_request_means_no_check(checked: Server) -> None:
    client = openai.OpenAI(base_url=checked.url + "/openai/v1", api_key="test", max_retries=0)
    stream = client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        stream=True,  # type: ignore[call-overload]
        extra_query={"doc": "{not json at all", "run": "-"},
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "{not json at all"


def test_response_format_schema_catches_the_extra_key(checked: Server, unchecked: Server) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "weather", "schema": WEATHER}}
    doc = '{"city": "Rome", "days": 2, "wind": "strong"}'

    def content(server: Server) -> str:
        client = openai.OpenAI(base_url=server.url + "/openai/v1", api_key="test", max_retries=0)
        stream = client.chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,  # type: ignore[call-overload]
            response_format=fmt,
            extra_query={"doc": doc, "run": "-"},
        )
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    with pytest.raises(openai.APIError) as info:
        content(checked)
    assert "is not allowed" in info.value.message
    assert content(unchecked) == doc


def test_json_object_mode_catches_broken_syntax(checked: Server) -> None:
    client = openai.OpenAI(base_url=checked.url + "/openai/v1", api_key="test", max_retries=0)
    with pytest.raises(openai.APIError) as info:
        for _ in client.chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,  # type: ignore[call-overload]
            response_format={"type": "json_object"},
            extra_query={"doc": '{"a": 1 "b": 2}', "run": "-"},
        ):
            pass
    assert (info.value.body or {}).get("code") == "json_syntax"  # type: ignore[union-attr]


def test_anthropic_sdk_raises_the_servers_error_at_bad_tool_input(checked: Server, unchecked: Server) -> None:
    tool = {"name": "get_weather", "description": "weather", "input_schema": WEATHER}

    def read(server: Server, run: str) -> Any:
        client = anthropic.Anthropic(base_url=server.url + "/anthropic", api_key="test", max_retries=0)
        with client.messages.stream(
            model="m",
            max_tokens=100,
            messages=MESSAGES,
            tools=[tool],  # type: ignore[list-item]
            extra_query={"doc": BAD, "run": run},
        ) as stream:
            return stream.get_final_message()

    run = uuid.uuid4().hex
    with pytest.raises(anthropic.APIStatusError) as info:
        read(checked, run)
    assert "get_weather" in str(info.value) and "$.days" in str(info.value)
    assert produced(checked, run) <= 16
    final = read(unchecked, uuid.uuid4().hex)  # the control: the SDK gets the (bad) input whole
    assert final.stop_reason == "tool_use"
