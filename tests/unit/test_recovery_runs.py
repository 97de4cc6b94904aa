"""Recovery in the shell, raw ASGI (asyncio and trio), for how a run of the app ends or never starts: a
re-run whose answer is whole without its end marker, a silence before the first event, a re-run that
raises a 4xx or a Retry-After, a re-run slow to start, and a stream that stalls on every run.

Each app is a :class:`Script`: per run, its steps in order (the response's start, events, a sleep, a
silence until cancelled, an exception to raise).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

import anthropic
import anyio
import httpx
import httpx2
import openai
import pytest

from sse_middleware import recovery

from ..support.harness import body, start
from ..support.upstream import ANSWER, anthropic_events, chat_events, tokens
from .test_recovery_asgi import serve
from .test_recovery_splice import anthropic_read, chat_read

pytestmark = pytest.mark.anyio
PARTS = tokens(ANSWER)
START = (200, b"text/event-stream")
STALL = "stall"  # silence until the run is cancelled
Step = bytes | float | str | tuple[int, bytes] | BaseException


class Script:
    """A raw ASGI app whose run ``i`` plays ``runs[i]`` (the last one for any later run), then ends its
    body; ``seen`` holds each run's ``recovery()``."""

    def __init__(self, runs: Sequence[Sequence[Step]]) -> None:
        self.runs = runs
        self.seen: list[Any] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        n = len(self.seen)
        self.seen.append(recovery(scope))
        for step in self.runs[min(n, len(self.runs) - 1)]:
            if isinstance(step, BaseException):
                raise step
            if isinstance(step, float):
                await anyio.sleep(step)
            elif step == STALL:
                await anyio.sleep_forever()
            elif isinstance(step, tuple):
                await send(start([(b"content-type", step[1])], status=step[0]))
            elif isinstance(step, bytes):
                await send(body(step))
                await anyio.sleep(0)
        await send(body(b"", more=False))


def cut() -> ConnectionResetError:
    return ConnectionResetError("the upstream went away")


def response(status: int, **headers: str) -> httpx2.Response:
    """The official SDKs' response (they ship their own httpx, ``httpx2``)."""
    return httpx2.Response(status, headers=headers, request=httpx2.Request("POST", "http://upstream/v1/x"))


def openai_error(status: int, **headers: str) -> openai.APIStatusError:
    kinds = {400: openai.BadRequestError, 429: openai.RateLimitError, 500: openai.InternalServerError}
    return kinds[status]("the upstream refused", response=response(status, **headers), body=None)


def errors_without_ids(data: bytes) -> list[Any]:
    return [re.sub(r" ?\(error id: \w+\)", "", str(e)) for e in chat_read(data)["errors"]]


# -- a re-run whose answer is whole, then no end marker ----------------------------------------------
@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@pytest.mark.parametrize("ending", ["returns", "raises", "no final body"])
async def test_a_whole_rerun_without_its_end_marker_ends_cleanly(fmt: str, ending: str) -> None:
    """The re-run (a fallback that writes no [DONE] / message_stop) sends the rest and its finish reason,
    then its body ends, or it raises, or it returns without a final body: the client reads a whole answer
    with the format's end marker, and no error (before the fix: the first failure's error after it)."""
    if fmt == "openai":
        first: list[Step] = [START, *chat_events(PARTS, "chatcmpl-A")[:7], cut()]
        rerun: list[Step] = [START, *chat_events(PARTS, "chatcmpl-B")[:-1]]
    else:
        first = [START, *anthropic_events(PARTS, "msg_A")[:9], cut()]
        rerun = [START, *anthropic_events(PARTS, "msg_B")[:-1]]
    if ending == "raises":
        rerun.append(cut())
    app = Script([first, rerun])
    if ending == "no final body":
        app = _without_final_body(app)
    wire = await serve(app)
    assert len(app.seen) == 2 and wire.complete
    if fmt == "openai":
        got = chat_read(wire.data)
        assert got["text"] == ANSWER and got["finishes"] == ["stop"] and got["done"]
        assert not got["errors"] and wire.data.endswith(b"data: [DONE]\n\n")
    else:
        read = anthropic_read(wire.data)
        assert read["text"] == ANSWER and read["stop"] == "end_turn" and read["ended"]
        assert not read["errors"] and not read["open"]


def _without_final_body(app: Script) -> Any:
    """The app's runs, each returning without its final body (the server ends the response)."""

    class Returns(Script):
        async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
            async def no_final(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.body" and not message.get("more_body"):
                    return
                await send(message)

            await Script.__call__(self, scope, receive, no_final)

    returns = Returns(app.runs)
    returns.seen = app.seen
    return returns


async def test_a_first_run_whole_without_its_end_marker_is_as_without_recovery() -> None:
    """The control: the same ending on a first run is the app's own stream, unchanged (no marker added),
    and no re-run (before the fix, the same bytes, after a "recovery gave up" warning)."""
    events = chat_events(PARTS, "chatcmpl-A")[:-1]
    app = Script([[START, *events]])
    wire = await serve(app)
    off = await serve(Script([[START, *events]]), recover="off")
    assert wire.data == off.data and len(app.seen) == 1
    got = chat_read(wire.data)
    assert got["text"] == ANSWER and not got["done"] and not got["errors"]


# -- a silence before the first event ----------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_a_stall_before_the_first_event_is_retried_with_auto(fmt: str) -> None:
    """Headers, then nothing (a slow prefill): the stall timeout fires before any event, the format is
    still unknown (``dialect="auto"``), and the app runs again with the same body (before the fix:
    "not recoverable: no format recovery reads")."""
    events = chat_events(PARTS, "chatcmpl-B") if fmt == "openai" else anthropic_events(PARTS, "msg_B")
    app = Script([[START, STALL], [START, *events]])
    wire = await serve(app, stall_timeout=0.3)
    assert len(app.seen) == 2
    again = app.seen[1]
    assert (again.reason, again.text, again.dialect) == ("stall", "", "")
    read = chat_read(wire.data) if fmt == "openai" else anthropic_read(wire.data)
    assert read["text"] == ANSWER and not read["errors"]


async def test_a_stall_before_the_first_event_control_without_recovery() -> None:
    app = Script([[START, STALL], [START, *chat_events(PARTS, "chatcmpl-B")]])
    wire = await serve(app, stall_timeout=0.3, recover="off")
    assert len(app.seen) == 1 and chat_read(wire.data)["errors"][0]["type"] == "timeout"


# -- a re-run that raises a 4xx before its start -------------------------------------------------------
def _request_faults() -> list[BaseException]:
    class Refused(Exception):
        status_code = 422

    anthropic_bad = anthropic.BadRequestError(
        "prefill not supported", response=response(400), body={"type": "error"}
    )
    request = httpx.Request("POST", "http://upstream/v1/x")
    wrapped = RuntimeError("the relay failed")
    wrapped.__cause__ = openai_error(400)
    return [
        openai_error(400),
        anthropic_bad,
        httpx.HTTPStatusError("400", request=request, response=httpx.Response(400, request=request)),
        Refused("unprocessable"),
        wrapped,
    ]


@pytest.mark.parametrize("fault", _request_faults(), ids=lambda e: type(e).__name__)
async def test_a_rerun_that_raises_a_4xx_is_not_run_again(fault: BaseException) -> None:
    """The client gets the first failure's ending (here the first run's exception, as ``recover="off"``
    reports it), never the re-run's 400, and the app runs twice, not three times."""
    first: list[Step] = [START, *chat_events(PARTS, "chatcmpl-A")[:7], cut()]
    app = Script([first, [fault]])
    wire = await serve(app, error_detail=True)
    off = await serve(Script([first]), error_detail=True, recover="off")
    assert len(app.seen) == 2
    assert chat_read(wire.data)["text"] == "".join(PARTS[:6])
    assert errors_without_ids(wire.data) == errors_without_ids(off.data)
    assert "ConnectionResetError" in errors_without_ids(wire.data)[0]


async def test_the_first_failures_own_event_is_what_the_client_gets_after_a_4xx_rerun() -> None:
    """A first failure that was the upstream's error event: that event, held back while recovery tried."""
    first: list[Step] = [START, *anthropic_events(PARTS, "msg_A")[:8]]
    overloaded = b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"O"}}\n\n'
    app = Script([[*first, overloaded], [openai_error(400)]])
    wire = await serve(app)
    got = anthropic_read(wire.data)
    assert got["errors"] == [{"type": "overloaded_error", "message": "O"}] and len(app.seen) == 2


@pytest.mark.parametrize("status", [500, 429])
async def test_a_rerun_that_raises_a_retryable_status_is_run_again(status: int) -> None:
    """The control: a 5xx, and a 429 (the rate limit says "later", not "wrong"), use every attempt."""
    first: list[Step] = [START, *chat_events(PARTS, "chatcmpl-A")[:7], cut()]
    app = Script([first, [openai_error(status)]])
    wire = await serve(app)
    assert len(app.seen) == 3 and chat_read(wire.data)["errors"]


# -- Retry-After ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("headers", "waited"), [({"retry-after": "0.2"}, "0.2"), ({}, "0")])
async def test_a_retry_after_is_the_wait_before_the_next_rerun(
    headers: dict[str, str], waited: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The re-run's 429 asks for 0.2 s: the next re-run waits that long, not the backoff (0 here); the
    control without the header waits the backoff."""
    first: list[Step] = [START, *chat_events(PARTS, "chatcmpl-A")[:7], cut()]
    rerun: list[Step] = [START, *chat_events(PARTS, "chatcmpl-B")]
    app = Script([first, [openai_error(429, **headers)], rerun])
    with caplog.at_level(logging.DEBUG, "sse_middleware"):
        wire = await serve(app)
    assert len(app.seen) == 3 and chat_read(wire.data)["text"] == ANSWER
    assert f"re-run 2 in {waited} s" in caplog.text


async def test_a_retry_after_past_the_maximum_gives_up_at_once() -> None:
    """An upstream that asks for more than 30 s is not asked again: the client gets the first failure now
    (the control above, without the header, runs the app a third time)."""
    first: list[Step] = [START, *chat_events(PARTS, "chatcmpl-A")[:7], cut()]
    app = Script([first, [openai_error(429, **{"retry-after": "120"})], [START, *chat_events(PARTS, "B")]])
    wire = await serve(app)
    assert len(app.seen) == 2 and chat_read(wire.data)["errors"]


# -- a re-run slow to start ----------------------------------------------------------------------------
async def test_a_rerun_slow_to_start_is_held_to_a_first_runs_clock() -> None:
    """The re-run's upstream answers after three stall timeouts (a loaded machine, a cold connection):
    its wait before its response starts is not silence, as a first run's is not (before the fix: each
    re-run "stalled", and recovery gave up)."""
    first: list[Step] = [START, *chat_events(PARTS, "chatcmpl-A")[:7], cut()]
    app = Script([first, [0.9, START, *chat_events(PARTS, "chatcmpl-B")]])
    wire = await serve(app, stall_timeout=0.3)
    got = chat_read(wire.data)
    assert got["text"] == ANSWER and not got["errors"] and len(app.seen) == 2


async def test_a_rerun_that_never_starts_is_bounded_by_recover_start_timeout() -> None:
    """The control: past ``recover_start_timeout`` the re-run is cancelled and counts as a failed attempt
    (reason ``stall``); after the last, the client gets the first failure."""
    first: list[Step] = [START, *chat_events(PARTS, "chatcmpl-A")[:7], cut()]
    app = Script([first, [STALL]])
    wire = await serve(app, stall_timeout=0.3, recover_start_timeout=0.2)
    assert len(app.seen) == 3 and app.seen[2].reason == "stall"
    got = chat_read(wire.data)
    assert got["text"] == "".join(PARTS[:6]) and got["errors"][0]["type"] == "server_error"


# -- stalls ----------------------------------------------------------------------------------------------
async def test_a_stalled_run_is_cancelled_and_the_rerun_continues() -> None:
    """A first run silent mid-answer is cancelled (only the run: the client's stream goes on), and the
    re-run completes the answer; a run left running would hold the stream until the harness's bound."""
    app = Script([[START, *chat_events(PARTS, "chatcmpl-A")[:7], STALL], [START, *chat_events(PARTS, "B")]])
    wire = await serve(app, stall_timeout=0.3)
    got = chat_read(wire.data)
    assert got["text"] == ANSWER and not got["errors"] and app.seen[1].reason == "stall"


async def test_a_stream_stalling_on_every_run_ends_with_the_timeout_error() -> None:
    app = Script([[START, *chat_events(PARTS, "chatcmpl-A")[:7], STALL]])
    wire = await serve(app, stall_timeout=0.3, recover_attempts=1)
    got = chat_read(wire.data)
    assert len(app.seen) == 2 and got["text"] == "".join(PARTS[:6])
    assert [e["type"] for e in got["errors"]] == ["timeout"]
