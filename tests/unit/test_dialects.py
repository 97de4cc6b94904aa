"""Dialects: detection, which events merge and under which key, splicing, error events. Sans-I/O."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sse_middleware import ConfigError, StreamingSettings
from sse_middleware._core import headers, wire
from sse_middleware._core.dialects import (
    AISDK,
    Anthropic,
    Dialect,
    Generic,
    JsonRelay,
    OpenAIChat,
    OpenAIResponses,
    PlainText,
    RelayMemory,
    RelayProbe,
    Text,
    Undetected,
    detect,
    initial,
    openai_chat,
)
from sse_middleware._core.dialects import (
    anthropic as anthropic_module,
)
from sse_middleware._core.dialects import base as dialect_base
from sse_middleware._core.dialects.openai_chat import SpacedOpenAIChat
from sse_middleware._core.errors import ErrorInfo, shutdown
from sse_middleware._core.sse import parse

from ..support.apps import anthropic_event, openai_chunk, responses_event
from ..support.formats import ascii_json, chat, sse, tool_args, tool_head
from ..support.tier import examples

INFO = ErrorInfo("internal_error", "The stream failed on the server.", "abc123")


def raw(text: str) -> bytes:
    return text.encode()


def route(memory: RelayMemory | None = None, path: str = "/chat") -> Any:
    return (memory or RelayMemory()).for_route({"method": "POST", "path": path})


@pytest.mark.parametrize(
    ("first", "name"),
    [
        (openai_chunk(None, role=True), "openai"),
        (chat({"content": "Hi"}, minimal=True), "openai"),  # no id, object or model
        (chat({"role": "assistant"}, minimal=True), "openai"),
        (anthropic_event("message_start", {"message": {"id": "m"}}), "anthropic"),
        (responses_event("response.created", {"response": {"id": "r"}}, 0), "openai-responses"),
        (sse({"type": "start", "messageId": "m1"}), "ai-sdk"),
        (sse({"type": "start"}), "ai-sdk"),
        (sse({"type": "start", "at": 1}), "sse"),  # not exactly the AI SDK's start part
        (sse({"choices": []}), "sse"),
        (sse({"choices": [{"message": {"content": "x"}}]}), "sse"),  # a whole completion, not a chunk
        ("data: hello\n\n", "sse"),
        ('data: {"object":"something.else"}\n\n', "sse"),
        ("event: update\ndata: 1\n\n", "sse"),
        (sse({"text": "hi"}, compact=False), "sse"),  # a relay is never merged on a guess
    ],
)
def test_detection_from_the_first_event(first: str, name: str) -> None:
    found = detect(raw(first))
    assert found is not None and found.name == name


def test_chunks_written_with_json_dumps_defaults_are_read_with_spaced_needles() -> None:
    spaced, compact = detect(raw(chat({"content": "Hi"}, minimal=True))), detect(raw(openai_chunk("Hi")))
    assert type(spaced) is SpacedOpenAIChat and type(compact) is OpenAIChat
    assert spaced.content(raw(chat({"content": "Hi"}, minimal=True)))  # TTFT and gaps see the text
    assert not spaced.content(raw(chat({"content": ""}, minimal=True)))


def test_detection_waits_for_an_event_with_data() -> None:
    assert detect(b": comment\n\n") is None
    assert detect(b"retry: 100\n\n") is None


def test_the_ai_sdk_header_names_the_dialect_before_any_event() -> None:
    hint = [(b"Content-Type", b"text/event-stream"), (b"X-Vercel-AI-UI-Message-Stream", b"v1")]
    assert isinstance(initial(headers.SSE, StreamingSettings().core(), hint), AISDK)
    other = [(b"x-vercel-ai-ui-message-stream", b"v2")]
    assert isinstance(initial(headers.SSE, StreamingSettings().core(), other), Undetected)
    named = StreamingSettings(dialect="sse").core()
    assert isinstance(initial(headers.SSE, named, hint), Generic)  # settings win


def test_named_dialects_and_stream_kinds() -> None:
    named = initial(headers.SSE, StreamingSettings(dialect="json", json_text_field="a.b").core(), ())
    assert isinstance(named, JsonRelay)
    assert isinstance(initial(headers.TEXT, StreamingSettings().core(), ()), PlainText)
    assert initial(headers.BYTES, StreamingSettings().core(), ()).error_event(INFO) is None


# -- OpenAI chat ------------------------------------------------------------------------------------


def test_openai_merges_content_only_deltas() -> None:
    d = OpenAIChat()
    delta = d.delta(raw(openai_chunk("Hel")))
    assert delta is not None
    key, envelope, text = delta
    assert (key, text) == (("chatcmpl-1", 0, None, "content"), "Hel")
    assert d.build(envelope, 'Hello "world"\u2028') == raw(openai_chunk('Hello "world"\u2028')).replace(
        "\u2028".encode(), b"\\u2028"
    )
    for not_mergeable in (
        openai_chunk(None, role=True),
        openai_chunk(None, finish="stop"),
        "data: [DONE]\n\n",
    ):
        assert d.delta(raw(not_mergeable)) is None


@pytest.mark.parametrize("minimal", [False, True])
def test_openai_text_reasoning_and_tool_arguments_merge_under_separate_keys(minimal: bool) -> None:
    keys = {}
    for field in ("content", "reasoning_content", "reasoning"):
        found = OpenAIChat().delta(raw(chat({field: "x"}, minimal=minimal)))
        assert found is not None and found[2] == "x"
        keys[field] = found[0]
    args = OpenAIChat().delta(raw(chat(tool_args(1, '{"a'), minimal=minimal)))
    assert args is not None and args[2] == '{"a'
    keys["tool"] = args[0]
    assert len(set(keys.values())) == 4


@pytest.mark.parametrize(
    "delta_or_extra",
    [
        {"delta": {"content": "x", "reasoning_content": "y"}},  # two texts in one chunk
        {"delta": {"content": "x", "audio": {"id": "a"}}},  # a field this reader does not know
        {"delta": {"tool_calls": [tool_args(0, "a")["tool_calls"][0], tool_args(1, "b")["tool_calls"][0]]}},
        {"delta": {"content": "x"}, "finish": "stop"},
        {"delta": {"content": "x"}, "usage": {"prompt_tokens": 1}},
        {"delta": {"content": "x"}, "logprobs": {"content": []}},
    ],
)
def test_openai_never_merges_across_finish_usage_logprobs_or_unknown_fields(
    delta_or_extra: dict[str, Any],
) -> None:
    spec = dict(delta_or_extra)
    delta, finish, logprobs = spec.pop("delta"), spec.pop("finish", None), spec.pop("logprobs", None)
    event = raw(chat(delta, finish=finish, **spec))
    if logprobs is not None:
        event = event.replace(b'"logprobs":null', b'"logprobs":' + json.dumps(logprobs).encode())
    assert OpenAIChat().delta(event) is None


def test_openai_role_is_part_of_the_key() -> None:
    d = OpenAIChat()
    with_role = d.delta(raw(chat({"role": "assistant", "reasoning": "a"})))
    without = d.delta(raw(chat({"reasoning": "b"})))
    other = d.delta(raw(chat({"role": "tool", "reasoning": "c"})))
    assert with_role is not None and without is not None and other is not None
    assert len({with_role[0], without[0], other[0]}) == 3


def test_openai_tool_call_head_is_the_envelope_its_arguments_merge_into() -> None:
    d = OpenAIChat()
    head = d.delta(raw(chat(tool_head(0, "get_weather", '{"ci'))))
    more = d.delta(raw(chat(tool_args(0, 'ty": 1}'))))
    assert head is not None and more is not None and head[0] == more[0]
    merged = json.loads(parse(d.build(head[1], head[2] + more[2]))[0].data)
    call = merged["choices"][0]["delta"]["tool_calls"][0]
    assert (call["id"], call["function"]["name"], call["function"]["arguments"]) == (
        "call_0",
        "get_weather",
        '{"city": 1}',
    )
    empty = OpenAIChat().delta(raw(chat(tool_head(1, "f"))))
    assert empty is not None and empty[2] == ""  # the pipeline forwards it as it is
    new_head = tool_head(0, "other", "{")
    new_head["tool_calls"][0]["id"] = "call_9"
    next_call = d.delta(raw(chat(new_head)))  # a new call on index 0: a new key
    assert next_call is not None and next_call[0] != head[0]


def test_spliced_frames_stay_compact_json_with_the_first_envelope() -> None:
    d = OpenAIChat()
    first = d.delta(raw(openai_chunk("a")))
    assert first is not None
    merged = d.build(first[1], "a\nb\\c")
    body = json.loads(parse(merged)[0].data)
    assert body["choices"][0]["delta"]["content"] == "a\nb\\c"
    assert b"\n" not in merged.rstrip(b"\n")  # still one data line


def reference_escape(text: str) -> bytes:
    """What merged text was always escaped as: the JSON encoder, U+2028/9 escaped, lone surrogates too."""
    out = json.dumps(text, ensure_ascii=False)[1:-1].replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return out.encode("utf-8", "backslashreplace")


@settings(max_examples=examples(500), deadline=None)
@given(
    st.text(st.characters(exclude_categories=()), max_size=12)  # lone surrogates too
    | st.text('ab "\\\n\t\x7f\x1fé\u2028\u2029\ud83d\ude00', max_size=8)
)
def test_text_with_nothing_to_escape_skips_the_encoder_and_gives_its_bytes(text: str) -> None:
    assert wire.escape(text) == reference_escape(text)


# -- Anthropic, Responses, AI SDK -------------------------------------------------------------------


def test_anthropic_merges_text_thinking_and_tool_input_by_index_and_type() -> None:
    found = {}
    for index, kind, field in (
        (1, "text_delta", "text"),
        (0, "thinking_delta", "thinking"),
        (2, "input_json_delta", "partial_json"),
    ):
        event = anthropic_event("content_block_delta", {"index": index, "delta": {"type": kind, field: "{x"}})
        delta = Anthropic().delta(raw(event))
        assert delta is not None and delta[2] == "{x"
        found[kind] = delta[0]
        assert Anthropic().build(delta[1], "{x y").startswith(b"event: content_block_delta\n")
    assert found == {
        "text_delta": (1, "text_delta"),
        "thinking_delta": (0, "thinking_delta"),
        "input_json_delta": (2, "input_json_delta"),
    }
    signature = anthropic_event(
        "content_block_delta", {"index": 0, "delta": {"type": "signature_delta", "signature": "s"}}
    )
    assert Anthropic().delta(raw(signature)) is None


@pytest.mark.parametrize(
    ("name", "places"),
    [
        ("response.output_text.delta", {"item_id": "msg_1", "output_index": 0, "content_index": 0}),
        ("response.reasoning_text.delta", {"item_id": "rs_1", "output_index": 0, "content_index": 0}),
        ("response.reasoning_summary_text.delta", {"item_id": "rs_1", "output_index": 0, "summary_index": 1}),
        ("response.function_call_arguments.delta", {"item_id": "fc_1", "output_index": 2}),
    ],
)
def test_responses_merges_each_delta_event_by_name_and_place(name: str, places: dict[str, Any]) -> None:
    d = OpenAIResponses()
    delta = d.delta(raw(responses_event(name, {**places, "delta": "Hi", "obfuscation": "ab"}, 3)))
    assert delta is not None and delta[0] == (name.encode(), *places.values()) and delta[2] == "Hi"
    assert d.delta(raw(responses_event(name, {**places, "delta": "Hi", "logprobs": [{"t": 1}]}, 4))) is None
    assert d.delta(raw(responses_event(name, {**places, "delta": "Hi", "annotation": 1}, 5))) is None


def test_ai_sdk_merges_text_reasoning_and_tool_input_per_id() -> None:
    keys = []
    for part in (
        {"type": "text-delta", "id": "t0", "delta": "Hi"},
        {"type": "reasoning-delta", "id": "t0", "delta": "Hi"},
        {"type": "tool-input-delta", "toolCallId": "t0", "inputTextDelta": "Hi"},
    ):
        delta = AISDK().delta(raw(sse(part)))
        assert delta is not None and delta[2] == "Hi"
        keys.append(delta[0])
        assert AISDK().delta(raw(sse({**part, "providerMetadata": {"x": {}}}))) is None
    assert len(set(keys)) == 3
    assert AISDK().delta(raw(sse({"type": "text-start", "id": "t0"}))) is None


# -- JSON relays ------------------------------------------------------------------------------------


def test_json_relay_merges_identical_envelopes_keeping_key_order() -> None:
    d = JsonRelay("payload.t")
    first = raw(sse({"type": "token", "payload": {"t": "a", "lang": "en"}, "v": 2}))
    second = d.delta(raw(sse({"type": "token", "payload": {"t": "b", "lang": "en"}, "v": 2})))
    found = d.delta(first)
    assert found is not None and second is not None and found[0] == second[0]
    assert d.build(found[1], "ab") == first.replace(b'"t":"a"', b'"t":"ab"')
    other = d.delta(raw(sse({"type": "token", "payload": {"t": "c", "lang": "fr"}, "v": 2})))
    assert other is not None and other[0] != found[0]  # another envelope: never merged with the first
    assert d.delta(raw(sse({"type": "token", "payload": {"t": 1}}))) is None


def test_a_relay_route_is_learned_only_from_a_stream_that_ends_with_done() -> None:
    memory = RelayMemory()
    events = [raw(sse({"text": t}, compact=False)) for t in ("a", 'b"', "c")]
    for ending, learned in ((b"", False), (b'data: {"text": 1}\n\n', False), (b"data: [DONE]\n\n", True)):
        probe = detect(events[0], route(memory))
        assert isinstance(probe, RelayProbe)
        for event in [*events, b": ping\n\n", ending]:
            assert probe.delta(event) is None  # forwarded as it is
        assert (route(memory).field == "text") is learned
    merging = detect(events[0], route(memory))
    assert isinstance(merging, JsonRelay) and merging.delta(events[1]) is not None
    assert merging.delta(b'data: {"note": "not a token"}\n\n') is None
    assert route(memory).field is None  # a stream that broke the pattern unlearns the route
    assert merging.delta(events[2]) is None  # and merges nothing more


def test_relay_memory_is_bounded_and_keyed_by_endpoint() -> None:
    memory = RelayMemory(size=2)
    for path in ("/a", "/b", "/c"):
        route(memory, path).learn("text")
    assert [route(memory, p).field for p in ("/a", "/b", "/c")] == [None, "text", "text"]

    def endpoint() -> None: ...

    by_endpoint = memory.for_route({"method": "GET", "path": "/x/1", "endpoint": endpoint})
    by_endpoint.learn("token")
    assert memory.for_route({"method": "GET", "path": "/x/2", "endpoint": endpoint}).field == "token"


# -- Text formats -----------------------------------------------------------------------------------


def test_text_dialect_rejoins_a_utf8_character_split_across_events() -> None:
    d = Text()
    smile = "😀".encode()
    first = d.delta(b"data: a" + smile[:2] + b"\n\n")
    second = d.delta(b"data: " + smile[2:] + b"b\n\n")
    assert first is not None and second is not None
    assert first[2] + second[2] == "a😀b"
    assert "\ufffd" not in first[2] + second[2]


def test_plain_text_rejoins_utf8_across_chunks_and_flushes_what_it_holds() -> None:
    d = PlainText()
    data = "你好".encode()
    pieces = [d.delta(data[i : i + 1]) for i in range(len(data) - 1)]
    assert "".join(p[2] for p in pieces if p) == "你"
    assert d.flush() == data[3:5] and d.flush() == b""


# -- Error events -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dialect", "check"),
    [
        (Generic(), lambda e, b: e.event == "error" and b["error"]["id"] == "abc123"),
        (
            OpenAIChat(),
            lambda e, b: e.event is None and set(b["error"]) == {"message", "type", "param", "code"},
        ),
        (
            OpenAIResponses(),
            lambda e, b: e.event == "error" and b["type"] == "error" and "sequence_number" in b,
        ),
        (Anthropic(), lambda e, b: e.event == "error" and b["error"]["type"] == "api_error"),
        (AISDK(), lambda e, b: e.event is None and set(b) == {"type", "errorText"} and b["type"] == "error"),
        (JsonRelay("text"), lambda e, b: e.event == "error" and b["error"]["id"] == "abc123"),
    ],
    ids=["sse", "openai", "responses", "anthropic", "ai-sdk", "json"],
)
def test_error_events_follow_each_dialect(dialect: Dialect, check: Callable[[Any, Any], bool]) -> None:
    frame = dialect.error_event(INFO)
    assert frame is not None
    events = parse(frame)
    assert len(events) == 1
    assert check(events[0], json.loads(events[0].data))
    assert "abc123" in events[0].data  # the id operators search for always reaches the client
    assert INFO.message in events[0].data  # the sanitized message, never an exception's text


def test_shutdown_event_carries_a_retry_hint() -> None:
    for dialect in (Generic(), AISDK()):
        frame = dialect.error_event(shutdown("id1", 2500))
        assert frame is not None and frame.startswith(b"retry: 2500\n")
    assert json.loads(parse(Generic().error_event(shutdown("id1", 2500)) or b"")[0].data)["error"][
        "type"
    ] == ("server_shutdown")


# -- The fast paths agree with the full parse --------------------------------------------------------

texts_st = st.text(max_size=12)


@settings(max_examples=examples(300))
@given(texts_st, st.integers(0, 3), st.booleans(), st.sampled_from(["text_delta", "thinking_delta"]))
def test_fast_paths_agree_with_the_full_parse(text: str, index: int, with_usage: bool, kind: str) -> None:
    """The compact-shape regexes skip the JSON parse; they must merge exactly what a parse would. Each
    read gets a fresh dialect, so no envelope cache answers for the parse; the parse is counted."""
    chunk = raw(openai_chunk(text, index=index))
    if with_usage:
        chunk = chunk.replace(b"}]}", b'}],"usage":null}')
    field = kind.removesuffix("_delta")
    event = raw(
        anthropic_event("content_block_delta", {"index": index, "delta": {"type": kind, field: text}})
    )
    for module, make, data in ((openai_chat, OpenAIChat, chunk), (anthropic_module, Anthropic, event)):
        parses: list[bytes | str] = []

        def counting(data: bytes | str, parses: list[bytes | str] = parses) -> Any:
            parses.append(data)
            return wire.loads(data)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(dialect_base, "loads", counting)  # every parse a dialect makes of an event's data
            fast = make().delta(data)
            assert parses == [] or not text  # the regex answered (an empty text is for the parse)
            parses.clear()
            mp.setattr(module, "_FAST", re.compile(b"(?!)"))
            slow = make().delta(data)
            assert len(parses) == 1  # the full parse answered
        assert fast == slow and (fast is not None or (not text and make is OpenAIChat))


_SCALARS_ST = st.lists(
    st.sampled_from(
        [
            '"object":"chat.completion.chunk"',
            '"created":1',
            '"usage":null',
            '"usage":1',
            '"usage":"x"',
            '"usage":0',
            '"choices":null',
            '"id":true',
            '"model":"m\x01"',
            '"n":-2',
        ]
    ),
    max_size=3,
)
_DELTAS_ST = st.sampled_from(
    [
        "{}",
        '{"role":"assistant"}',
        '{"role":"assistant","content":""}',
        '{"content":""}',
        '{"role":"tool","content":""}',
        '{"content":"x"}',
        '{"role":"assistant","content":"x"}',
        '{"role":"","content":""}',
        '{"content":"","role":"assistant"}',
    ]
)


@settings(max_examples=examples(300), deadline=None)
@given(
    _SCALARS_ST,
    _SCALARS_ST,
    _DELTAS_ST,
    st.sampled_from(["null", '"stop"', '"x\x02"']),
    st.booleans(),
    st.sampled_from(["data: ", "data:"]),
)
def test_bare_chunks_read_without_a_parse_as_the_parse_reads_them(
    head: list[str], tail: list[str], delta: str, finish: str, logprobs: bool, field: str
) -> None:
    """A role chunk, a finish chunk or ``[DONE]`` in the compact shape is answered without a parse (no
    delta in it); every variation of that shape (usage, a second choices or id, a control character that
    makes it invalid JSON, a delta with text) gets what the full parse gives."""
    lp = ',"logprobs":null' if logprobs else ""
    body = (
        "".join(h + "," for h in head)
        + f'"choices":[{{"index":0,"delta":{delta}{lp},"finish_reason":{finish}}}]'
    )
    chunk = (field + '{"id":"c1",' + body + "".join("," + t for t in tail) + "}\n\n").encode()
    for data in (chunk, field.encode() + b"[DONE]\n\n"):
        parses: list[bytes | str] = []

        def counting(data: bytes | str, parses: list[bytes | str] = parses) -> Any:
            parses.append(data)
            return wire.loads(data)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(dialect_base, "loads", counting)
            fast = OpenAIChat().delta(data)
            parsed = bool(parses)
            mp.setattr(openai_chat, "_BARE", re.compile(b"(?!)"))  # the content regex stays: its own test
            slow = OpenAIChat().delta(data)
        assert fast == slow
        usual = delta in ("{}", '{"role":"assistant","content":""}') and "x" not in finish
        if data.endswith(b"[DONE]\n\n") or (usual and not any("x" in h for h in head + tail)):
            assert not parsed  # the usual first and last events take the regex (the test is not vacuous)


def test_fast_path_refuses_what_must_not_merge() -> None:
    d = OpenAIChat()
    with_finish = raw(openai_chunk("x")).replace(b'"finish_reason":null', b'"finish_reason":"stop"')
    with_usage = raw(openai_chunk("x")).replace(b"}]}", b'}],"usage":{"prompt_tokens":1}}')
    assert d.delta(with_finish) is None and d.delta(with_usage) is None
    mismatched = (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","thinking":"x"}}\n\n'
    )
    assert Anthropic().delta(mismatched) is None


MAKERS: list[Callable[[], Dialect]] = [
    OpenAIChat,
    Anthropic,
    OpenAIResponses,
    AISDK,
    lambda: JsonRelay("text"),
]
pieces_st = st.lists(
    st.text(alphabet=st.sampled_from('ab "\\\n{}é😀\u2028\ud83d'), max_size=5), min_size=1, max_size=8
)


@settings(max_examples=examples(200), deadline=None)
@given(pieces_st, st.data())
def test_the_envelope_cache_answers_what_the_full_parse_would(pieces: list[str], data: st.DataObject) -> None:
    """Consecutive events of one shape skip the parse; a dialect that always parses agrees, event by event."""
    build = data.draw(
        st.sampled_from(
            [
                lambda t: chat({"content": t}, minimal=True),
                lambda t: chat(tool_args(0, t)),
                lambda t: chat({"reasoning_content": t}),
                lambda t: sse(
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "input_json_delta", "partial_json": t},
                    },
                    "content_block_delta",
                ),
                lambda t: sse({"type": "text-delta", "id": "x", "delta": t}),
                lambda t: sse({"text": t}, compact=False),
            ]
        )
    )
    # Surrogates as they come: \\u escapes (json.dumps' default; a pair may be split), or raw (not UTF-8).
    events = [build(p).encode("utf-8", "surrogatepass") for p in pieces]
    events = [ascii_json(e) for e in events] if data.draw(st.booleans()) else events
    for make in MAKERS:
        cached, parsing = make(), make()
        for event in events:
            expected = parsing.delta(event)
            parsing._last = None  # type: ignore[attr-defined]
            assert cached.delta(event) == expected


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=60).map(lambda t: f"data: {t}\n\n".encode()))
def test_no_dialect_raises_on_any_event(event: bytes) -> None:
    for make in [*MAKERS, Text, Generic]:
        make().delta(event)
    assert detect(event, route()) is None or isinstance(detect(event, route()), Dialect)


# -- Settings and telemetry -------------------------------------------------------------------------


def test_json_text_field_comes_from_the_environment_and_is_validated() -> None:
    env = {"SSE_MIDDLEWARE_DIALECT": "json", "SSE_MIDDLEWARE_JSON_TEXT_FIELD": "delta.text"}
    s = StreamingSettings.from_env(env)
    assert (s.dialect, s.json_text_field) == ("json", "delta.text")
    assert StreamingSettings(dialect="ai-sdk").dialect == "ai-sdk"
    for bad in ("", "a..b", ".a", 'say"', "back\\slash", "tab\there"):
        with pytest.raises(ConfigError, match="json_text_field must name a JSON field"):
            StreamingSettings(json_text_field=bad)
    with pytest.raises(ConfigError, match="json_text_field must be a string"):
        StreamingSettings(json_text_field=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="from the environment: json_text_field must name"):
        StreamingSettings.from_env({"SSE_MIDDLEWARE_JSON_TEXT_FIELD": "a."})


@pytest.mark.parametrize(
    ("dialect", "event", "expected"),
    [
        (AISDK(), sse({"type": "start", "messageId": "msg_1"}), {"response_id": "msg_1"}),
        (AISDK(), sse({"type": "finish", "finishReason": "stop"}), {"finish_reason": "stop"}),
        (SpacedOpenAIChat(), chat({}, finish="length", minimal=True), {"finish_reason": "length"}),
        (OpenAIChat(), sse({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}}), None),
    ],
)
def test_new_shapes_report_what_telemetry_reads(dialect: Dialect, event: str, expected: Any) -> None:
    assert dialect.wants_info(raw(event))
    info = dialect.info(raw(event))
    if expected is None:
        assert info is not None and (info["input_tokens"], info["output_tokens"]) == (3, 5)
    else:
        assert {k: v for k, v in (info or {}).items() if v is not None} == expected
