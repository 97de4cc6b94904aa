"""Each event's JSON is parsed at most once per stream, whoever asks about it (detection, the delta's read,
telemetry's info, the tool names a format learns), and every answer is what a parse per question gave."""

from __future__ import annotations

import importlib
import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sse_middleware import StreamingSettings
from sse_middleware._core import wire
from sse_middleware._core.dialects import Dialect, OpenAIChat, detect
from sse_middleware._core.dialects import base as dialect_base
from sse_middleware._core.pipeline import Pipeline
from sse_middleware._core.sse import split_events

from ..support.formats import FORMATS
from ..support.tier import examples
from .test_pipeline import Observed, format_case, tokens_st

HEAD = b'data: {"id":"c1","model":"m","choices":[{"index":0,"delta":'
ROLE = HEAD + b'{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
TOKEN = HEAD + b'{"content":"Hi"},"finish_reason":null}]}\n\n'  # the compact shape real servers send
FINISH = HEAD + b'{},"finish_reason":"stop"}]}\n\n'
DONE = b"data: [DONE]\n\n"
# The module, not the function of the same name the package exports.
detect_module = importlib.import_module("sse_middleware._core.dialects.detect")


def run(fmt: str, tokens: list[str], coalesce: bool) -> tuple[list[bytes], list[Any], list[bytes]]:
    """The frames and telemetry calls of ``fmt``'s stream sent an event per body, with the events."""
    stream, s, pipeline = format_case(fmt, tokens)
    s = StreamingSettings(coalesce=coalesce, dialect=s.dialect, json_text_field=s.json_text_field)
    events = split_events(stream)
    observed = Observed()
    pipe = Pipeline("sse", s.core(), observed, **pipeline)  # type: ignore[arg-type]
    frames = [frame for now, raw in enumerate(events) for frame in pipe.feed(raw, float(now))]
    return frames + pipe.close(), observed.calls, events


def counting(mp: pytest.MonkeyPatch) -> list[bytes | str]:
    """Every parse of an event's data a dialect or detection makes, from now on."""
    parses: list[bytes | str] = []

    def loads(data: bytes | str) -> Any:
        parses.append(data)
        return wire.loads(data)

    mp.setattr(dialect_base, "loads", loads)
    mp.setattr(detect_module, "loads", loads)
    return parses


@settings(max_examples=examples(150), deadline=None)
@given(st.sampled_from(sorted(FORMATS)), tokens_st, st.booleans())
def test_no_event_is_parsed_twice(fmt: str, tokens: list[str], coalesce: bool) -> None:
    """Per distinct data, no more parses than events carrying it, coalesced or passed through."""
    with pytest.MonkeyPatch.context() as mp:
        parses = counting(mp)
        _, _, events = run(fmt, tokens, coalesce)
    carried = Counter(wire.name_and_data(raw)[1] for raw in events)
    assert all(times <= carried[data] for data, times in Counter(parses).items()), parses


@settings(max_examples=examples(150), deadline=None)
@given(st.sampled_from(sorted(FORMATS)), tokens_st, st.booleans())
def test_every_answer_is_the_one_a_parse_per_question_gave(
    fmt: str, tokens: list[str], coalesce: bool
) -> None:
    """The control: the same frames and the same telemetry calls as with every question parsing anew."""
    kept = run(fmt, tokens, coalesce)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Dialect, "parse", lambda self, raw, data: wire.loads(data))
        mp.setattr(Dialect, "keep", lambda self, raw, value: None)
        anew = run(fmt, tokens, coalesce)
    assert kept == anew


@pytest.mark.parametrize("coalesce", [True, False])
def test_a_one_token_stream_parses_two_events_once_each(coalesce: bool) -> None:
    """The role chunk (detected by a parse: no ``object`` field) and the finish chunk are each parsed
    once; the token takes the compact-shape regex and ``[DONE]`` is no JSON. Telemetry still hears the
    model, the id and the finish reason."""
    observed = Observed()
    pipe = Pipeline("sse", StreamingSettings(coalesce=coalesce).core(), observed)  # type: ignore[arg-type]
    with pytest.MonkeyPatch.context() as mp:
        parses = counting(mp)
        for now, raw in enumerate((ROLE, TOKEN, FINISH, DONE)):
            pipe.feed(raw, float(now))
    assert sorted(parses) == sorted((ROLE[6:-2], FINISH[6:-2]))
    responses = [call[1] for call in observed.calls if call[0] == "response"]
    assert {"model": "m", "response_id": "c1"} in responses
    assert {"model": "m", "response_id": "c1", "finish_reason": "stop"} in responses


def test_detection_hands_its_parse_to_the_dialect_it_found() -> None:
    found = detect(ROLE)
    assert isinstance(found, OpenAIChat)
    with pytest.MonkeyPatch.context() as mp:
        parses = counting(mp)
        assert found.info(ROLE) == {"model": "m", "response_id": "c1"}
    assert parses == []


def test_an_equal_event_in_another_bytes_object_is_parsed_anew() -> None:
    """The memory is by identity: equal bytes that are another object are another event."""
    dialect = OpenAIChat()
    other = bytes(bytearray(FINISH))
    with pytest.MonkeyPatch.context() as mp:
        parses = counting(mp)
        first, again, second = dialect.info(FINISH), dialect.info(FINISH), dialect.info(other)
    assert first == again == second
    assert len(parses) == 2


@pytest.mark.parametrize("guarded", [False, True], ids=["plain", "guarded"])
def test_a_stream_keeps_no_parse_between_bodies(guarded: bool) -> None:
    """The parse served the body's own events: an idle stream (its role chunk sent, nothing since) holds
    no parsed object, which would be its memory for as long as it idles."""
    from sse_middleware._core.guarded import GuardedPipeline

    core = StreamingSettings().core()
    observed = Observed()
    pipe = (
        GuardedPipeline("sse", core, observed, hold=False, scope={})
        if guarded
        else Pipeline("sse", core, observed)
    )
    pipe.feed(ROLE, 0.0)
    assert pipe.dialect.name == "openai"
    assert pipe.dialect._parsed_raw is None and pipe.dialect._parsed is None


def test_a_guarded_stream_parses_each_event_once_too() -> None:
    """With guards the stream's ending also reads events (the chunk head for a content_filter ending):
    it shares the dialect's parse, so the role and finish chunks are still parsed once each."""
    from sse_middleware._core.guarded import GuardedPipeline

    pipe = GuardedPipeline("sse", StreamingSettings().core(), Observed(), hold=False, scope={})
    parses: list[bytes | str] = []

    def loads(data: bytes | str) -> Any:
        parses.append(data)
        return json.loads(data)

    with pytest.MonkeyPatch.context() as mp:
        for module in (wire, dialect_base, detect_module):  # the endings read through wire's
            mp.setattr(module, "loads", loads)
        for now, raw in enumerate((ROLE, TOKEN, FINISH, DONE)):
            pipe.feed(raw, float(now))
    assert sorted(parses) == sorted((ROLE[6:-2], FINISH[6:-2]))


@pytest.mark.parametrize("coalesce", [True, False])
def test_a_body_of_several_events_parses_each_once(coalesce: bool) -> None:
    """The first body holds the whole stream: detection and the reads share one split of it, so the
    parse detection made of the role chunk is the one its read finds."""
    pipe = Pipeline("sse", StreamingSettings(coalesce=coalesce).core(), Observed())  # type: ignore[arg-type]
    with pytest.MonkeyPatch.context() as mp:
        parses = counting(mp)
        pipe.feed(ROLE + TOKEN + FINISH + DONE, 0.0)
    assert sorted(parses) == sorted((ROLE[6:-2], FINISH[6:-2]))
