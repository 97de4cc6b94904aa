"""Which schemas a request body declares, in each format, and nothing (never an exception) for odd shapes."""

from __future__ import annotations

from typing import Any

import pytest

from sse_middleware._core.jsoncheck import NO_CHECK, SYNTAX_ONLY, checker_for, declared_schemas

PARAMS = {"type": "object", "properties": {"days": {"type": "integer"}}, "required": ["days"]}
OUTPUT = {"type": "object", "properties": {"answer": {"type": "string"}}, "additionalProperties": False}


def test_openai_chat() -> None:
    body = {
        "model": "m",
        "messages": [],
        "tools": [
            {"type": "function", "function": {"name": "get_weather", "parameters": PARAMS}},
            {"type": "function", "function": {"name": "no_params"}},
        ],
        "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": OUTPUT}},
    }
    declared = declared_schemas(body)
    assert declared.for_tool("get_weather") == PARAMS
    assert declared.for_tool("no_params") is NO_CHECK and declared.for_tool("other") is NO_CHECK
    assert declared.content == OUTPUT and declared


def test_openai_chat_json_mode_and_legacy_functions() -> None:
    declared = declared_schemas(
        {"functions": [{"name": "f", "parameters": PARAMS}], "response_format": {"type": "json_object"}}
    )
    assert declared.for_tool("f") == PARAMS and declared.content is SYNTAX_ONLY


def test_openai_responses() -> None:
    body = {
        "model": "m",
        "input": "hi",
        "tools": [{"type": "function", "name": "get_weather", "parameters": PARAMS}, {"type": "web_search"}],
        "text": {"format": {"type": "json_schema", "name": "out", "schema": OUTPUT, "strict": True}},
    }
    declared = declared_schemas(body)
    assert declared.for_tool("get_weather") == PARAMS and declared.content == OUTPUT
    assert declared_schemas({"text": {"format": {"type": "json_object"}}}).content is SYNTAX_ONLY
    assert declared_schemas({"text": {"format": {"type": "text"}}}).content is None


def test_anthropic() -> None:
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [],
        "tools": [
            {"name": "get_weather", "description": "d", "input_schema": PARAMS},
            {"type": "web_search_20250305", "name": "web_search"},
        ],
    }
    declared = declared_schemas(body)
    assert declared.for_tool("get_weather") == PARAMS
    assert declared.for_tool("web_search") is NO_CHECK and declared.content is None


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        "x",
        {},
        {"messages": []},
        {"tools": "x"},
        {"tools": [5, None, {"function": 3}]},
        {"tools": [{"function": {"name": 5, "parameters": PARAMS}}]},
        {"tools": [{"function": {"name": "f", "parameters": "string"}}]},
        {"response_format": "json"},
        {"response_format": {"type": "json_schema", "json_schema": "x"}},
        {"response_format": {"type": "json_schema"}},
        {"text": "x"},
        {"text": {"format": []}},
    ],
)
def test_declares_nothing(body: Any) -> None:
    declared = declared_schemas(body)
    assert not declared and declared.content is None and declared.for_tool("f") is NO_CHECK


def test_two_tools_of_one_name_with_different_schemas_are_not_checked() -> None:
    tools = [{"name": "f", "input_schema": PARAMS}, {"name": "f", "input_schema": OUTPUT}]
    assert declared_schemas({"tools": tools}).for_tool("f") is NO_CHECK
    same = [{"name": "f", "input_schema": PARAMS}, {"name": "f", "input_schema": dict(PARAMS)}]
    assert declared_schemas({"tools": same}).for_tool("f") == PARAMS


def test_checker_for() -> None:
    assert checker_for(NO_CHECK) is None and checker_for(None) is None
    syntax = checker_for(SYNTAX_ONLY)
    assert syntax is not None and syntax.feed('{"anything": [1]}') is None and syntax.close() is None
    typed = checker_for(PARAMS)
    assert typed is not None
    fault = typed.feed('{"days": "3"}')
    assert fault is not None and fault.path == "$.days"
