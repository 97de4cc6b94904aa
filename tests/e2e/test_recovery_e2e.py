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
import openai
import pytest

from ..support.servers import Server, uvicorn
from ..support.upstream import ANSWER, tokens

pytestmark = pytest.mark.timeout(120)
APP = "tests.support.apps_recovery:app"
MESSAGES = [{"role": "user", "content": "Why stream?"}]
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
    client = openai.OpenAI(base_url=server.url + path + "/v1", api_key="test", max_retries=0)
    got: dict[str, Any] = {"text": "", "ids": set(), "finish": [], "error": None}
    try:
        stream = client.chat.completions.create(
            model="fake-gpt",
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=True,
            extra_headers=headers,
            extra_query=query or None,
        )
        for chunk in stream:
            got["ids"].add(chunk.id)
            for choice in chunk.choices:
                got["text"] += choice.delta.content or ""
                if choice.finish_reason:
                    got["finish"].append(choice.finish_reason)
    except Exception as exc:
        got["error"] = exc
    return got


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
