"""AG-UI's ``*_CHUNK`` forms through the whole middleware with guards and ``validate_json`` (raw ASGI, on
asyncio and trio), each against the START/CONTENT/END form of the same text or a run that must pass:
an opening chunk's text is guarded and checked as its message's or call's; an id-less chunk continues
the call its type last named, for the output check and for the guard's tool name; and text that
mentions ``RUN_FINISHED`` is not the run's end."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    EventType,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallChunkEvent,
)

from sse_middleware import Blocked
from sse_middleware._core.dialects import AGUI

from ..support import ag_ui
from .test_ag_ui_asgi import ARGS, WORDS, App, serve

pytestmark = pytest.mark.anyio

START = RunStartedEvent(thread_id="t1", run_id="r1")
FINISH = RunFinishedEvent(thread_id="t1", run_id="r1")
SECRET = "SECRET is 42. "


def _blocks(word: str, seen: list[Any] | None = None) -> Any:
    def guard(check: Any) -> None:
        if seen is not None:
            seen.append(check)
        if word in check.text:
            raise Blocked("Not allowed here.", code="policy")

    return guard


@pytest.mark.parametrize("form", ["events", "chunk"])
async def test_text_in_an_opening_chunk_is_guarded_as_in_a_content_event(
    anyio_backend: str, form: str
) -> None:
    """The same text as START/CONTENT/END (the control) and as an opening chunk (which names the role,
    so it goes out unmerged): both end in a content filter, the word never sent. Killed by
    ``AGUI.texts`` returning nothing: the chunk is a structural event, and the client gets the word
    and ``RUN_FINISHED``."""
    if form == "events":
        body = [
            TextMessageStartEvent(message_id="m1", role="assistant"),
            TextMessageContentEvent(message_id="m1", delta=SECRET),
            TextMessageContentEvent(message_id="m1", delta="Bye."),
            TextMessageEndEvent(message_id="m1"),
        ]
    else:
        body = [
            TextMessageChunkEvent(message_id="m1", role="assistant", delta=SECRET),
            TextMessageChunkEvent(delta="Bye."),
        ]
    frames = ag_ui.encode([START, *body, FINISH])
    assert b"SECRET" in (await serve(App(frames), telemetry=False)).data  # unguarded, the word goes out
    wire = await serve(App(frames), guards=[_blocks("SECRET")], telemetry=False)
    last = ag_ui.read(wire.data)[-1]
    assert isinstance(last, RunErrorEvent) and last.code == "content_filter"
    assert b"SECRET" not in wire.data


@pytest.mark.parametrize("bad", [False, True])
async def test_an_opening_tool_chunks_arguments_are_checked_as_its_calls(
    anyio_backend: str, bad: bool
) -> None:
    """``validate_json``: the opening chunk (it names the tool) carries the start of the arguments. A
    valid call finishes; the control, a bad one, ends in ``json_schema`` at its faulty value. Killed by
    the output check not reading the opening chunk: it sees ``"Paris", ...`` alone, and the valid call
    ends in ``json_syntax``."""
    rest = '"Paris", "days": "three"}' if bad else '"Paris", "days": 3}'
    frames = ag_ui.encode(
        [
            START,
            ToolCallChunkEvent(tool_call_id="c1", tool_call_name="get_weather", delta='{"city": '),
            ToolCallChunkEvent(delta=rest),
            FINISH,
        ]
    )
    events = ag_ui.read((await serve(App(frames), telemetry=False, validate_json=True)).data)
    last = events[-1]
    if bad:
        assert isinstance(last, RunErrorEvent) and last.code == "json_schema", last
    else:
        assert last.type == EventType.RUN_FINISHED, last
        assert ag_ui.texts(events)[("args", "c1")] == '{"city": "Paris", "days": 3}'


def _two_calls() -> list[bytes]:
    """Two calls in the chunk form: each named by an opening chunk with no arguments, its arguments in
    one id-less chunk; the second's (``send_email``, not declared) must not be read as the first's."""
    return ag_ui.encode(
        [
            START,
            ToolCallChunkEvent(tool_call_id="c1", tool_call_name="get_weather", delta=""),
            ToolCallChunkEvent(delta='{"city": "Paris", "days": 1}'),
            ToolCallChunkEvent(tool_call_id="c2", tool_call_name="send_email", delta=""),
            ToolCallChunkEvent(delta='{"to": "a@b.c"}'),
            FINISH,
        ]
    )


async def test_an_idless_chunk_of_a_second_call_is_checked_as_the_second(anyio_backend: str) -> None:
    """A valid run: the second call's arguments are its own (no schema declared for it). Killed by
    ``delta()`` answering the second id-less chunk from the first's envelope, keyed to ``c1``: its
    checker then reads a second document and the run ends in ``RUN_ERROR`` ``json_syntax``. Control:
    the same run with a declared tool broken, which does end in an error."""
    events = ag_ui.read((await serve(App(_two_calls()), telemetry=False, validate_json=True)).data)
    assert events[-1].type == EventType.RUN_FINISHED, events[-1]
    texts = ag_ui.texts(events)
    assert (
        texts[("args", "c1")] == '{"city": "Paris", "days": 1}' and texts[("args", "c2")] == '{"to": "a@b.c"}'
    )
    broken = [f.replace(b'"days\\": 1', b'"days\\": \\"1\\"') for f in _two_calls()]
    control = ag_ui.read((await serve(App(broken), telemetry=False, validate_json=True)).data)[-1]
    assert isinstance(control, RunErrorEvent) and control.code == "json_schema"


async def test_an_idless_chunk_of_a_second_call_reaches_guards_with_its_tool(anyio_backend: str) -> None:
    """Guards are told the tool whose arguments they see: ``send_email`` for the second call's, which
    ``delta()`` keyed to the first call (``get_weather``) before its key was dropped on a new call."""
    seen: list[Any] = []
    await serve(App(_two_calls()), guards=[_blocks("nothing", seen)], telemetry=False)
    tools = {check.text: check.tool for check in seen if check.part == "tool_arguments" and check.final}
    assert tools == {'{"city": "Paris", "days": 1}': "get_weather", '{"to": "a@b.c"}': "send_email"}


async def test_text_that_mentions_run_finished_is_not_the_runs_end(anyio_backend: str) -> None:
    """The app's last frame is text quoting ``RUN_FINISHED``, then it raises: the run still ends in a
    ``RUN_ERROR``. Killed by ``is_end`` matching the bytes anywhere in the event (the ending is then
    left out as if the run had finished: the client's run ends with neither). Control: after a real
    ``RUN_FINISHED`` no error is added."""
    quoted = TextMessageContentEvent(message_id="m1", delta="It said RUN_FINISHED.")
    run = [START, TextMessageStartEvent(message_id="m1", role="assistant"), quoted]
    failing = App(ag_ui.encode([*run, FINISH]), RuntimeError("upstream gone"), fail_after=len(run))
    last = ag_ui.read((await serve(failing, telemetry=False)).data, verify=False)[-1]
    assert isinstance(last, RunErrorEvent), last
    assert not AGUI.is_end(ag_ui.encode([quoted])[0])
    finished = App(ag_ui.encode([START, FINISH, FINISH]), RuntimeError("cleanup failed"), fail_after=2)
    assert ag_ui.read((await serve(finished, telemetry=False)).data)[-1].type == EventType.RUN_FINISHED


@pytest.mark.parametrize(
    ("part", "word", "key"),
    [
        ("text", "Here", ("text", "msg1")),
        ("text", "code", ("text", "msg1")),
        ("tool_arguments", "city", ("args", "call1")),
    ],
)
async def test_the_chunk_helpers_run_is_guarded_in_every_chunk(
    anyio_backend: str, part: str, word: str, key: tuple[str, str]
) -> None:
    """``ag_ui.chunks()``, the chunk form as the project writes it (the first text and the first
    arguments in opening chunks): a word in an opening chunk (``Here``, ``city``) or in a continuation
    (``code``) ends the run in a content filter, the word never sent; and under ``validate_json`` the
    whole run finishes. Control: unguarded, the word goes out. Killed by ``AGUI.texts`` returning
    nothing (the opening chunks' words pass, and the arguments fail the check)."""
    frames = ag_ui.encode(ag_ui.chunks(WORDS, ARGS))
    whole = ag_ui.texts(ag_ui.read((await serve(App(frames), telemetry=False)).data))
    assert word in whole[key]

    def guard(check: Any) -> None:
        if check.part == part and word in check.text:
            raise Blocked("Not allowed here.", code="policy")

    events = ag_ui.read((await serve(App(frames), guards=[guard], telemetry=False)).data)
    last = events[-1]
    assert isinstance(last, RunErrorEvent) and last.code == "content_filter"
    assert word not in ag_ui.texts(events).get(key, "")
    checked = ag_ui.read((await serve(App(frames), telemetry=False, validate_json=True)).data)
    assert checked[-1].type == EventType.RUN_FINISHED and ag_ui.texts(checked) == whole


@pytest.mark.parametrize("guarded", [False, True])
async def test_an_opening_chunk_that_holds_the_faulty_value_is_not_sent(
    anyio_backend: str, guarded: bool
) -> None:
    """``validate_json``, the fault inside an opening chunk: the chunk cannot be cut, so it does not go out
    at all, and the run ends in ``json_schema`` (with and without guards: the plain pipeline's checked
    path and the guarded one). Control: the unchecked run sends it. Killed, unguarded, by
    ``Pipeline.carried`` ignoring the check's verdict (the chunk goes out with the faulty value); the
    guarded pipeline's gate drops what it holds at the fault either way."""
    frames = ag_ui.encode(
        [
            START,
            ToolCallChunkEvent(tool_call_id="c1", tool_call_name="get_weather", delta='{"city": 3, '),
            ToolCallChunkEvent(delta='"days": 3}'),
            FINISH,
        ]
    )
    assert b'{\\"city\\": 3' in (await serve(App(frames), telemetry=False)).data
    guards = [_blocks("nothing")] if guarded else []
    wire = await serve(App(frames), guards=guards, telemetry=False, validate_json=True)
    events = ag_ui.read(wire.data, verify=False)
    assert isinstance(events[-1], RunErrorEvent) and events[-1].code == "json_schema"
    assert b'{\\"city\\": 3' not in wire.data and ("args", "c1") not in ag_ui.texts(events)
