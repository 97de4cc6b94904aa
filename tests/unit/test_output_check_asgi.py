"""The output check through the middleware, in process (a dict scope, a recording send): a stream whose
JSON can no longer be what its request declared ends at the faulty character with the format's own
``invalid_output`` error event, and the app is cancelled; a valid document goes out byte for byte as it
would without the check; no schema in the request, no check. Each case runs with ``validate_json`` off
as its control."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import pytest

from sse_middleware import override
from tests.support.harness import PLAIN, SSE, Wire, body, scope, serve, start

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_signals"), pytest.mark.timeout(60)]

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
    "additionalProperties": False,
}
TOOLS = {
    "model": "m",
    "stream": True,
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}],
}


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    obj = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def tool_stream(arguments: list[str]) -> list[bytes]:
    function = {"name": "get_weather", "arguments": ""}
    head = {"index": 0, "id": "call_1", "type": "function", "function": function}
    return [
        chunk({"role": "assistant", "content": None, "tool_calls": [head]}),
        *(chunk({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}) for a in arguments),
        chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]


def content_stream(pieces: list[str]) -> list[bytes]:
    return [
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": p}) for p in pieces),
        chunk({}, "stop"),
        b"data: [DONE]\n\n",
    ]


class App:
    """Reads its request body (as an app does: the middleware sees it), then streams ``frames``, ``gap``
    seconds apart (time for a guard's checks between them)."""

    def __init__(self, frames: list[bytes], headers: list[tuple[bytes, bytes]] = SSE, gap: float = 0) -> None:
        self.frames, self.headers, self.sent, self.gap = frames, headers, 0, gap

    async def __call__(self, scope_: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        await send(start(self.headers))
        for frame in self.frames:
            await send(body(frame))
            self.sent += 1
            if self.gap:
                await anyio.sleep(self.gap)
        await send(body(b"", more=False))


async def post(
    app: App, request: dict[str, Any], schema: dict[str, Any] | None = None, **settings: Any
) -> Wire:
    """POST ``request`` (a JSON body) to ``app``; ``schema``: a json_schema override for it."""
    request_scope = scope("POST")
    if schema is not None:
        override(request_scope, json_schema=schema)
    wire = Wire(request_body=json.dumps(request).encode())
    settings = {"heartbeat_interval": 0, "telemetry": True, **settings}
    return await serve(app, request=request_scope, wire=wire, **settings)


def arguments(wire: Wire) -> str:
    out = []
    for event in wire.events():
        if event.data.startswith("{") and "choices" in event.data:
            for call in json.loads(event.data)["choices"][0]["delta"].get("tool_calls") or ():
                out.append(call["function"].get("arguments") or "")
    return "".join(out)


def errors(wire: Wire) -> list[dict[str, Any]]:
    return [json.loads(e.data)["error"] for e in wire.events() if '"error"' in e.data]


BAD = ['{"ci', 'ty":"Pa', 'ris","da', 'ys":"th', 'ree"', "}"]


async def test_bad_tool_arguments_end_at_the_faulty_character_with_an_invalid_output_error() -> None:
    app = App(tool_stream(BAD) + [chunk({"content": f"more {i}"}) for i in range(50)])
    wire = await post(app, TOOLS, validate_json=True)
    assert arguments(wire) == '{"city":"Paris","days":'  # everything before the quote that rules it out
    (error,) = errors(wire)
    assert (error["type"], error["code"]) == ("invalid_output", "json_schema")
    assert all(word in error["message"] for word in ("get_weather", "$.days", "integer"))
    assert not any(e.data == "[DONE]" for e in wire.events())
    assert app.sent < 8  # cancelled within a token or two of the fault, not 57 frames later


async def test_the_control_without_validation_sends_everything() -> None:
    app = App(tool_stream(BAD))
    wire = await post(app, TOOLS)
    assert arguments(wire) == "".join(BAD) and not errors(wire) and wire.events()[-1].data == "[DONE]"


@pytest.mark.parametrize("coalesce", [True, False])
async def test_a_valid_document_goes_out_byte_for_byte_as_without_the_check(coalesce: bool) -> None:
    # The app's JSON writes the "é" and the emoji as \\u escapes (ensure_ascii): a rebuilt frame would not.
    good = ['{"ci', 'ty":"Pa\u00e9', 'ris \\"x\\" \U0001f600","da', 'ys":3', "}"]
    checked = await post(App(tool_stream(good)), TOOLS, validate_json=True, coalesce=coalesce)
    unchecked = await post(App(tool_stream(good)), TOOLS, coalesce=coalesce)
    assert checked.data == unchecked.data and checked.data.endswith(b"data: [DONE]\n\n")
    assert json.loads(arguments(checked)) == {"city": 'Pa\u00e9ris "x" \U0001f600', "days": 3}


async def test_no_schema_in_the_request_means_no_check() -> None:
    wire = await post(App(tool_stream(BAD)), {"model": "m", "stream": True}, validate_json=True)
    assert arguments(wire) == "".join(BAD) and not errors(wire)


async def test_response_format_schema_catches_an_extra_key() -> None:
    request = {
        "model": "m",
        "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER}},
    }
    pieces = ['{"city":"Rome",', '"days":2,', '"extra":true}']
    wire = await post(App(content_stream(pieces)), request, validate_json=True)
    (error,) = errors(wire)
    assert error["code"] == "json_schema" and "is not allowed" in error["message"]
    control = await post(App(content_stream(pieces)), request)
    assert not errors(control)


async def test_json_object_mode_catches_broken_syntax() -> None:
    request = {"model": "m", "response_format": {"type": "json_object"}}
    pieces = ['{"a": 1', ", ", '"b" 2}']
    wire = await post(App(content_stream(pieces)), request, validate_json=True)
    (error,) = errors(wire)
    assert error["code"] == "json_syntax"
    text = "".join(
        json.loads(e.data)["choices"][0]["delta"].get("content") or ""
        for e in wire.events()
        if "choices" in e.data
    )
    assert text == '{"a": 1, "b" '  # up to the character that cannot follow


async def test_a_schema_given_per_request_checks_a_plain_text_stream() -> None:
    app = App([b'{"city": "Oslo", ', b'"days": "two"}'], headers=PLAIN)
    wire = await post(app, {}, schema=WEATHER, validate_json=True)
    assert wire.data == b'{"city": "Oslo", "days": ' and not wire.complete  # cut: no in-band channel
    control = await post(App([b'{"city": "Oslo", ', b'"days": "two"}'], headers=PLAIN), {}, schema=WEATHER)
    assert control.data == b'{"city": "Oslo", "days": "two"}' and control.complete


async def test_a_schema_the_checker_cannot_read_turns_the_check_off_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    request = {
        "model": "m",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "parameters": {"$ref": "https://example.com/weather.json"},
                },
            }
        ],
    }
    with caplog.at_level(logging.WARNING, logger="sse_middleware"):
        wire = await post(App(tool_stream(BAD)), request, validate_json=True)
    assert arguments(wire) == "".join(BAD) and not errors(wire) and wire.complete
    assert [r for r in caplog.records if "output check off" in r.getMessage()]


# Spaced JSON: word boundaries before the fault, so the guards see text; a space after it in the same
# token, so that text past the fault would be checkable too.
SPACED = ['{"city": ', '"Paris", ', '"days": "th ree", ', '"x": 1}']
BEFORE = '{"city": "Paris", "days": '  # everything before the quote that rules it out


@pytest.mark.parametrize("mode", ["hold", "observe"])
async def test_with_guards_the_check_ends_the_stream_and_guards_see_only_checked_text(mode: str) -> None:
    seen: list[str] = []

    def record(check: Any) -> None:
        seen.append(check.new)

    app = App(tool_stream(SPACED) + [chunk({"content": f"more {i} "}) for i in range(50)], gap=0.05)
    wire = await post(app, TOOLS, guards=[record], validate_json=True, guard_mode=mode)
    (error,) = errors(wire)
    assert error["type"] == "invalid_output" and "$.days" in error["message"]
    assert BEFORE.startswith("".join(seen)) and "Paris" in "".join(seen)  # text, and none past the fault
    assert app.sent < 8
    # hold: only text the guards passed; observe: as without guards, all the check let through.
    assert arguments(wire) == ("".join(seen) if mode == "hold" else BEFORE)


@pytest.mark.parametrize("mode", ["hold", "observe"])
async def test_a_plain_text_stream_with_guards_is_cut_where_the_check_cut_it(mode: str) -> None:
    seen: list[str] = []

    def record(check: Any) -> None:
        seen.append(check.new)

    app = App([b'{"city": ', b'"Oslo", ', b'"days": "two and ', b'three"}'], headers=PLAIN, gap=0.05)
    wire = await post(app, {}, schema=WEATHER, guards=[record], validate_json=True, guard_mode=mode)
    valid = '{"city": "Oslo", "days": '
    assert valid.startswith("".join(seen)) and "Oslo" in "".join(seen) and not wire.complete
    assert wire.data.decode() == ("".join(seen) if mode == "hold" else valid)
