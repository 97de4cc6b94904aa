"""Every example runs as its docstring says (``python examples/X.py --port N``) and streams to real clients.

Each test starts the example as a subprocess on a free 127.0.0.1 port and talks to it with the official
SDK where there is one (openai, anthropic) and httpx + httpx-sse otherwise. Controls: the lab serves the
same model app with and without the middleware, so the raw variant must lack what the middleware adds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from httpx_sse import connect_sse

from sse_middleware._core.sse import parse

from ..support.otel import OTLPReceiver, attributes
from ..support.servers import ROOT, Server, example, uvicorn
from ..support.upstream import ANSWER

EXAMPLES = ROOT / "examples"


def _stream_headers(url: str, **kwargs: object) -> httpx.Headers:
    with httpx.stream("POST", url, timeout=30, **kwargs) as response:  # type: ignore[arg-type]
        response.read()
        assert response.status_code == 200
        return response.headers


def test_fastapi_openai_streams_to_the_openai_sdk() -> None:
    with example("fastapi_openai.py") as server:
        url = server.url
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        stream = client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "what is TTFT?"}], stream=True
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        assert text.startswith("You asked: “what is TTFT?”")
        assert text.endswith("✅")
        body = {"model": "echo", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        headers = _stream_headers(f"{url}/v1/chat/completions", json=body)
        assert headers["x-accel-buffering"] == "no"
        assert "no-transform" in headers["cache-control"]
        # Control: the non-streaming answer is a plain JSON response, left alone by the middleware.
        reply = httpx.post(f"{url}/v1/chat/completions", json={**body, "stream": False}, timeout=30)
        assert reply.json()["choices"][0]["message"]["content"].startswith("You asked: “hi”")
        assert "x-accel-buffering" not in reply.headers


def test_starlette_plain_streams_events_and_reports_failure_as_an_event() -> None:
    text = "Server-Sent Events are plain HTTP: one long response, one event per message. "
    with example("starlette_plain.py") as server, httpx.Client(timeout=30) as client:
        url = server.url
        with connect_sse(client, "GET", f"{url}/stream") as source:
            assert source.response.headers["x-accel-buffering"] == "no"
            events = list(source.iter_sse())
        assert "".join(json.loads(e.data)["text"] for e in events if e.event == "message") == text
        assert events[-1].event == "done"

        with connect_sse(client, "GET", f"{url}/stream?fail=1") as source:
            events = list(source.iter_sse())
        assert events[0].event == "message", "some text arrived before the failure"
        assert events[-1].event == "error"
        error = json.loads(events[-1].data)["error"]
        assert error["message"]
        assert "password" not in events[-1].data, "an unexpected exception's own text never reaches clients"
        assert "done" not in {e.event for e in events}


def test_fastapi_native_sse_streams_and_sends_stream_error_verbatim() -> None:
    with example("fastapi_native_sse.py") as server, httpx.Client(timeout=30) as client:
        url = server.url
        with connect_sse(client, "GET", f"{url}/tokens") as source:
            headers = source.response.headers
            events = list(source.iter_sse())
        text = "".join(json.loads(e.data)["text"] for e in events if e.event == "token")
        assert text == "FastAPI encodes every yielded item as one Server-Sent Event. "
        assert events[-1].event == "done"
        assert headers["x-accel-buffering"] == "no"
        # FastAPI itself sends "no-cache"; no-transform (which keeps gzip proxies off) is the middleware's.
        assert "no-transform" in headers["cache-control"]

        with connect_sse(client, "GET", f"{url}/tokens?fail=1") as source:
            events = list(source.iter_sse())
        assert events[-1].event == "error"
        assert "the model is overloaded, try again in a minute" in events[-1].data


def test_relay_streams_from_the_fake_provider_and_recovers_a_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """As its docstring says: the fake provider on a port, the relay in front of it, the official SDKs
    as clients; a model whose primary cuts the connection still reads whole (the fallback continued it;
    the faults are tests/e2e/test_fault_catalogue.py's)."""
    with uvicorn("tests.support.upstream:app") as fake:
        monkeypatch.setenv("RELAY_PRIMARY_URL", fake.url)  # the example's environment
        monkeypatch.setenv("RELAY_FALLBACK_URL", fake.url + "/fallback")
        with example("relay.py") as server:
            url = server.url
            claude = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0)
            gpt = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            messages: Any = [{"role": "user", "content": "hi"}]
            for model in ("fake", "fake,primary=cut@6"):
                with claude.messages.stream(model=model, max_tokens=100, messages=messages) as stream:
                    assert "".join(stream.text_stream) == ANSWER
                chunks = gpt.chat.completions.create(model=model, messages=messages, stream=True)
                assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ANSWER

            body = {"model": "fake", "max_tokens": 100, "stream": True, "messages": messages}
            assert _stream_headers(f"{url}/v1/messages", json=body)["x-accel-buffering"] == "no"


FAST = {"ttft": 0.05, "tpot": 0.002, "jitter": 0.0}


@pytest.fixture(scope="module")
def lab() -> Iterator[Server]:
    with example("lab.py") as server:
        yield server


def test_lab_serves_its_page(lab: Server) -> None:
    page = httpx.get(lab.url, timeout=10)
    assert page.status_code == 200 and "/static/lab.js" in page.text
    for asset in ("lab.js", "panel.js", "markdown.js", "sse.js", "lab.css"):
        assert httpx.get(f"{lab.url}/static/{asset}", timeout=10).status_code == 200
    scenarios = httpx.get(f"{lab.url}/api/config", timeout=10).json()["scenarios"]
    assert {s["name"] for s in scenarios} == {
        "short",
        "report",
        "tool",
        "failure",
        "drop",
        "recover",
        "guarded",
    }


def test_lab_model_through_the_middleware_and_raw(lab: Server) -> None:
    mw = openai.OpenAI(base_url=f"{lab.url}/mw/v1", api_key="unused", max_retries=0)
    raw = openai.OpenAI(base_url=f"{lab.url}/raw/v1", api_key="unused", max_retries=0)
    short = (EXAMPLES / "lab_answers" / "short.md").read_text(encoding="utf-8")
    for client in (mw, raw):
        stream = client.chat.completions.create(
            model="lab-sim",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            extra_body={"scenario": "short", **FAST},
        )
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == short

    body = {"model": "lab-sim", "messages": [], "stream": True, "scenario": "short", **FAST}
    assert _stream_headers(f"{lab.url}/mw/v1/chat/completions", json=body)["x-accel-buffering"] == "no"
    assert "x-accel-buffering" not in _stream_headers(f"{lab.url}/raw/v1/chat/completions", json=body)

    # A crash mid-answer: an error the SDK understands through the middleware, a broken stream without.
    failing = {"scenario": "failure", **FAST}
    with pytest.raises(openai.APIError) as caught:
        for _ in mw.chat.completions.create(model="lab-sim", messages=[], stream=True, extra_body=failing):
            pass
    assert not isinstance(caught.value, openai.APIConnectionError), "an error event, not a broken connection"
    assert caught.value.message
    with pytest.raises(openai.APIConnectionError):  # raw: a crash looks exactly like a network failure
        for _ in raw.chat.completions.create(model="lab-sim", messages=[], stream=True, extra_body=failing):
            pass


def test_lab_provider_failure_is_recovered_through_the_middleware(lab: Server) -> None:
    """The 'Provider fails mid-answer' scenario: through the middleware one whole report (the route
    turned recovery on, the app's re-run continued), and the app's note of the re-run; raw, a break.
    Read with the spec's parser: the lab's streams are resumable (ids), and after an id the openai SDK
    takes any comment (the note, a heartbeat) for an event with empty data and fails to parse it."""
    report = (EXAMPLES / "lab_answers" / "report.md").read_text(encoding="utf-8")
    body = {"model": "lab-sim", "messages": [], "stream": True, "scenario": "recover", **FAST}
    response = httpx.post(f"{lab.url}/mw/v1/chat/completions", json=body, timeout=30)
    chunks = [json.loads(e.data) for e in parse(response.content) if e.data != "[DONE]"]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == report
    assert len({c["id"] for c in chunks}) == 1
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"][0]["finish_reason"]] == ["stop"]
    assert b": re-run 1 after exception" in response.content
    raw = openai.OpenAI(base_url=f"{lab.url}/raw/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.APIConnectionError):  # the control: without the middleware, half and a break
        for _ in raw.chat.completions.create(model="lab-sim", messages=[], stream=True, extra_body=body):
            pass


def test_lab_guarded_answer_ends_at_the_filter_through_the_middleware(lab: Server) -> None:
    def read(variant: str) -> tuple[str, list[str | None]]:
        client = openai.OpenAI(base_url=f"{lab.url}/{variant}/v1", api_key="unused", max_retries=0)
        text, reasons = "", []
        for chunk in client.chat.completions.create(
            model="lab-sim",
            messages=[],
            stream=True,
            extra_body={"scenario": "guarded", **FAST},
            extra_headers={"X-Lab-Guard": "1"},
        ):
            for choice in chunk.choices:
                text += choice.delta.content or ""
                reasons.append(choice.finish_reason)
        return text, reasons

    raw, raw_reasons = read("raw")
    assert "sk-live-" in raw and raw_reasons[-1] == "stop"  # the control: the model leaks it
    mine, reasons = read("mw")
    assert reasons[-1] == "content_filter" and "sk-" not in mine and raw.startswith(mine) and mine


def test_lab_tool_call_silence_is_kept_alive_by_heartbeats(lab: Server) -> None:
    body = {"model": "lab-sim", "messages": [], "stream": True, "scenario": "tool", **FAST}
    with httpx.Client(timeout=30) as client:
        pings = {}
        for variant in ("mw", "raw"):
            with client.stream("POST", f"{lab.url}/{variant}/v1/chat/completions", json=body) as response:
                lines = list(response.iter_lines())
            pings[variant] = sum(1 for line in lines if line.startswith(":"))
            assert "data: [DONE]" in lines
        assert pings["mw"] >= 2, "a 4 s silence with a 1 s heartbeat interval"
        assert pings["raw"] == 0


def _wait_for(condition: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("timed out")
        time.sleep(0.1)


def test_lab_prints_spans_and_metrics_to_the_console(lab: Server) -> None:
    body = {"model": "lab-sim", "messages": [], "stream": True, "scenario": "short", **FAST}
    _stream_headers(f"{lab.url}/mw/v1/chat/completions", json=body)
    _wait_for(lambda: "[otel span]" in lab.output())
    span_line = next(line for line in lab.output().splitlines() if line.startswith("[otel span]"))
    assert "gen_ai.response.time_to_first_chunk" in span_line


def test_lab_exports_over_otlp_http_when_configured() -> None:
    body = {"model": "lab-sim", "messages": [], "stream": True, "scenario": "short", **FAST}
    with OTLPReceiver() as rx:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{rx.port}",
            "OTEL_METRIC_EXPORT_INTERVAL": "500",
        }
        with example("lab.py", env) as server:
            url = server.url
            _stream_headers(f"{url}/mw/v1/chat/completions", json=body)
            _stream_headers(f"{url}/raw/v1/chat/completions", json=body)  # control: no middleware, no span
            _wait_for(
                lambda: (
                    bool(rx.spans())
                    and any(m.name == "gen_ai.server.time_to_first_token" for m in rx.metrics())
                )
            )
            time.sleep(1)  # let a span for the raw stream arrive, if one (wrongly) would
            assert "[otel span]" not in server.output(), "OTLP replaces the console"
        spans = rx.spans()
        assert len(spans) == 1
        assert attributes(spans[0])["url.path"] == "/mw/v1/chat/completions"
        assert "gen_ai.response.time_to_first_chunk" in attributes(spans[0])


def test_guarded_stops_a_credential_and_an_insult_the_way_openai_says_filtered() -> None:
    with example("guarded.py") as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)

        def ask(question: str, stream: bool = True) -> tuple[str, list[str | None]]:
            messages: Any = [{"role": "user", "content": question}]
            if not stream:
                reply = client.chat.completions.create(model="echo", messages=messages)
                return reply.choices[0].message.content or "", [reply.choices[0].finish_reason]
            text, reasons = "", []
            for chunk in client.chat.completions.create(model="echo", messages=messages, stream=True):
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    reasons.append(choice.finish_reason)
            return text, reasons

        text, reasons = ask("hello")
        assert text.startswith("Hello!") and reasons[-1] == "stop"  # a clean answer passes whole
        # The controls: what the model wrote, unguarded (plain JSON is no stream).
        assert "sk-live-" in ask("the deploy key?", stream=False)[0]
        assert "stupid" in ask("review my code", stream=False)[0]
        text, reasons = ask("what is the deploy key?")
        assert reasons[-1] == "content_filter" and "sk-" not in text and text.startswith("Sure.")
        text, reasons = ask("review my code")  # the async guard, over HTTP to the fake moderation
        assert reasons[-1] == "content_filter" and "stup" not in text and text.startswith("Your code")
