"""AG-UI as a format, sans I/O: detection, what merges (and the ``timestamp`` / ``rawEvent`` rule), the
error and content-filter endings, parts for guards and output checks, what telemetry and the check read.

The oracle is the protocol's own Python SDK: streams are written by ``ag_ui.encoder.EventEncoder`` from
``ag_ui.core`` models, and every event the pipeline sends is parsed back with the models' validation and
held to the official client's verifier rules (``tests/support/ag_ui.py``). The generic properties (text
per key under any chunking and timing, the fast lane, pass-through telemetry, several-fold merging) run
on AG-UI too, from ``tests/support/formats.py``'s table, in ``test_pipeline.py``.
"""

from __future__ import annotations

import json

import pytest
from ag_ui.core import (
    CustomEvent,
    EventType,
    ReasoningMessageContentEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallStartEvent,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from sse_middleware import StreamingSettings
from sse_middleware._check import protocol
from sse_middleware._check.diagnose import diagnose
from sse_middleware._check.measure import measure
from sse_middleware._core import headers
from sse_middleware._core.dialects import AGUI, detect, initial
from sse_middleware._core.dialects.endings import Ending, ending_for
from sse_middleware._core.errors import ErrorInfo
from sse_middleware._core.pipeline import Pipeline
from sse_middleware._core.sse import parse

from ..support import ag_ui
from ..support.tier import examples
from .test_check_diagnose import record
from .test_pipeline import cuts_st, drive, gaps_st, tokens_st

INFO = ErrorInfo("internal_error", "The server failed while streaming.", "abc123")
BLOCKED = ErrorInfo("content_filter", "no secrets here", "def456", "no_secrets")
WORDS = ["Here ", "is ", "code:\n", "```py\n", "print('你好 😀')\n", "```\n", "done."]
ARGS = ['{"city"', ': "Par', 'is", "da', 'ys": 3}']


def stream(events: list[object]) -> bytes:
    return b"".join(ag_ui.encode(events))  # type: ignore[arg-type]


def merged(events: list[object], *, gap: float = 0.001, **changes: object) -> bytes:
    """The stream through the pipeline, an event per body ``gap`` seconds apart (a fast model)."""
    frames = ag_ui.encode(events)  # type: ignore[arg-type]
    raw = b"".join(frames)
    cuts, at = [], 0
    for frame in frames:
        at += len(frame)
        cuts.append(at)
    return b"".join(drive(raw, cuts, [gap], StreamingSettings(**changes)))  # type: ignore[arg-type]


# -- detection ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "first",
    [
        RunStartedEvent(thread_id="t", run_id="r"),
        RunStartedEvent(thread_id="t", run_id="r", timestamp=1, protocol_version="1.0"),
        RunErrorEvent(message="no model configured"),  # the verifier lets a stream start with its error
    ],
)
def test_a_run_is_recognized_by_its_first_event(first: object) -> None:
    found = detect(ag_ui.encode([first])[0])  # type: ignore[list-item]
    assert isinstance(found, AGUI) and found.name == "ag-ui"


@pytest.mark.parametrize(
    "first",
    [
        b'data: {"type":"RUN_STARTED"}\n\n',  # no thread or run id: not the protocol's event
        b'data: {"type":"RUN_STARTED","threadId":1,"runId":"r"}\n\n',
        b'data: {"type":"RUN_STARTED","threadId":"t"}\n\n',  # a thread, but no run id
        b'data: {"type":"RUN_STARTED","threadId":"t","runId":7}\n\n',
        b'event: RUN_STARTED\ndata: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n',  # named
        ag_ui.encode([TextMessageStartEvent(message_id="m")])[0],  # AG-UI's names, but one event proves none
        ag_ui.encode([CustomEvent(name="x", value=1)])[0],
        b'data: {"type":"RUN_ERROR"}\n\n',
    ],
)
def test_no_guess_on_an_event_that_does_not_prove_the_protocol(first: bytes) -> None:
    found = detect(first)
    assert found is not None and found.name == "sse"


def test_the_setting_names_it_whatever_the_first_event() -> None:
    named = initial(headers.SSE, StreamingSettings(dialect="ag-ui").core())
    assert isinstance(named, AGUI)
    events = [
        TextMessageStartEvent(message_id="m"),
        *(TextMessageContentEvent(message_id="m", delta=w) for w in WORDS),
    ]
    assert ag_ui.deltas(ag_ui.read(merged(events, dialect="ag-ui"), verify=False)) < len(WORDS)
    assert ag_ui.deltas(ag_ui.read(merged(events), verify=False)) == len(WORDS)  # the control: not detected


# -- merging --------------------------------------------------------------------------------------------


def test_a_run_merges_per_message_and_call_and_the_client_reads_the_same() -> None:
    events = ag_ui.run(WORDS, args=ARGS, reasoning=["Let ", "me ", "think."])
    before, after = ag_ui.read(stream(events)), ag_ui.read(merged(events))
    assert ag_ui.texts(after) == ag_ui.texts(before)
    assert ag_ui.others(after) == ag_ui.others(before)
    assert ag_ui.deltas(after) < ag_ui.deltas(before) / 2
    # The control: coalescing off sends every event as it came.
    assert merged(events, coalesce=False) == stream(events)


def test_the_chunk_forms_merge_and_an_idless_chunk_continues_its_call() -> None:
    events = ag_ui.chunks(WORDS, ARGS)
    before, after = ag_ui.read(stream(events)), ag_ui.read(merged(events))
    assert ag_ui.texts(after) == ag_ui.texts(before)
    assert ag_ui.deltas(after) < ag_ui.deltas(before)
    # The opening chunks (a role, a tool name) go out as they are: they say more than their text.
    opening = [e for e in after if getattr(e, "tool_call_name", None) or getattr(e, "role", None)]
    assert [e.delta for e in opening] == [WORDS[0], ARGS[0]]  # type: ignore[attr-defined]


def test_the_merged_event_keeps_the_first_timestamp() -> None:
    events = ag_ui.run(WORDS, timestamps=True)
    contents = [e for e in events if e.type == EventType.TEXT_MESSAGE_CONTENT]
    out = [e for e in ag_ui.read(merged(events)) if e.type == EventType.TEXT_MESSAGE_CONTENT]
    assert len(out) < len(contents)
    rest = list(contents)
    for event in out:  # each merged event is the run of events whose text it holds, stamped as the first
        assert event.timestamp == rest[0].timestamp
        text = ""
        while text != event.delta:
            text += rest.pop(0).delta
    assert not rest
    # The control: without coalescing, every event keeps its own.
    alone = ag_ui.read(merged(events, coalesce=False))
    assert [e.timestamp for e in alone if e.type == EventType.TEXT_MESSAGE_CONTENT] == [
        c.timestamp for c in contents
    ]


def test_an_event_with_raw_event_or_metadata_is_never_merged() -> None:
    plain = [TextMessageContentEvent(message_id="m", delta=w) for w in WORDS]
    marked = [
        TextMessageContentEvent(message_id="m", delta=w, raw_event={"p": i}) for i, w in enumerate(WORDS)
    ]
    tagged = [
        TextMessageContentEvent(message_id="m", delta=w, metadata={"k": i}) for i, w in enumerate(WORDS)
    ]
    head = [RunStartedEvent(thread_id="t", run_id="r"), TextMessageStartEvent(message_id="m")]
    for events in (marked, tagged):
        assert merged([*head, *events]) == stream([*head, *events])  # byte for byte
    assert ag_ui.deltas(ag_ui.read(merged([*head, *plain]))) < len(WORDS)  # the control


def test_calls_and_messages_never_merge_across_ids() -> None:
    head = [RunStartedEvent(thread_id="t", run_id="r")]
    calls = [
        ToolCallStartEvent(tool_call_id="a", tool_call_name="f"),
        ToolCallStartEvent(tool_call_id="b", tool_call_name="g"),
    ]
    args = [ToolCallArgsEvent(tool_call_id="ab"[i % 2], delta=d) for i, d in enumerate(ARGS * 2)]
    out = ag_ui.read(merged([*head, *calls, *args]))
    assert ag_ui.texts(out) == ag_ui.texts(ag_ui.read(stream([*head, *calls, *args])))
    assert ag_ui.deltas(out) == len(args)  # alternating ids: nothing consecutive to merge


@settings(max_examples=examples(200), deadline=None)
@given(tokens_st, tokens_st, cuts_st, gaps_st, st.booleans())
def test_every_event_we_send_is_one_the_sdk_and_the_client_accept(
    text: list[str], args: list[str], cuts: list[int], gaps: list[float], chunked: bool
) -> None:
    """Under any chunking and timing: each event validates against ``ag_ui.core``, the verifier accepts
    the run, the text per message and call is the same, and the other events keep their order."""
    events = ag_ui.chunks(text, args) if chunked else ag_ui.run(text, args=args, reasoning=text[:3])
    raw = stream(events)
    out = ag_ui.read(b"".join(drive(raw, cuts, gaps, StreamingSettings())))
    before = ag_ui.read(raw)
    assert ag_ui.texts(out) == ag_ui.texts(before)
    assert ag_ui.others(out) == ag_ui.others(before)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.text(max_size=30),
    st.text(st.characters(blacklist_characters='"\\\r\n', blacklist_categories=("Cs",)), max_size=8),
    st.sampled_from(["TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT", "TOOL_CALL_ARGS"]),
    st.none() | st.integers(0, 2**53),
)
def test_the_fast_read_agrees_with_the_full_parse(text: str, ident: str, kind: str, at: int | None) -> None:
    field = "toolCallId" if kind == "TOOL_CALL_ARGS" else "messageId"
    obj = {"type": kind, **({"timestamp": at} if at is not None else {}), field: ident, "delta": text}
    raw = b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"
    assert AGUI().read(raw) == AGUI().full_read(raw)
    # A mismatched id field never takes the fast read (the control: the full parse refuses it too).
    wrong = raw.replace(field.encode(), b"toolCallId" if field == "messageId" else b"messageId")
    assert AGUI().read(wrong) is None


_chunk_events = st.lists(
    st.tuples(
        st.sampled_from(["TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK"]),
        st.sampled_from([None, "a", "b"]),  # the id it names, or none: it continues the last named
        st.booleans(),  # an opening chunk: it names a role or a tool too
        st.sampled_from(["", "x", "y z"]),
    ),
    max_size=12,
)


def _chunk(kind: str, ident: str | None, opening: bool, text: str) -> bytes:
    field = "toolCallId" if kind == "TOOL_CALL_CHUNK" else "messageId"
    names = (
        ({"toolCallName": f"tool_{ident}"} if field == "toolCallId" else {"role": "assistant"})
        if opening
        else {}
    )
    obj = {"type": kind, **({field: ident} if ident else {}), **names, "delta": text}
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


@settings(max_examples=examples(300), deadline=None)
@given(_chunk_events)
def test_delta_keys_an_idless_chunk_as_the_full_read_does(
    events: list[tuple[str, str | None, bool, str]],
) -> None:
    """``delta()`` answers an event shaped like the last delta from that delta's key without a parse;
    an id-less chunk's shape names no id, so after a chunk naming another id it must read again. Each
    reader sees every event. Killed by ``_continued`` not dropping the last delta (an id-less chunk
    of a second call keyed to the first), and by a continuation of the *first* named chunk."""
    fast, full = AGUI(), AGUI()
    for event in events:
        raw = _chunk(*event)
        one, two = fast.delta(raw), full.full_read(raw)
        assert (one and (one.key, one.text)) == (two and (two.key, two.text)), event


def test_an_idless_chunk_continues_the_last_named_one() -> None:
    """Named ``a``, named ``b``, then id-less: ``b``'s (the control, ``a`` alone first, is ``a``'s)."""
    dialect = AGUI()
    for ident in ("a", "b"):
        assert dialect.full_read(_chunk("TOOL_CALL_CHUNK", ident, False, "x")) is not None
    found = dialect.full_read(_chunk("TOOL_CALL_CHUNK", None, False, "y"))
    assert found is not None and found.key == ("TOOL_CALL_CHUNK", "b", None)
    control = AGUI()
    control.full_read(_chunk("TOOL_CALL_CHUNK", "a", False, "x"))
    found = control.full_read(_chunk("TOOL_CALL_CHUNK", None, False, "y"))
    assert found is not None and found.key == ("TOOL_CALL_CHUNK", "a", None)


# -- the endings ----------------------------------------------------------------------------------------


def _ended(events: list[object], frame: bytes | None) -> list[object]:
    assert frame is not None
    return ag_ui.read(stream(events) + frame)


# Inside the text message (just opened, mid-text), inside the tool call, after RUN_FINISHED.
@pytest.mark.parametrize("cut", [2, 5, 12, 18])
def test_an_error_after_the_start_is_a_run_error_the_client_accepts(cut: int) -> None:
    events = ag_ui.run(WORDS, args=ARGS)[:cut]
    pipe = Pipeline(headers.SSE, StreamingSettings().core(), None)
    for raw in ag_ui.encode(events):
        pipe.feed(raw, 0.0)
    out = _ended(events, pipe.error_frame(INFO))
    last = out[-1]
    assert isinstance(last, RunErrorEvent)
    assert last.code == "internal_error" and "abc123" in last.message and INFO.message in last.message
    # The control: generic SSE's error event is no AG-UI event (the client's parser would reject it).
    generic = Pipeline(headers.SSE, StreamingSettings(dialect="sse").core(), None).error_frame(INFO)
    with pytest.raises(AssertionError, match="unnamed"):
        ag_ui.read(stream(events) + (generic or b""))


def test_a_guard_trip_ends_the_run_with_a_content_filter_run_error() -> None:
    events = ag_ui.run(WORDS, args=ARGS)[:6]
    ending = ending_for(AGUI())
    for raw in ag_ui.encode(events):
        ending.see(raw)
    last = _ended(events, ending.frame(BLOCKED, ()))[-1]
    assert isinstance(last, RunErrorEvent)
    assert last.code == "content_filter" and "no secrets here" in last.message and "def456" in last.message
    # The control: the generic ending (a format without its own) is no AG-UI event.
    with pytest.raises(AssertionError, match="unnamed"):
        _ended(events, Ending(AGUI()).frame(BLOCKED, ()))


# -- parts, telemetry, the check ------------------------------------------------------------------------


def test_parts_name_a_tool_call_by_its_start_and_an_opening_chunk() -> None:
    dialect = AGUI()
    start, *rest = ag_ui.encode(
        [
            ToolCallStartEvent(tool_call_id="c", tool_call_name="get_weather"),
            ToolCallArgsEvent(tool_call_id="c", delta="{"),
            TextMessageContentEvent(message_id="m", delta="hi"),
            ReasoningMessageContentEvent(message_id="r", delta="hmm"),
        ]
    )
    delta = dialect.delta(rest[0])
    assert delta is not None and dialect.part(delta.key).name is None  # the control: the start unseen
    dialect.see(start)
    assert dialect.part(delta.key) == ("tool_arguments", "get_weather")
    text, thinking = dialect.delta(rest[1]), dialect.delta(rest[2])
    assert text is not None and dialect.part(text.key).kind == "text"
    assert thinking is not None and dialect.part(thinking.key).kind == "reasoning"
    chunked = AGUI()
    opening, idless = ag_ui.encode(ag_ui.chunks([], ["{", "}"]))[1:3]
    assert chunked.delta(opening) is None  # goes out as it is, and names its call
    found = chunked.delta(idless)
    assert found is not None and chunked.part(found.key) == ("tool_arguments", "get_weather")


def test_telemetry_reads_the_run_id_the_outcome_usage_and_the_apps_own_run_error() -> None:
    dialect = AGUI()
    started, content, empty, finished, failed = ag_ui.encode(
        [
            RunStartedEvent(thread_id="t", run_id="run-7"),
            TextMessageContentEvent(message_id="m", delta="hi"),
            TextMessageContentEvent(message_id="m", delta=""),
            RunFinishedEvent.model_validate(
                {
                    "threadId": "t",
                    "runId": "run-7",
                    "usage": [
                        {"model": "gpt", "inputTokens": 5, "outputTokens": 7},
                        {"model": "gpt", "outputTokens": 1},
                    ],
                }
            ),
            RunErrorEvent(message="quota", code="rate_limited"),
        ]
    )
    assert dialect.content(content) and not dialect.content(empty) and not dialect.content(started)
    assert all(dialect.wants_info(raw) for raw in (started, finished, failed)) and not dialect.wants_info(
        content
    )
    assert dialect.info(started) == {"response_id": "run-7"}
    assert dialect.info(finished) == {
        "finish_reason": "success",
        "input_tokens": 5,
        "output_tokens": 8,
        "model": "gpt",
    }
    assert dialect.info(failed) == {"finish_reason": "error", "error_type": "rate_limited"}


def test_the_check_knows_an_ag_ui_run_its_end_and_its_errors() -> None:
    events = ag_ui.encode(ag_ui.run(["Hel", "lo"]))
    parsed = parse(b"".join(events))
    assert protocol.content_reader()(parsed[0])[0] == "ag-ui"
    assert protocol.protocol("sse", parsed[0]) == "ag-ui"  # owed even when another reader was picked
    assert protocol.is_end(parsed[-1]) and not any(protocol.is_end(e) for e in parsed[:-1])
    (error,) = parse(ag_ui.encode([RunErrorEvent(message="quota", code="rate_limited")])[0])
    assert protocol.error_message(error) == "quota"
    reads = [(0.1 + i * 0.05, e) for i, e in enumerate(events)]
    cut, whole = record(reads[:-1]), record(reads)
    assert "no_end_marker" in {f.code for f in diagnose(cut, measure(cut)).findings}  # no RUN_FINISHED
    assert "no_end_marker" not in {f.code for f in diagnose(whole, measure(whole)).findings}  # the control
