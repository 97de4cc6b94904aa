"""Recovery in the shell, raw ASGI (asyncio and trio): an app that fails on its first run and not on the
next, behind the middleware. The client's bytes are one stream; guards see one continuous text; the
telemetry has one span with an event per attempt; a body the middleware does not hold is not recovered;
a re-run that starts badly gives up with the first failure's ending; recovery off changes nothing."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from sse_middleware import Blocked, Check, StreamingMiddleware, StreamingSettings, override, recovery

from ..support.harness import Wire, body, scope, start, text_of_events
from ..support.otel import Otel
from ..support.upstream import ANSWER, anthropic_error, anthropic_events, chat_events, tokens
from .test_recovery_splice import anthropic_read, chat_read

pytestmark = pytest.mark.anyio
PARTS = tokens(ANSWER)


class Flaky:
    """A raw ASGI app: its runs write ``runs[i]`` (the last one for any later run); a run whose events
    end with ``None`` raises there. ``status``/``content_type`` of each run's start likewise."""

    def __init__(
        self, runs: Sequence[Sequence[bytes | None]], starts: Sequence[tuple[int, bytes]] = ()
    ) -> None:
        self.runs = runs
        self.starts = starts
        self.seen: list[Any] = []  # each run's recovery() and request body

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        request = await receive()
        n = len(self.seen)
        self.seen.append((recovery(scope), request.get("body", b"")))
        status, kind = (
            self.starts[min(n, len(self.starts) - 1)] if self.starts else (200, b"text/event-stream")
        )
        await send(start([(b"content-type", kind)], status=status))
        for event in self.runs[min(n, len(self.runs) - 1)]:
            if event is None:
                raise ConnectionResetError("the upstream went away")
            await send(body(event))
            await anyio.sleep(0)
        await send(body(b"", more=False))


async def serve(
    app: Any,
    wire: Wire | None = None,
    guards: Sequence[Any] = (),
    otel: Otel | None = None,
    method: str = "POST",
    path: str = "/s",
    **settings: Any,
) -> Wire:
    wire = wire or Wire(request_body=b'{"messages": []}')
    options = {"recover": "continue", "recover_backoff": 0.0, **settings}
    extra: dict[str, Any] = {"guards": list(guards)}
    if otel is not None:
        extra.update(tracer_provider=otel.tp, meter_provider=otel.mp)
    middleware = StreamingMiddleware(app, StreamingSettings(**options), **extra)
    with anyio.fail_after(10):
        await middleware(
            scope(method, headers=[(b"host", b"t"), (b"content-length", b"16")], path=path),
            wire.receive,
            wire.send,
        )
    return wire


def cut_chat(at: int) -> list[bytes | None]:
    return [*chat_events(PARTS, "chatcmpl-A")[: 1 + at], None]


async def test_one_stream_across_the_runs() -> None:
    app = Flaky([cut_chat(6), chat_events(PARTS, "chatcmpl-B")])
    wire = await serve(app)
    got = chat_read(wire.data)
    assert got["text"] == ANSWER and got["ids"] == {"chatcmpl-A"} and got["finishes"] == ["stop"]
    assert len(wire.starts) == 1 and wire.complete
    first, second = app.seen
    assert first == (None, b'{"messages": []}')
    assert second[0].attempt == 1 and second[0].reason == "exception" and second[0].text == "".join(PARTS[:6])
    assert second[1] == b'{"messages": []}'  # the body, replayed from memory


async def test_an_exception_after_the_end_marker_is_no_trigger() -> None:
    """[DONE] went out (without a finish reason before it, as some relays send it), then the app raised:
    the stream is over, nothing is re-run or spliced after it (before the fix: two re-runs, and a
    [DONE] from each after the first). Control: the same raise just before [DONE] is recovered."""
    events = chat_events(PARTS, "chatcmpl-A")
    no_finish = [*events[:-2], events[-1]]  # the role, the text, [DONE]
    app = Flaky([[*no_finish, None], events])
    wire = await serve(app)
    assert len(app.seen) == 1 and wire.data.count(b"[DONE]") == 1 and wire.complete
    assert chat_read(wire.data)["text"] == ANSWER and not chat_read(wire.data)["errors"]
    control = Flaky([[*no_finish[:-1], None], events])
    wire = await serve(control)
    assert len(control.seen) == 2 and chat_read(wire.data)["text"] == ANSWER


async def test_recovery_off_is_todays_stream() -> None:
    """The control: the same app without recovery ends with the middleware's error event, half an answer."""
    app = Flaky([cut_chat(6), chat_events(PARTS, "chatcmpl-B")])
    wire = await serve(app, recover="off")
    got = chat_read(wire.data)
    assert got["text"] == "".join(PARTS[:6]) and got["errors"] and len(app.seen) == 1


async def test_the_off_switch_per_request() -> None:
    """``override(scope, recover="off")`` wins over the middleware's setting (not so in LiteLLM #19077)."""

    async def opted_out(scope: dict[str, Any], receive: Any, send: Any) -> None:
        override(scope, recover="off")
        await app(scope, receive, send)

    app = Flaky([cut_chat(6), chat_events(PARTS, "chatcmpl-B")])
    wire = await serve(opted_out)
    got = chat_read(wire.data)
    assert got["text"] == "".join(PARTS[:6]) and got["errors"] and len(app.seen) == 1


async def test_guards_see_one_continuous_text() -> None:
    texts: list[str] = []

    def record(check: Check) -> None:
        if check.final:
            texts.append(check.text)

    app = Flaky([cut_chat(6), chat_events(PARTS, "chatcmpl-B")])
    wire = await serve(app, guards=[record])
    assert chat_read(wire.data)["text"] == ANSWER
    assert texts == [ANSWER]


@pytest.mark.parametrize("rerun_start", [(400, b"text/event-stream"), (200, b"application/json")])
async def test_a_rerun_that_starts_otherwise_gives_up_with_the_first_failure(
    rerun_start: tuple[int, bytes],
) -> None:
    first = [*anthropic_events(PARTS, "msg_A")[:8], anthropic_error()]
    app = Flaky([first, anthropic_events(PARTS, "msg_B")], starts=[(200, b"text/event-stream"), rerun_start])
    wire = await serve(app)
    got = anthropic_read(wire.data)
    assert got["errors"] == [{"type": "overloaded_error", "message": "Overloaded"}]  # the first failure's own
    assert got["text"] == "".join(PARTS[:5]) and len(app.seen) == 2


async def test_a_body_the_middleware_does_not_hold_is_not_recovered(caplog: pytest.LogCaptureFixture) -> None:
    big = json.dumps({"messages": [], "pad": "x" * (1 << 20)}).encode()
    app = Flaky([cut_chat(6), chat_events(PARTS, "chatcmpl-B")])
    with caplog.at_level(logging.WARNING, "sse_middleware"):
        wire = await serve(
            app, Wire(request_body=big), path=f"/big/{uuid.uuid4().hex}"
        )  # logged once per route
    got = chat_read(wire.data)
    assert got["text"] == "".join(PARTS[:6]) and got["errors"] and len(app.seen) == 1
    assert "not held whole" in caplog.text


async def test_one_span_with_an_event_per_attempt(otel: Otel) -> None:
    app = Flaky([cut_chat(6), cut_chat(3), chat_events(PARTS, "chatcmpl-B")])
    wire = await serve(app, otel=otel, recover_attempts=3)
    assert chat_read(wire.data)["text"] == ANSWER
    (span,) = otel.ours()
    events = [e for e in span.events if e.name == "sse_middleware.recovery"]
    assert [dict(e.attributes or {}) for e in events] == [
        {"attempt": 1, "reason": "exception", "characters": len("".join(PARTS[:6]))},
        {"attempt": 2, "reason": "exception", "characters": len("".join(PARTS[:6]))},
    ]
    attributes = dict(span.attributes or {})
    assert attributes["sse_middleware.recovery.attempts"] == 2
    assert attributes["sse_middleware.recovery.outcome"] == "recovered"
    assert span.status.is_ok
    (point,) = otel.points("sse_middleware.recoveries")
    assert point.value == 1
    assert dict(point.attributes) == {
        "sse_middleware.recovery.reason": "exception",
        "sse_middleware.recovery.outcome": "recovered",
    }


async def test_a_gave_up_stream_is_an_error_span(otel: Otel) -> None:
    app = Flaky([cut_chat(6)])
    wire = await serve(app, otel=otel)
    assert chat_read(wire.data)["errors"]
    (span,) = otel.ours()
    assert dict(span.attributes or {})["sse_middleware.recovery.outcome"] == "gave_up"
    assert not span.status.is_ok
    assert len(app.seen) == 3


async def test_a_resume_replays_the_spliced_stream() -> None:
    """A resumable stream's log holds what the client got: the seamless answer, not the runs."""
    app = Flaky([cut_chat(6), chat_events(PARTS, "chatcmpl-B")])
    settings = StreamingSettings(recover="continue", recover_backoff=0.0, resume=True, heartbeat_interval=0)
    middleware = StreamingMiddleware(app, settings)
    headers = [(b"host", b"t"), (b"content-length", b"16"), (b"authorization", b"Bearer a")]
    first = Wire(request_body=b'{"messages": []}')
    with anyio.fail_after(10):
        await middleware(scope("POST", headers=headers), first.receive, first.send)
    events = first.events()
    assert chat_read(first.data)["text"] == ANSWER
    again = Wire()
    resumed = scope("GET", headers=[*headers, (b"last-event-id", events[1].id.encode())])
    with anyio.fail_after(10):
        await middleware(resumed, again.receive, again.send)
    assert len(app.seen) == 2  # the resume did not reach the app
    replayed = again.events()
    assert [e.data for e in replayed] == [e.data for e in events[2:]]
    assert text_of_events(events[:2], "openai") + text_of_events(replayed, "openai") == ANSWER


async def test_a_client_that_leaves_is_no_trigger() -> None:
    app = Flaky(
        [[*chat_events(PARTS, "chatcmpl-A")[:4], *([b'data: {"x":1}\n\n'] * 50)], chat_events(PARTS, "B")]
    )
    wire = Wire(request_body=b'{"messages": []}', leave_at=3)
    await serve(app, wire)
    assert len(app.seen) == 1


async def test_a_guard_trip_is_no_trigger() -> None:
    def no_proxy(check: Check) -> None:
        if "proxy" in check.text:
            raise Blocked("no", code="banned")

    app = Flaky([chat_events(PARTS, "chatcmpl-A"), chat_events(PARTS, "chatcmpl-B")])
    wire = await serve(app, guards=[no_proxy])
    got = chat_read(wire.data)
    assert got["finishes"] == ["content_filter"] and "proxy" not in got["text"] and len(app.seen) == 1
