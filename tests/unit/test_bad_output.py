"""Bad output from the app: each case has one defined outcome, one clear log line, and never harms other
streams. Raw ASGI (a recording server) for precision; each outcome is shown against the same app without
the middleware (the control: what the server would get instead).

Outcomes (docs/reliability.md, "When the app misbehaves"):

* a body that is not bytes: bytes-like (bytearray, memoryview) is accepted as bytes; anything else makes
  the app's ``send`` raise ``TypeError`` naming the type; the stream ends with its error event (cut, for
  text/plain) and one ERROR line.
* a second ``http.response.start``: never reaches the server; ``send`` raises ``RuntimeError``; error event.
* a body before the start: not a stream yet, so it goes to the server untouched (its error, as without us).
* messages after the final body: dropped (the client already has a complete response), one WARNING line
  per response, the app is not disturbed.
* invalid UTF-8: SSE bytes go through untouched (every client decodes with U+FFFD itself); text/plain is
  never altered: invalid bytes, a cut UTF-8 sequence at the end or another charset reach the client as sent;
  a lone surrogate escaped in OpenAI JSON (valid JSON) reaches the client as the same string.
* an endless event with no terminator: held up to ``max_event_bytes`` in linear time, then streamed through;
  nothing is ever written inside it; if the app then fails the response is cut (no error event inside).
* ``http.response.trailers``: forwarded after the final body; when the middleware ends a stream that
  declared trailers it sends empty trailers, so the server can finish the response.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tracemalloc
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from sse_middleware import StreamingMiddleware, StreamingSettings

from ..support.harness import PLAIN, SSE, Wire, body, scope, start, text_of_events

pytestmark = pytest.mark.timeout(120)
OK = [b"data: one\n\n", b"data: two\n\n"]


def run(app: Any, wrap: bool = True, **settings: Any) -> Wire:
    """One request through ``app`` (wrapped in the middleware unless ``wrap`` is False)."""
    wire = Wire()
    target = StreamingMiddleware(app, StreamingSettings(telemetry=False, **settings)) if wrap else app

    async def go() -> None:
        with anyio.fail_after(30):
            try:
                await target(scope(), wire.receive, wire.send)
            except Exception as exc:  # what the server would see raised from the app
                wire.messages.append({"type": "raised", "exc": exc})

    anyio.run(go)
    return wire


def scripted(*messages: Any, headers: list[tuple[bytes, bytes]] = SSE, fail: bool = False) -> Any:
    """An app that sends the start and then ``messages`` (non-dicts become more_body bodies)."""

    async def app(scope_: Any, receive: Any, send: Any) -> None:
        await send(start(headers))
        for m in messages:
            await send(m if isinstance(m, dict) else body(m))
        if fail:
            raise RuntimeError("app failed")

    return app


def ours(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("sse_middleware") and r.levelno >= logging.WARNING]


def raised(wire: Wire) -> list[Exception]:
    return [m["exc"] for m in wire.messages if m["type"] == "raised"]


def sent(wire: Wire) -> list[dict[str, Any]]:
    return [m for m in wire.messages if m["type"] != "raised"]


# -- a body that is not bytes ------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["data: str\n\n", None, 42, {"x": 1}], ids=["str", "None", "int", "dict"])
def test_a_body_that_is_not_bytes_ends_the_stream_with_one_clear_line(
    bad: Any, caplog: pytest.LogCaptureFixture
) -> None:
    app = scripted(OK[0], {"type": "http.response.body", "body": bad, "more_body": True}, OK[1])
    wire = run(app)
    events = wire.events()
    assert [e.data for e in events[:1]] == ["one"] and events[-1].event == "error"
    assert wire.complete and not raised(wire)  # handled: the server sees a clean end
    lines = ours(caplog)
    assert len(lines) == 1, [r.getMessage() for r in lines]
    text = lines[0].getMessage() + (str(lines[0].exc_info[1]) if lines[0].exc_info else "")
    assert "must be bytes" in text and type(bad).__name__ in text, text
    control = run(app, wrap=False)  # the control: without us the server is handed the bad body
    assert any(m.get("body") is bad for m in sent(control))


@pytest.mark.parametrize("kind", [bytearray, memoryview], ids=["bytearray", "memoryview"])
def test_bytes_like_bodies_are_accepted_as_bytes(kind: Any, caplog: pytest.LogCaptureFixture) -> None:
    app = scripted(kind(OK[0]), kind(OK[1]), body(b"", more=False))
    wire, control = run(app), run(app, wrap=False)
    assert wire.data == control.data == b"".join(OK) and wire.complete
    assert not ours(caplog)


# -- the ASGI message sequence -------------------------------------------------------------------------


def test_a_second_response_start_never_reaches_the_server(caplog: pytest.LogCaptureFixture) -> None:
    app = scripted(OK[0], start(), OK[1], body(b"", more=False))
    wire = run(app)
    assert len(wire.starts) == 1
    assert wire.events()[-1].event == "error" and wire.complete
    assert len(ours(caplog)) == 1
    assert len(run(app, wrap=False).starts) == 2  # the control: the server gets both


def test_a_body_before_the_start_is_left_to_the_server(caplog: pytest.LogCaptureFixture) -> None:
    early = body(b"data: early\n\n")

    async def app(scope_: Any, receive: Any, send: Any) -> None:
        await send(early)
        await send(start())
        await send(body(b"", more=False))

    wire, control = run(app), run(app, wrap=False)
    assert sent(wire)[0] == sent(control)[0] == early  # exactly what the server would get without us
    assert not ours(caplog)


def test_messages_after_the_final_body_go_to_the_server(caplog: pytest.LogCaptureFixture) -> None:
    """After its own final body the app's time is its own: whatever it sends then is the server's to judge
    (uvicorn raises), exactly as without us; nothing of ours is logged."""
    app = scripted(OK[0], body(OK[1], more=False), body(b"data: late\n\n"), body(b"", more=False))
    wire, control = run(app), run(app, wrap=False)
    assert sent(wire)[-2:] == sent(control)[-2:] == [body(b"data: late\n\n"), body(b"", more=False)]
    assert [e.data for e in wire.events()][:2] == ["one", "two"] and not raised(wire)
    assert not ours(caplog)


# -- invalid UTF-8 -------------------------------------------------------------------------------------


def openai(content: str) -> bytes:
    obj = {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": content}}],
    }
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def test_invalid_utf8_in_sse_passes_through_untouched() -> None:
    app = scripted(b"data: caf\xe9 \xff\xfe\n\n", b"data: \xf0\x9f\n\n", body(b"", more=False))
    wire, control = run(app), run(app, wrap=False)
    assert wire.data == control.data and wire.complete


def test_openai_with_a_lone_surrogate_and_invalid_utf8_keeps_its_text() -> None:
    """``"\\ud800"`` is valid JSON (json.dumps writes it); raw invalid bytes make an unparseable event."""
    pieces = [openai("a"), openai("b"), openai("\ud800"), openai("c"), openai("d").replace(b"d", b"\xff", 1)]
    app = scripted(*pieces, b"data: [DONE]\n\n", body(b"", more=False))
    wire, control = run(app), run(app, wrap=False)
    assert wire.complete and not any(e.data.startswith('{"error"') for e in wire.events())
    assert (
        text_of_events(wire.events(), "openai") == text_of_events(control.events(), "openai") == "ab\ud800c"
    )


@pytest.mark.parametrize(
    ("ctype", "chunks"),
    [
        (b"text/plain", [b"caf\xe9 ", b"\xff\xfe ok ", "é".encode()]),
        (b"text/plain; charset=iso-8859-1", ["café ".encode("latin-1"), "naïve".encode("latin-1")]),
        (b"text/plain; charset=utf-8", [b"ends inside a character: ", "😀".encode()[:2]]),
    ],
    ids=["invalid-bytes", "latin-1", "cut-at-the-end"],
)
def test_text_plain_bytes_are_never_altered(ctype: bytes, chunks: list[bytes]) -> None:
    app = scripted(*chunks, body(b"", more=False), headers=[(b"content-type", ctype)])
    wire, control = run(app), run(app, wrap=False)
    assert control.data == b"".join(chunks)
    assert wire.data == control.data and wire.complete


# -- an endless event ----------------------------------------------------------------------------------


def dripped(pieces: int, size: int, terminated_each: bool) -> Any:
    piece = b"x" * size

    async def app(scope_: Any, receive: Any, send: Any) -> None:
        await send(start())
        if not terminated_each:
            await send(body(b"data: "))
        for _ in range(pieces):
            await send(body(b"data: " + piece + b"\n\n" if terminated_each else piece))
        await send(body(b"\n\n", more=False))

    return app


PIECES = 4_000  # 100-byte pieces of one unterminated event: up to 400 kB held (under max_event_bytes)
BOUND = 64 * 1024  # what one 100-byte piece may allocate once 100 kB and more are held


@contextlib.contextmanager
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


@contextlib.contextmanager
def cost(peaks: list[int]) -> Iterator[None]:
    """Note how many bytes the block allocated on top of what was held before it (tracemalloc's peak)."""
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    yield
    peaks.append(tracemalloc.get_traced_memory()[1] - held)


def test_an_unterminated_event_dripped_in_small_pieces_is_never_copied_whole() -> None:
    """Holding a growing partial event must cost each piece only the piece: re-joining or re-scanning what
    is held would allocate the whole held event on every send (quadratic time: one such stream would block
    the event loop, and every other stream, for seconds). Memory, not a clock: the same on any machine."""
    peaks: list[int] = []

    async def app(scope_: Any, receive: Any, send: Any) -> None:
        await send(start())
        await send(body(b"data: "))
        for _ in range(PIECES):
            with cost(peaks):
                await send(body(b"x" * 100))
        await send(body(b"\n\n", more=False))

    with traced():
        wire = run(app, coalesce=False)
    assert len(wire.events()) == 1 and len(wire.events()[0].data) == 100 * PIECES
    assert max(peaks[1000:]) < BOUND, max(peaks[1000:])


def test_control_a_holder_that_joins_what_it_holds_is_caught() -> None:
    """The control: the same measure on a holder that re-joins its buffer per piece exceeds the bound."""
    held, peaks = b"", []
    with traced():
        for _ in range(PIECES):
            with cost(peaks):
                held = held + b"x" * 100  # the quadratic way to hold an event
    assert max(peaks[1000:]) >= BOUND


def test_an_event_past_max_event_bytes_streams_through_and_a_failure_cuts_it() -> None:
    big = b"y" * 65536
    app = scripted(b"data: start\n\n", b"data: ", *([big] * 40), fail=True)  # 2.5 MiB, never terminated
    wire = run(app, heartbeat_interval=0.001, max_event_bytes=1 << 20)
    assert not wire.complete, "a failure inside a forwarded event must not look like a clean end"
    assert b"event: error" not in wire.data and b": ping" not in wire.data.split(b"data: start\n\n", 1)[1]
    assert len(wire.data) >= 40 * 65536  # every byte the app produced was forwarded
    small = run(scripted(b"data: start\n\n", b"data: half", fail=True))  # the control: held, not forwarded
    assert small.complete and small.events()[-1].event == "error" and b"half" not in small.data


# -- trailers ------------------------------------------------------------------------------------------

TRAILERS = {"type": "http.response.trailers", "headers": [(b"x-usage", b"42")], "more_trailers": False}


def test_trailers_follow_the_final_body() -> None:
    async def app(scope_: Any, receive: Any, send: Any) -> None:
        await send(start(trailers=True))
        await send(body(OK[0]))
        await send(body(b"", more=False))
        await send(TRAILERS)

    wire, control = run(app), run(app, wrap=False)
    assert [m["type"] for m in sent(wire)] == [m["type"] for m in sent(control)]
    assert sent(wire)[-1] == TRAILERS


def test_a_stream_that_declared_trailers_gets_them_even_when_we_end_it() -> None:
    async def app(scope_: Any, receive: Any, send: Any) -> None:
        await send(start(trailers=True))
        await send(body(OK[0]))
        raise RuntimeError("app failed")

    wire = run(app)
    assert wire.events()[-1].event == "error"
    assert sent(wire)[-1]["type"] == "http.response.trailers", "the server waits for them to finish"


def test_plain_text_failure_is_still_cut() -> None:
    """Kept from test_errors for the raw ASGI level: text/plain has no error channel."""
    wire = run(scripted(b"partial ", fail=True, headers=PLAIN))
    assert wire.data == b"partial " and not wire.complete
