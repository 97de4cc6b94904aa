"""One registry of formats: every table of formats is derived from the dialect classes' own attributes.

Each format's class carries its name, its detection, its end marker, its error event, its content-filter
ending and whether it is the AI SDK's chat stream; the settings' accepted names, the readers by name, the
order of detection, the response-header hints, the check's end markers and error shapes are read from
the classes (and the streams recovery reads: :mod:`.test_registry_recovery`). The controls: a name no
class carries is refused, an end marker is not its format's content event, and an ending of the wrong
class would build another format's frame.
"""

from __future__ import annotations

import inspect
import typing

import pytest

from sse_middleware import ConfigError, StreamingSettings
from sse_middleware._check import protocol
from sse_middleware._core import headers
from sse_middleware._core.config import CoreConfig
from sse_middleware._core.dialects import (
    AISDK,
    BY_NAME,
    END_MARKERS,
    FORMATS,
    NAMES,
    Dialect,
    DialectName,
    base,
    detect,
    initial,
    registry,
)
from sse_middleware._core.dialects import endings as endings_module
from sse_middleware._core.dialects.endings import Ending, NoEnding, ending_for
from sse_middleware._core.errors import ErrorInfo
from sse_middleware._core.sse import parse

from ..support.formats import agui_stream, anthropic_stream, chat_stream, responses_stream, ui_stream

INFO = ErrorInfo("content_filter", "blocked", "abc123", "no_secrets")
# A complete stream of each format with an end marker: its last event with data is the marker.
COMPLETE = {
    "openai": chat_stream(["Hel", "lo"]),
    "anthropic": anthropic_stream(["Hel", "lo"]),
    "openai-responses": responses_stream(["Hel", "lo"]),
    "ai-sdk": ui_stream(["Hel", "lo"]),
    "ag-ui": agui_stream(["Hel", "lo"]),
}


def _raw_events(stream: str) -> list[bytes]:
    return [chunk.encode() + b"\n\n" for chunk in stream.split("\n\n") if chunk.strip()]


def _dialect_classes() -> set[type[Dialect]]:
    """Every dialect class the package defines."""
    found: set[type[Dialect]] = set()
    todo = [Dialect]
    while todo:
        cls = todo.pop()
        found.add(cls)
        todo.extend(cls.__subclasses__())
    return {cls for cls in found if cls.__module__.startswith("sse_middleware.")}


def test_the_settings_accept_exactly_the_names_the_classes_carry() -> None:
    assert typing.get_args(DialectName) == NAMES == ("auto", *(cls.name for cls in FORMATS))
    assert set(BY_NAME) == {cls.name for cls in FORMATS} and len(BY_NAME) == len(FORMATS)
    for cls in FORMATS:
        assert StreamingSettings(dialect=cls.name).dialect == cls.name
        assert isinstance(initial(headers.SSE, CoreConfig(dialect=cls.name)), cls)
    with pytest.raises(ConfigError):  # the control: a name no class carries
        StreamingSettings(dialect="gemini")


def test_every_dialect_class_is_a_format_or_one_of_the_readers_behind_one() -> None:
    """A class that names a format but is missing from the registry would be unreachable by its name."""
    internal = {"auto", "bytes", "plain"}  # undetected yet, NDJSON/compressed, text/plain: never named
    for cls in _dialect_classes():
        if cls in FORMATS or inspect.isabstract(cls) or cls.name in internal:
            continue
        # A reader behind a format: a subclass of one (spaced OpenAI chunks) or a relay still on trial.
        assert cls.name in BY_NAME or cls.__name__ in {"Spliced", "Dialect", "RelayProbe"}, cls
        if cls.__name__ not in {"Spliced", "Dialect", "RelayProbe"}:
            assert issubclass(cls, BY_NAME[cls.name]), cls


def test_detection_asks_each_format_then_the_catch_alls() -> None:
    ranks = [cls.rank for cls in registry.DETECTION]
    assert ranks == sorted(ranks) and registry.DETECTION[-1] is base.Generic
    assert set(registry.DETECTION) == set(FORMATS)


def test_only_the_ai_sdk_resumes_a_chat_by_its_id() -> None:
    assert [cls for cls in FORMATS if cls.chat_resume] == [AISDK]
    assert detect(b'data: {"type":"start"}\n\n').chat_resume  # what the shell asks of a stream's dialect


def test_a_header_hint_is_read_from_the_class() -> None:
    hinted = [(name, cls) for cls in FORMATS if (name := cls.hint) is not None]
    assert hinted == [((b"x-vercel-ai-ui-message-stream", b"v1"), AISDK)]
    assert registry.hinted([(b"X-Vercel-AI-UI-Message-Stream", b" V1 ")]) is AISDK
    assert registry.hinted([(b"x-vercel-ai-ui-message-stream", b"v2")]) is None  # the control


@pytest.mark.parametrize("name", sorted(COMPLETE))
def test_a_format_recognizes_its_own_end_marker_and_nothing_before_it(name: str) -> None:
    """What mid-stream recovery asks (did the body end with the format's end marker?) and what the check
    reports, from one class method."""
    cls = BY_NAME[name]
    assert END_MARKERS[name] == cls.end_marker
    events = [raw for raw in _raw_events(COMPLETE[name]) if raw != b"data: [DONE]\n\n" or name == "openai"]
    *before, last = events
    assert cls.is_end(last)
    dialect = detect(before[0])
    assert dialect is not None and type(dialect).is_end(last)  # asked of a stream's dialect too
    # The control: no event before the end is taken for it (a cut stream is not a finished one).
    assert not any(cls.is_end(raw) for raw in before if b"[DONE]" not in raw)


def test_formats_without_an_end_marker_owe_none() -> None:
    for cls in FORMATS:
        if cls.end_marker is None:
            assert cls.name not in END_MARKERS
            assert not cls.is_end(b"data: [DONE]\n\n") or cls.name in {"openai", "ai-sdk"}
    assert set(END_MARKERS) == set(COMPLETE)  # the formats with a clean end


def test_the_check_asks_the_classes_for_end_markers_and_error_shapes() -> None:
    for name, stream in COMPLETE.items():
        events = parse(stream.encode())
        assert protocol.is_end(events[-1]), name
        assert not protocol.is_end(events[0]), name
        assert protocol.protocol("sse", events[0]) in (None, name)
        for cls in FORMATS:
            frame = cls.named("text").error_event(INFO)
            if frame is not None:
                (event,) = parse(frame)
                assert "blocked" in (protocol.error_message(event) or ""), cls
    assert protocol.error_message(parse(COMPLETE["openai"].encode())[0]) is None  # the control


def test_each_format_names_its_content_filter_ending() -> None:
    for cls in FORMATS:
        ending = ending_for(cls.named("text"))
        assert type(ending) is cls.ending
        frame = ending.frame(INFO, ())
        assert frame is not None and b"content_filter" in frame.replace(b"content-filter", b"content_filter")
    # Formats with no in-band channel have no ending at all.
    assert type(ending_for(initial(headers.TEXT, CoreConfig()))) is NoEnding
    assert type(ending_for(initial(headers.BYTES, CoreConfig()))) is NoEnding
    # The control: the generic ending is not any format's own.
    own = {cls.ending for cls in FORMATS} - {Ending}
    assert {"ChatEnding", "AnthropicEnding", "ResponsesEnding", "UIMessageEnding"} <= {
        cls.__name__ for cls in own
    }
    assert not hasattr(endings_module, "_BY_NAME")  # no table of endings beside the classes
