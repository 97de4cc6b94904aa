"""Mid-stream exceptions become error events the official clients tell from a dropped connection."""

from __future__ import annotations

import json
import re

import anthropic
import httpx
import openai
import pytest

from ..support.apps import TOKENS
from ..support.clients import read_stream
from ..support.servers import Server, uvicorn

pytestmark = pytest.mark.timeout(120)
FAIL_AT = 8
BEFORE = "".join(TOKENS[:FAIL_AT])  # what the app produced before it failed
MESSAGES = [{"role": "user", "content": "hi"}]


def openai_text(server: Server, **query: object) -> tuple[str, Exception | None]:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    text = ""
    try:
        for chunk in client.chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,  # type: ignore[arg-type]
            extra_query=query,
        ):
            if chunk.choices and chunk.choices[0].delta.content:
                text += chunk.choices[0].delta.content
    except Exception as exc:
        return text, exc
    return text, None


def anthropic_text(server: Server, **query: object) -> tuple[str, Exception | None]:
    client = anthropic.Anthropic(base_url=server.url, api_key="test", max_retries=0)
    text = ""
    try:
        with client.messages.stream(
            model="m",
            max_tokens=10,
            messages=MESSAGES,  # type: ignore[arg-type]
            extra_query=query,
        ) as stream:
            for piece in stream.text_stream:
                text += piece
    except Exception as exc:
        return text, exc
    return text, None


def responses_text(server: Server, **query: object) -> tuple[str, list[object], Exception | None]:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    text, errors = "", []
    try:
        for event in client.responses.create(model="m", input="hi", stream=True, extra_query=query):
            if event.type == "response.output_text.delta":
                text += event.delta
            elif event.type == "error":
                errors.append(event)
    except Exception as exc:
        return text, errors, exc
    return text, errors, None


def test_openai_sdk_raises_api_error_with_the_text_before_it_complete(
    wrapped: Server, control: Server
) -> None:
    text, exc = openai_text(wrapped, fail_at=FAIL_AT, delay=0.01)
    assert type(exc) is openai.APIError, exc  # not APIConnectionError (a subclass)
    assert text == BEFORE
    assert "error id:" in str(exc) and "hunter2" not in str(exc)
    text, exc = openai_text(control, fail_at=FAIL_AT, delay=0.01)
    assert isinstance(exc, openai.APIConnectionError)  # the control: a dropped connection


def test_anthropic_sdk_raises_its_api_error(wrapped: Server, control: Server) -> None:
    text, exc = anthropic_text(wrapped, fail_at=FAIL_AT, delay=0.01)
    assert isinstance(exc, anthropic.APIStatusError), exc
    assert text == BEFORE
    assert "api_error" in str(exc) and "hunter2" not in str(exc)
    text, exc = anthropic_text(control, fail_at=FAIL_AT, delay=0.01)
    assert exc is not None and not isinstance(exc, anthropic.APIStatusError)


def test_openai_responses_sdk_yields_its_error_event(wrapped: Server, control: Server) -> None:
    """The Responses API reports failures in-band as a typed ``error`` event (as OpenAI's servers do),
    which the SDK hands to the caller instead of raising."""
    text, errors, exc = responses_text(wrapped, fail_at=FAIL_AT, delay=0.01)
    assert exc is None and text == BEFORE
    assert len(errors) == 1 and errors[0].code == "internal_error"  # type: ignore[attr-defined]
    assert "hunter2" not in errors[0].message  # type: ignore[attr-defined]
    text, errors, exc = responses_text(control, fail_at=FAIL_AT, delay=0.01)
    assert isinstance(exc, openai.APIConnectionError) and not errors


def test_an_exception_after_the_answer_ended_adds_no_error_event(wrapped: Server, control: Server) -> None:
    """The app raises after its stream's last event (``message_stop``, ``response.completed``): a
    cleanup that fails once the answer is whole. The Anthropic SDK reads on to the connection's end and
    raises on any error event, the Responses SDK hands one over, so an error event there would turn a
    whole answer into a failure. The middleware logs the exception and ends the stream cleanly. Control:
    the bare server cuts the connection, which the Anthropic SDK raises on. Mutation:
    ``Pipeline.answered`` returning False -> APIStatusError, and one error event."""
    whole = "".join(TOKENS)
    text, exc = anthropic_text(wrapped, fail_at=len(TOKENS))
    assert exc is None and text == whole, exc
    text, errors, exc = responses_text(wrapped, fail_at=len(TOKENS))
    assert exc is None and not errors and text == whole, (exc, errors)
    text, exc = anthropic_text(control, fail_at=len(TOKENS))
    assert text == whole and exc is not None and not isinstance(exc, anthropic.APIStatusError)


def test_generic_sse_gets_a_named_error_event_and_a_clean_end(wrapped: Server, control: Server) -> None:
    seen = read_stream(wrapped.url + "/sse?n=5&fail_at=3")
    assert seen.error is None  # a clean end of the body: the client was told, not cut off
    assert [e.data for e in seen.events[:3]] == ["tick 0", "tick 1", "tick 2"]
    last = seen.events[-1]
    assert last.event == "error"
    error = json.loads(last.data)["error"]
    assert error["type"] == "internal_error" and re.fullmatch(r"[0-9a-f]{32}", error["id"])
    assert seen.body.endswith(b"\n\n") and b"hunter2" not in seen.body
    assert read_stream(control.url + "/sse?n=5&fail_at=3").error is not None  # the control: cut off


@pytest.mark.parametrize("path", ["/openai?fail_at=3", "/sse?fail_at=3"])
def test_secret_never_leaves_the_server_but_is_logged_once_with_the_id(wrapped: Server, path: str) -> None:
    before = wrapped.output().count("stream failed after the response started")
    seen = read_stream(wrapped.url + path + "&secret=hunter2")
    assert b"hunter2" not in seen.body
    error_id = re.search(rb"[0-9a-f]{32}", seen.body.rsplit(b"data:", 1)[1])
    assert error_id is not None
    log = wrapped.output()
    assert log.count("stream failed after the response started") == before + 1
    assert f"error id {error_id.group().decode()}" in log  # operators find the traceback by the id
    assert "Exception in ASGI application" not in log  # not re-raised into the server
    assert b"[DONE]" not in seen.body  # openai: no [DONE] after an error


def test_stream_error_message_goes_out_verbatim(wrapped: Server) -> None:
    seen = read_stream(wrapped.url + "/sse?n=5&stream_error_at=2")
    error = json.loads(seen.events[-1].data)["error"]
    assert (error["message"], error["type"], error["code"]) == ("quota exceeded", "rate_limit", "quota")


def test_error_detail_lets_the_exception_text_through() -> None:
    with uvicorn("tests.support.apps:app", {"SSE_MIDDLEWARE_ERROR_DETAIL": "true"}) as server:
        seen = read_stream(server.url + "/sse?n=5&fail_at=1")
    assert "RuntimeError: secret hunter2" in json.loads(seen.events[-1].data)["error"]["message"]


def test_text_plain_failure_is_never_a_clean_end(wrapped: Server) -> None:
    seen = read_stream(wrapped.url + "/plain?n=5&fail_at=3")
    assert isinstance(seen.error, httpx.RemoteProtocolError)  # the terminating chunk never came
    assert seen.body == b"line 0\nline 1\nline 2\n"  # nothing produced before the failure is lost


def test_exception_before_the_start_is_left_to_the_server(wrapped: Server, control: Server) -> None:
    with httpx.Client() as client:
        ours = client.get(wrapped.url + "/fail_before_start")
        theirs = client.get(control.url + "/fail_before_start")
    assert ours.status_code == theirs.status_code == 500
    assert ours.content == theirs.content
