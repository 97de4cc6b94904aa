"""Which part of an answer each format's deltas are, and the tool names learned from the stream: what
guards and output checks are told. Each case reads the events the way the pipeline does (``see`` for
events that are not deltas, ``delta`` for the rest)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sse_middleware._core.dialects import AISDK, Anthropic, Dialect, OpenAIChat, OpenAIResponses
from sse_middleware._core.wire import Part


def _data(obj: dict[str, Any], name: str | None = None) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(obj, separators=(',', ':'))}\n\n".encode()


def _chat(delta: dict[str, Any], index: int = 0) -> bytes:
    choice = {"index": index, "delta": delta}
    return _data({"id": "c1", "object": "chat.completion.chunk", "choices": [choice]})


def _parts(dialect: Dialect, events: list[bytes]) -> list[tuple[Part, str]]:
    out = []
    for raw in events:
        found = dialect.delta(raw)
        if found is None or not found.text:
            dialect.see(raw)
        else:
            out.append((dialect.part(found.key), found.text))
    return out


def _call(index: int, name: str | None, arguments: str, call_id: str | None = None) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": arguments}
    if name is not None:
        function["name"] = name
    return {"index": index, "id": call_id, "type": "function" if name else None, "function": function}


CASES: dict[str, tuple[Dialect, list[bytes], list[tuple[Part, str]]]] = {
    "openai": (
        OpenAIChat(),
        [
            _chat({"role": "assistant", "content": "Hi"}),
            _chat({"reasoning_content": "hmm"}),
            _chat({"tool_calls": [_call(0, "get_weather", "", "call_1")]}),
            _chat({"tool_calls": [_call(0, None, '{"city"')]}),
            _chat({"tool_calls": [_call(1, "get_time", '{"tz"', "call_2")]}),  # a head with arguments
            _chat({"content": "other"}, index=1),
        ],
        [
            (Part("text"), "Hi"),
            (Part("reasoning"), "hmm"),
            (Part("tool_arguments", "get_weather"), '{"city"'),
            (Part("tool_arguments", "get_time"), '{"tz"'),
            (Part("text"), "other"),
        ],
    ),
    "anthropic": (
        Anthropic(),
        [
            _data({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking"}},
                  "content_block_start"),
            _data({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "thinking_delta", "thinking": "t"}}, "content_block_delta"),
            _data({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "a"}},
                  "content_block_delta"),
            _data({"type": "content_block_start", "index": 2,
                   "content_block": {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}},
                  "content_block_start"),
            _data({"type": "content_block_delta", "index": 2,
                   "delta": {"type": "input_json_delta", "partial_json": '{"c'}}, "content_block_delta"),
        ],
        [(Part("reasoning"), "t"), (Part("text"), "a"), (Part("tool_arguments", "get_weather"), '{"c')],
    ),
    "openai-responses": (
        OpenAIResponses(),
        [
            _data({"type": "response.output_item.added", "output_index": 0,
                   "item": {"type": "function_call", "id": "fc_1", "name": "lookup", "arguments": ""}},
                  "response.output_item.added"),
            _data({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0,
                   "delta": '{"q"'}, "response.function_call_arguments.delta"),
            _data({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 1,
                   "summary_index": 0, "delta": "why"}, "response.reasoning_summary_text.delta"),
            _data({"type": "response.output_text.delta", "item_id": "m_1", "output_index": 2,
                   "content_index": 0, "delta": "Hello"}, "response.output_text.delta"),
        ],
        [(Part("tool_arguments", "lookup"), '{"q"'), (Part("reasoning"), "why"), (Part("text"), "Hello")],
    ),
    "ai-sdk": (
        AISDK(),
        [
            _data({"type": "start"}),
            _data({"type": "reasoning-delta", "id": "r1", "delta": "think"}),
            _data({"type": "tool-input-start", "toolCallId": "c1", "toolName": "search"}),
            _data({"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"q":'}),
            _data({"type": "text-delta", "id": "t1", "delta": "Yes"}),
        ],
        [(Part("reasoning"), "think"), (Part("tool_arguments", "search"), '{"q":'), (Part("text"), "Yes")],
    ),
}  # fmt: skip


@pytest.mark.parametrize("fmt", CASES)
def test_each_format_names_its_parts_and_tools(fmt: str) -> None:
    dialect, events, expected = CASES[fmt]
    assert _parts(dialect, events) == expected


def test_a_tool_named_nowhere_has_no_name() -> None:
    """The control for the names: without the head event the arguments are still tool arguments, unnamed."""
    dialect, events, _ = CASES["anthropic"]
    got = _parts(type(dialect)(), [events[4]])
    assert got == [(Part("tool_arguments", None), '{"c')]
