"""Dialects: detection, which events merge, splicing, error events. Sans-I/O."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sse_middleware._core import dialects, providers
from sse_middleware._core.errors import ErrorInfo, shutdown
from sse_middleware._core.sse import parse

from ..support.apps import anthropic_event, openai_chunk, responses_event

INFO = ErrorInfo("internal_error", "The stream failed on the server.", "abc123")


def raw(text: str) -> bytes:
    return text.encode()


@pytest.mark.parametrize(
    ("first", "name"),
    [
        (openai_chunk(None, role=True), "openai"),
        (anthropic_event("message_start", {"message": {"id": "m"}}), "anthropic"),
        (responses_event("response.created", {"response": {"id": "r"}}, 0), "openai-responses"),
        ("data: hello\n\n", "sse"),
        ('data: {"object":"something.else"}\n\n', "sse"),
        ("event: update\ndata: 1\n\n", "sse"),
    ],
)
def test_detection_from_the_first_event(first: str, name: str) -> None:
    found = providers.detect(raw(first))
    assert found is not None and found.name == name


def test_detection_waits_for_an_event_with_data() -> None:
    assert providers.detect(b": comment\n\n") is None
    assert providers.detect(b"retry: 100\n\n") is None


def test_openai_merges_only_content_only_deltas() -> None:
    d = providers.OpenAIChat()
    delta = d.delta(raw(openai_chunk("Hel")))
    assert delta is not None
    key, envelope, text = delta
    assert (key, text) == (("chatcmpl-1", 0), "Hel")
    assert d.build(envelope, 'Hello "world"\u2028') == raw(openai_chunk('Hello "world"\u2028')).replace(
        "\u2028".encode(), b"\\u2028"
    )
    for not_mergeable in (
        openai_chunk(None, role=True),
        openai_chunk(None, finish="stop"),
        "data: [DONE]\n\n",
    ):
        assert d.delta(raw(not_mergeable)) is None
    tool = raw(openai_chunk("x")).replace(b'"content":"x"', b'"content":null,"tool_calls":[]')
    assert d.delta(tool) is None


def test_spliced_frames_stay_compact_json_with_the_first_envelope() -> None:
    d = providers.OpenAIChat()
    first = d.delta(raw(openai_chunk("a")))
    assert first is not None
    merged = d.build(first[1], "a\nb\\c")
    event = parse(merged)[0]
    body = json.loads(event.data)
    assert body["choices"][0]["delta"]["content"] == "a\nb\\c"
    assert b"\n" not in merged.rstrip(b"\n")  # still one data line


def test_anthropic_merges_text_and_thinking_by_index_and_type() -> None:
    d = providers.Anthropic()
    text = d.delta(
        raw(
            anthropic_event(
                "content_block_delta", {"index": 1, "delta": {"type": "text_delta", "text": "hi"}}
            )
        )
    )
    think = d.delta(
        raw(
            anthropic_event(
                "content_block_delta", {"index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}}
            )
        )
    )
    assert text is not None and think is not None
    assert (text[0], text[2], think[0], think[2]) == ((1, "text_delta"), "hi", (0, "thinking_delta"), "hm")
    json_delta = anthropic_event(
        "content_block_delta", {"index": 2, "delta": {"type": "input_json_delta", "partial_json": "{"}}
    )
    assert d.delta(raw(json_delta)) is None
    assert d.build(text[1], "hi there").startswith(b"event: content_block_delta\n")


def test_responses_merges_output_text_deltas_by_item() -> None:
    d = providers.OpenAIResponses()
    ids = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    delta = d.delta(
        raw(responses_event("response.output_text.delta", {**ids, "delta": "Hi", "logprobs": []}, 3))
    )
    assert delta is not None and delta[0] == ("msg_1", 0, 0) and delta[2] == "Hi"
    with_logprobs = responses_event(
        "response.output_text.delta", {**ids, "delta": "Hi", "logprobs": [{"t": 1}]}, 4
    )
    assert d.delta(raw(with_logprobs)) is None  # merging would lose them


def test_text_dialect_rejoins_a_utf8_character_split_across_events() -> None:
    d = dialects.Text()
    smile = "😀".encode()
    first = d.delta(b"data: a" + smile[:2] + b"\n\n")
    second = d.delta(b"data: " + smile[2:] + b"b\n\n")
    assert first is not None and second is not None
    assert first[2] + second[2] == "a😀b"
    assert "\ufffd" not in first[2] + second[2]


def test_plain_text_rejoins_utf8_across_chunks() -> None:
    d = dialects.PlainText()
    data = "你好".encode()
    pieces = [d.delta(data[i : i + 1]) for i in range(len(data))]
    assert "".join(p[2] for p in pieces if p) == "你好"


@pytest.mark.parametrize(
    ("dialect", "check"),
    [
        (dialects.Dialect(), lambda e, b: e.event == "error" and b["error"]["id"] == "abc123"),
        (
            providers.OpenAIChat(),
            lambda e, b: e.event is None and set(b["error"]) == {"message", "type", "param", "code"},
        ),
        (
            providers.OpenAIResponses(),
            lambda e, b: e.event == "error" and b["type"] == "error" and "sequence_number" in b,
        ),
        (providers.Anthropic(), lambda e, b: e.event == "error" and b["error"]["type"] == "api_error"),
    ],
    ids=["sse", "openai", "responses", "anthropic"],
)
def test_error_events_follow_each_dialect(dialect: dialects.Dialect, check: object) -> None:
    events = parse(dialect.error_event(INFO))
    assert len(events) == 1
    assert check(events[0], json.loads(events[0].data))  # type: ignore[operator]
    assert "abc123" in events[0].data  # the id operators search for always reaches the client


def test_shutdown_event_carries_a_retry_hint() -> None:
    frame = dialects.Dialect().error_event(shutdown("id1", 2500))
    assert frame.startswith(b"retry: 2500\n")
    assert json.loads(parse(frame)[0].data)["error"]["type"] == "server_shutdown"


texts_st = st.text(max_size=12)


@settings(max_examples=300)
@given(texts_st, st.integers(0, 3), st.booleans(), st.sampled_from(["text_delta", "thinking_delta"]))
def test_fast_paths_agree_with_the_full_parse(text: str, index: int, with_usage: bool, kind: str) -> None:
    """The compact-shape regexes skip the JSON parse; they must merge exactly what a parse would."""
    chunk = raw(openai_chunk(text, index=index))
    if with_usage:
        chunk = chunk.replace(b"}]}", b'}],"usage":null}')
    field = kind.removesuffix("_delta")
    event = raw(
        anthropic_event("content_block_delta", {"index": index, "delta": {"type": kind, field: text}})
    )
    for dialect, data in ((providers.OpenAIChat(), chunk), (providers.Anthropic(), event)):
        fast = dialect.delta(data)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(providers, "_OPENAI_FAST", re.compile(b"(?!)"))
            mp.setattr(providers, "_ANTHROPIC_FAST", re.compile(b"(?!)"))
            slow = dialect.delta(data)
        assert fast == slow and fast is not None


def test_fast_path_refuses_what_must_not_merge() -> None:
    d = providers.OpenAIChat()
    with_finish = raw(openai_chunk("x")).replace(b'"finish_reason":null', b'"finish_reason":"stop"')
    with_usage = raw(openai_chunk("x")).replace(b"}]}", b'}],"usage":{"prompt_tokens":1}}')
    assert d.delta(with_finish) is None and d.delta(with_usage) is None
    mismatched = (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","thinking":"x"}}\n\n'
    )
    assert providers.Anthropic().delta(mismatched) is None
