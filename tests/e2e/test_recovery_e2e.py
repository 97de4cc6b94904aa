"""Mid-stream recovery end to end: the official SDKs as clients of a real uvicorn app that relays a real
upstream (:mod:`tests.support.upstream`) failing mid-answer, with the official SDKs as the app's own
upstream clients. With recovery on, the client reads one whole ordinary answer; the controls (recovery
off, and no middleware) read today's error ending.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from ..support.sdk_reads import MESSAGES, chat_answer
from ..support.servers import Server, uvicorn
from ..support.upstream import ANSWER, tokens

pytestmark = pytest.mark.timeout(120)
APP = "tests.support.apps_recovery:app"
PARTS = tokens(ANSWER)


@pytest.fixture(scope="module")
def upstream() -> Iterator[Server]:
    with uvicorn("tests.support.upstream:app") as server:
        yield server


@pytest.fixture(scope="module")
def off(upstream: Server) -> Iterator[Server]:
    with uvicorn(APP, {"UPSTREAM_URL": upstream.url}) as server:
        yield server


@pytest.fixture(scope="module")
def bare(upstream: Server) -> Iterator[Server]:
    with uvicorn(APP, {"UPSTREAM_URL": upstream.url, "TEST_WRAP": "0"}) as server:
        yield server


def faults(fault: str, times: int = 1) -> dict[str, str]:
    """Headers for a fault on the first ``times`` requests of a fresh key (0: every request)."""
    return {"x-fault": fault, "x-fault-times": str(times), "x-fault-key": uuid.uuid4().hex}


def openai_answer(server: Server, headers: dict[str, str], path: str = "", **query: Any) -> dict[str, Any]:
    """What the openai SDK's client reads: text, ids, finish reasons, and the exception it raised."""
    return chat_answer(
        server.url + path + "/v1", "fake-gpt", extra_headers=headers, extra_query=query or None
    )


def anthropic_answer(server: Server, headers: dict[str, str], path: str = "", **query: Any) -> dict[str, Any]:
    """What the anthropic SDK's stream helper reads: the final message, or the exception it raised."""
    client = anthropic.Anthropic(base_url=server.url + path, api_key="test", max_retries=0)
    got: dict[str, Any] = {"text": "", "ids": set(), "stop": None, "error": None}
    try:
        with client.messages.stream(
            model="fake-claude",
            max_tokens=500,
            messages=MESSAGES,  # type: ignore[arg-type]
            extra_headers=headers,
            extra_query=query or None,
        ) as stream:
            for text in stream.text_stream:
                got["text"] += text
            final = stream.get_final_message()
        got["ids"].add(final.id)
        got["stop"] = final.stop_reason
        got["usage"] = final.usage
    except Exception as exc:  # the SDK's own errors, or its HTTP client's (anthropic ships httpx2)
        got["error"] = exc
    return got


# -- controls: what the client gets without recovery -----------------------------------------------------
@pytest.mark.parametrize("path", ["", "/raw"])
def test_control_off_openai_client_raises_on_the_upstreams_error(
    off: Server, bare: Server, path: str
) -> None:
    for server in (off, bare):
        got = openai_answer(server, faults("overload@5"), path)
        assert isinstance(got["error"], openai.APIError), got
        assert got["text"] == "".join(PARTS[:5])


@pytest.mark.parametrize("path", ["", "/raw"])
def test_control_off_anthropic_client_raises_on_overloaded(off: Server, bare: Server, path: str) -> None:
    for server in (off, bare):
        got = anthropic_answer(server, faults("overload@5"), path)
        assert got["error"] is not None, got
        assert got["text"] == "".join(PARTS[:5])


def test_control_off_a_cut_upstream_is_an_error_for_the_client(off: Server) -> None:
    got = openai_answer(off, faults("cut@7"))
    assert isinstance(got["error"], openai.APIError) and got["text"] == "".join(PARTS[:7])
    got = anthropic_answer(off, faults("cut@7"))
    assert got["error"] is not None and got["text"] == "".join(PARTS[:7])


def test_the_upstream_answers_whole_without_a_fault(off: Server) -> None:
    """The rig's own control: no fault, one whole answer through the middleware."""
    got = openai_answer(off, {"x-fault-key": uuid.uuid4().hex})
    assert got["error"] is None and got["text"] == ANSWER and got["finish"] == ["stop"]
    got = anthropic_answer(off, {"x-fault-key": uuid.uuid4().hex})
    assert got["error"] is None and got["text"] == ANSWER and got["stop"] == "end_turn"


# -- recovery on: one whole ordinary answer --------------------------------------------------------------
ON = {"SSE_MIDDLEWARE_RECOVER": "continue", "SSE_MIDDLEWARE_RECOVER_BACKOFF": "0.05"}


@pytest.fixture(scope="module")
def on(upstream: Server) -> Iterator[Server]:
    env = {**ON, "UPSTREAM_URL": upstream.url, "SSE_MIDDLEWARE_STALL_TIMEOUT": "1"}
    with uvicorn(APP, env) as server:
        yield server


@pytest.fixture(scope="module")
def prefilling(upstream: Server) -> Iterator[Server]:
    env = {**ON, "UPSTREAM_URL": upstream.url, "SSE_MIDDLEWARE_RECOVER_BODY": "prefill"}
    with uvicorn(APP, env) as server:
        yield server


def seen(upstream: Server, key: str) -> list[Any]:
    """The bodies the upstream received for ``key``."""
    return httpx.get(f"{upstream.url}/requests/{key}").json()  # type: ignore[no-any-return]


def runs(server: Server, key: str) -> list[Any]:
    return httpx.get(f"{server.url}/runs/{key}").json()  # type: ignore[no-any-return]


def assert_whole_openai(got: dict[str, Any]) -> None:
    assert got["error"] is None, got["error"]
    assert got["text"] == ANSWER
    assert got["ids"] == {"chatcmpl-1"}  # the first attempt's id, on every chunk
    assert got["finish"] == ["stop"]


def assert_whole_anthropic(got: dict[str, Any]) -> None:
    assert got["error"] is None, got["error"]
    assert got["text"] == ANSWER
    assert got["ids"] == {"msg-1"} and got["stop"] == "end_turn"


# The SDK relay writes its own [DONE] after whatever the SDK read, so only the raw relay truncates a chat.
@pytest.mark.parametrize(
    ("fault", "path"),
    [(f, p) for f in ("cut@0", "cut@6", "overload@6", "cut@33") for p in ("", "/raw")]
    + [("truncate@12", "/raw")],
)
def test_openai_client_reads_one_whole_answer(on: Server, fault: str, path: str) -> None:
    headers = faults(fault)
    got = openai_answer(on, headers, path)
    assert_whole_openai(got)
    assert [r and r["attempt"] for r in runs(on, headers["x-fault-key"])] == [None, 1]


@pytest.mark.parametrize("fault", ["cut@0", "cut@6", "overload@6", "cut@33", "truncate@12"])
@pytest.mark.parametrize("path", ["", "/raw"])
def test_anthropic_client_reads_one_whole_answer(on: Server, fault: str, path: str) -> None:
    got = anthropic_answer(on, faults(fault), path)
    assert_whole_anthropic(got)


def responses_answer(server: Server, headers: dict[str, str]) -> dict[str, Any]:
    """What the openai SDK's Responses stream helper reads (through the raw relay): the deltas' text,
    each ``output_text.done``'s, and the final response (None: the stream ended without it)."""
    client = openai.OpenAI(base_url=server.url + "/raw/v1", api_key="test", max_retries=0)
    got: dict[str, Any] = {"text": "", "done": [], "final": None, "error": None}
    try:
        with client.responses.stream(model="fake-gpt", input="Why stream?", extra_headers=headers) as stream:
            for event in stream:
                if event.type == "response.output_text.delta":
                    got["text"] += event.delta
                elif event.type == "response.output_text.done":
                    got["done"].append(event.text)
            got["final"] = stream.get_final_response()
    except Exception as exc:  # the SDK's own errors, or its HTTP client's
        got["error"] = exc
    return got


@pytest.mark.parametrize("fault", ["cut@6", "overload@6"])
def test_openai_responses_client_reads_one_whole_answer(on: Server, off: Server, fault: str) -> None:
    """A Responses stream cut after its text went out: one message, its text whole in the deltas, the
    done event and the final response; the control (recovery off) ends without a final response."""
    got = responses_answer(on, faults(fault))
    assert got["error"] is None, got["error"]
    assert got["text"] == ANSWER and got["done"] == [ANSWER]
    assert got["final"].id == "resp-1" and got["final"].output_text == ANSWER
    assert len(got["final"].output) == 1
    control = responses_answer(off, faults(fault))
    assert control["final"] is None and control["text"] == "".join(PARTS[:6])


def test_the_relayed_error_event_is_an_upstream_error(on: Server) -> None:
    headers = faults("overload@6")
    assert_whole_anthropic(anthropic_answer(on, headers, "/raw"))
    second = runs(on, headers["x-fault-key"])[1]
    assert second == {"attempt": 1, "reason": "upstream_error", "text": "".join(PARTS[:6])}


def test_a_stall_is_recovered(on: Server) -> None:
    headers = faults("stall@6")
    assert_whole_openai(openai_answer(on, headers))
    assert runs(on, headers["x-fault-key"])[1]["reason"] == "stall"


@pytest.mark.parametrize("client", ["openai", "anthropic"])
def test_the_app_continues_with_recovery_text(on: Server, upstream: Server, client: str) -> None:
    """The docs' recipe: the app asks its upstream to continue ``recovery().text`` (and the upstream,
    prefill-capable, writes only the rest), with no system prompt added by anyone."""
    headers = faults("overload@9")
    if client == "openai":
        assert_whole_openai(openai_answer(on, headers, on_rerun="prefill"))
    else:
        assert_whole_anthropic(anthropic_answer(on, headers, on_rerun="prefill"))
    first, second = seen(upstream, headers["x-fault-key"])
    assert second["messages"][:-1] == first["messages"]
    assert second["messages"][-1]["role"] == "assistant"
    assert not any(m["role"] == "system" for m in second["messages"])


@pytest.mark.parametrize("client", ["openai", "anthropic"])
def test_recover_body_prefill(prefilling: Server, upstream: Server, client: str) -> None:
    headers = faults("cut@9")
    if client == "openai":
        assert_whole_openai(openai_answer(prefilling, headers))
    else:
        assert_whole_anthropic(anthropic_answer(prefilling, headers))
    first, second = seen(upstream, headers["x-fault-key"])
    had = "".join(PARTS[:9])
    last = second["messages"][-1]
    assert second["messages"][:-1] == first["messages"] and last["role"] == "assistant"
    if client == "openai":
        assert last == {"role": "assistant", "content": had, "prefix": True}
        assert second["continue_final_message"] is True and second["add_generation_prompt"] is False
    else:
        assert last == {"role": "assistant", "content": had.rstrip()}


@pytest.mark.parametrize("client", ["openai", "anthropic"])
def test_gives_up_with_the_first_failure_and_loses_nothing(on: Server, client: str) -> None:
    """The control for every test above: a re-run that fails every time. The client gets today's error
    ending after ``recover_attempts`` re-runs, and exactly the text it had."""
    headers = faults("overload@6", times=0)
    got = (openai_answer if client == "openai" else anthropic_answer)(on, headers)
    assert got["error"] is not None
    assert got["text"] == "".join(PARTS[:6])
    assert len(runs(on, headers["x-fault-key"])) == 3  # the first run and two re-runs


def test_the_off_switch_per_request_is_obeyed(on: Server) -> None:
    headers = faults("overload@6")
    got = openai_answer(on, headers, recover="off")
    assert isinstance(got["error"], openai.APIError) and got["text"] == "".join(PARTS[:6])
    assert len(runs(on, headers["x-fault-key"])) == 1


def test_retry_mode_recovers_only_before_text(on: Server) -> None:
    headers = faults("cut@0")
    assert_whole_openai(openai_answer(on, headers, recover="retry"))
    headers = faults("cut@4")
    got = openai_answer(on, headers, recover="retry")
    assert got["error"] is not None and got["text"] == "".join(PARTS[:4])


def test_heartbeats_while_waiting(upstream: Server) -> None:
    env = {
        "UPSTREAM_URL": upstream.url,
        "SSE_MIDDLEWARE_RECOVER": "continue",
        "SSE_MIDDLEWARE_RECOVER_BACKOFF": "1.0",
        "SSE_MIDDLEWARE_HEARTBEAT_INTERVAL": "0.2",
    }
    with uvicorn(APP, env) as server:
        body = {"model": "fake-gpt", "messages": MESSAGES, "stream": True}
        response = httpx.post(
            f"{server.url}/v1/chat/completions", json=body, headers=faults("cut@5"), timeout=30
        )
    text = response.text
    cut = text.index("".join(PARTS[4:5]).strip())
    assert ": ping" in text[cut : text.index("data: [DONE]")]


def test_ai_sdk_reader_reads_one_whole_message(on: Server) -> None:
    """The Vercel AI SDK's own reader (DefaultChatTransport, readUIMessageStream) on a UI message stream
    whose upstream failed mid-answer: one text part, the whole text, no error."""
    from ..support.node import run_node

    key = uuid.uuid4().hex
    url = f"{on.url}/api/chat?x-fault=cut@7&x-fault-key={key}"
    got = run_node("read_ui_stream.mjs", url)
    assert got["error"] is None
    texts = [part["text"] for part in got["parts"] if part["type"] == "text"]
    assert texts == [ANSWER]
    assert got["chunks"]["start"] == 1 and got["chunks"]["text-start"] == 1 and got["finish"] is not None
    assert len(runs(on, key)) == 2


def test_ai_sdk_reader_control_without_recovery(off: Server) -> None:
    from ..support.node import run_node

    url = f"{off.url}/api/chat?x-fault=cut@7&x-fault-key={uuid.uuid4().hex}"
    got = run_node("read_ui_stream.mjs", url)
    texts = [part["text"] for part in got["parts"] if part["type"] == "text"]
    assert got["error"] is not None and texts == ["".join(PARTS[:7])]
