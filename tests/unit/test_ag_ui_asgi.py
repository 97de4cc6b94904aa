"""AG-UI through the whole middleware, raw ASGI (a dict scope, a recording send) on asyncio and trio: an
app that streams a run as ``ag_ui.encoder.EventEncoder`` writes it, read back with the SDK's models and
the official client's verifier rules. Merged, yet the same messages and calls; an exception, a guard's
trip and a bad tool argument each end the run with a ``RUN_ERROR`` the client accepts; the app's own
``RUN_ERROR`` fails the span. Each with its control (the bare app, the stream read as generic SSE, no
guard, no check, a clean run)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from ag_ui.core import EventType, RunAgentInput, RunErrorEvent, Tool
from opentelemetry.trace import StatusCode

from sse_middleware import Blocked, StreamError, StreamingMiddleware, StreamingSettings
from sse_middleware._core.sse import parse

from ..support import ag_ui
from ..support.harness import SSE, Wire, body, scope, start
from ..support.otel import Otel

pytestmark = pytest.mark.anyio

WORDS = ["Here ", "is ", "some ", "code:\n", "```py\n", "print('你好 😀')\n", "```\n", "All ", "done."]
ARGS = ['{"city"', ': "Par', 'is", "da', 'ys": 3}']
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
    "additionalProperties": False,
}
REQUEST = RunAgentInput(
    thread_id="t1",
    run_id="r1",
    state={},
    messages=[],
    tools=[Tool(name="get_weather", description="The weather in a city", parameters=WEATHER)],
    context=[],
    forwarded_props={},
).model_dump_json(by_alias=True)


class App:
    """Reads its RunAgentInput, then streams ``frames`` a millisecond apart (a fast model); raises
    ``fail`` after ``fail_after`` frames."""

    def __init__(self, frames: list[bytes], fail: Exception | None = None, fail_after: int = 0) -> None:
        self.frames, self.fail, self.fail_after = frames, fail, fail_after

    async def __call__(self, scope_: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        await send(start(SSE))
        for i, frame in enumerate(self.frames):
            if self.fail is not None and i == self.fail_after:
                raise self.fail
            await send(body(frame))
            await anyio.sleep(0.001)
        await send(body(b"", more=False))


async def serve(app: Any, *, guards: list[Any] | None = None, wrap: bool = True, **settings: Any) -> Wire:
    wire = Wire(request_body=REQUEST.encode())
    handler = app
    if wrap:
        otel = settings.pop("otel", None)
        handler = StreamingMiddleware(
            app,
            StreamingSettings(heartbeat_interval=0, **settings),
            guards=guards or [],
            tracer_provider=otel.tp if otel is not None else None,
            meter_provider=otel.mp if otel is not None else None,
        )
    with anyio.fail_after(20):
        await handler(scope("POST"), wire.receive, wire.send)
    return wire


def frames(**kw: Any) -> list[bytes]:
    return ag_ui.encode(ag_ui.run(WORDS, args=ARGS, reasoning=["Let ", "me ", "see."], **kw))


async def test_a_run_is_merged_and_the_client_reads_the_same_messages(anyio_backend: str) -> None:
    bare = ag_ui.read((await serve(App(frames()), wrap=False)).data)
    wire = await serve(App(frames()), telemetry=False)
    through = ag_ui.read(wire.data)
    assert ag_ui.texts(through) == ag_ui.texts(bare)
    assert ag_ui.others(through) == ag_ui.others(bare)
    assert len(through) < len(bare)  # the control (the bare app) sends one event per delta
    assert wire.complete and through[-1].type == EventType.RUN_FINISHED


async def test_an_exception_mid_run_is_a_run_error(anyio_backend: str) -> None:
    app = App(frames(), RuntimeError("secret upstream detail"), fail_after=11)  # after two text deltas
    wire = await serve(app, telemetry=False)
    events = ag_ui.read(wire.data)  # every event valid, the verifier accepts the run as it ended
    last = events[-1]
    assert isinstance(last, RunErrorEvent) and last.code == "internal_error"
    assert "error id" in last.message and "secret" not in last.message
    assert ag_ui.texts(events)[("text", "msg1")] == "".join(WORDS[:2])  # what was sent before it
    # The control: the same failure through the middleware, the stream not read as AG-UI (generic SSE):
    # its ending is generic SSE's `event: error`, which an AG-UI client cannot read. So the RUN_ERROR
    # above is the AG-UI format's own ending (killed by AGUI.error_event falling back to the base one).
    app = App(frames(), RuntimeError("secret upstream detail"), fail_after=11)
    generic = parse((await serve(app, telemetry=False, dialect="sse")).data)[-1]
    assert generic.event == "error" and "RUN_ERROR" not in generic.data


async def test_a_stream_error_reaches_the_client_verbatim_with_its_code(anyio_backend: str) -> None:
    app = App(frames(), StreamError("The model is overloaded.", code="overloaded"), fail_after=8)
    last = ag_ui.read((await serve(app, telemetry=False)).data)[-1]
    assert isinstance(last, RunErrorEvent) and last.code == "overloaded"
    assert last.message.startswith("The model is overloaded.")


@pytest.mark.parametrize(
    ("part", "word", "key"),
    [
        ("text", "code", ("text", "msg1")),
        ("reasoning", "see", ("reasoning", "think1")),
        ("tool_arguments", "Par", ("args", "call1")),
    ],
)
async def test_a_guard_trip_is_a_content_filter_run_error(
    anyio_backend: str, part: str, word: str, key: tuple[str, str]
) -> None:
    seen: set[tuple[str, str | None]] = set()

    def guard(check: Any) -> None:
        seen.add((check.part, check.tool))
        if check.part == part and word in check.text:
            raise Blocked("Not allowed here.", code="policy")

    events = ag_ui.read((await serve(App(frames()), guards=[guard], telemetry=False)).data)
    last = events[-1]
    assert isinstance(last, RunErrorEvent) and last.code == "content_filter"
    assert "Not allowed here." in last.message
    # The control: without the guard, the whole run.
    whole = ag_ui.read((await serve(App(frames()), telemetry=False)).data)
    assert whole[-1].type == EventType.RUN_FINISHED
    sent, full = ag_ui.texts(events).get(key, ""), ag_ui.texts(whole)[key]
    assert word not in sent and full.startswith(sent) and word in full
    if part == "tool_arguments":
        assert ("tool_arguments", "get_weather") in seen  # named by the call's TOOL_CALL_START


@pytest.mark.parametrize("bad", [True, False])
async def test_tool_arguments_are_checked_against_the_run_inputs_tool_schema(
    anyio_backend: str, bad: bool
) -> None:
    args = ['{"city"', ': "Paris", "da', 'ys": "three"}'] if bad else ARGS
    app = App(ag_ui.encode(ag_ui.run(WORDS, args=args)))
    events = ag_ui.read((await serve(app, telemetry=False, validate_json=True)).data)
    texts = ag_ui.texts(events)
    if bad:
        last = events[-1]
        assert isinstance(last, RunErrorEvent) and last.code == "json_schema"
        assert texts[("args", "call1")] == '{"city": "Paris", "days": '  # up to the faulty character
        assert "get_weather" in last.message
    else:
        assert events[-1].type == EventType.RUN_FINISHED and texts[("args", "call1")] == "".join(ARGS)
    # The control: the check off, the arguments go out whole either way.
    off = ag_ui.read((await serve(App(ag_ui.encode(ag_ui.run(WORDS, args=args))), telemetry=False)).data)
    assert ag_ui.texts(off)[("args", "call1")] == "".join(args)


@pytest.mark.parametrize("fails", [True, False])
async def test_the_apps_own_run_error_fails_the_span_with_its_code(anyio_backend: str, fails: bool) -> None:
    otel = Otel()
    run = ag_ui.run(WORDS, finish=not fails)
    if fails:
        run.append(RunErrorEvent(message="Rate limited by the provider.", code="rate_limited"))
    wire = await serve(App(ag_ui.encode(run)), otel=otel)
    assert ag_ui.read(wire.data)[-1].type == (EventType.RUN_ERROR if fails else EventType.RUN_FINISHED)
    (span,) = otel.ours()
    attrs = span.attributes or {}
    assert attrs["gen_ai.provider.name"] == "ag-ui" and attrs["gen_ai.response.id"] == "r1"
    assert attrs["gen_ai.response.time_to_first_chunk"] is not None  # type: ignore[comparison-overlap]
    if fails:  # the stream said it failed: so does the span
        assert span.status.status_code is StatusCode.ERROR and attrs["error.type"] == "rate_limited"
    else:  # the control: a run that finished
        assert span.status.status_code is StatusCode.UNSET and "error.type" not in attrs
        assert tuple(attrs["gen_ai.response.finish_reasons"]) == ("success",)  # type: ignore[arg-type]


def test_the_request_body_is_a_run_agent_input_with_a_json_schema_tool() -> None:
    body_ = json.loads(REQUEST)
    assert body_["tools"][0]["parameters"] == WEATHER and "threadId" in body_
