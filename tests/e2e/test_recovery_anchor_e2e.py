"""Continuation without prefill, end to end: the official openai SDK as the client of the relay
docs/recovery.md shows (``client.chat.completions.create(**body)``, verbatim), behind the middleware,
whose own official SDK talks to a fake upstream with no prefill (:mod:`tests.support.upstream_anchor`)
that cuts its first answer and then plays a model asked to repeat its last words.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from ..support.sdk_reads import MESSAGES, chat_answer
from ..support.servers import Server, uvicorn
from ..support.upstream_anchor import SAMPLES, pieces

pytestmark = pytest.mark.timeout(120)
RELAY = "tests.support.upstream_anchor:relay"


@pytest.fixture(scope="module")
def upstream() -> Iterator[Server]:
    with uvicorn("tests.support.upstream_anchor:upstream") as server:
        yield server


def relay(upstream: Server, body: str) -> Iterator[Server]:
    env = {
        "UPSTREAM_URL": upstream.url,
        "SSE_MIDDLEWARE_RECOVER": "continue",
        "SSE_MIDDLEWARE_RECOVER_BODY": body,
        "SSE_MIDDLEWARE_RECOVER_BACKOFF": "0.05",
    }
    with uvicorn(RELAY, env) as server:
        yield server


@pytest.fixture(scope="module")
def auto(upstream: Server) -> Iterator[Server]:
    yield from relay(upstream, "auto")


@pytest.fixture(scope="module")
def prefilling(upstream: Server) -> Iterator[Server]:
    yield from relay(upstream, "prefill")


def ask(server: Server, model: str = "gpt-4o", **meta: str) -> dict[str, Any]:
    """What the openai SDK reads from the relay: text, ids, finish reasons, the exception it raised."""
    return chat_answer(server.url + "/v1", model, metadata=meta)


def seen(upstream: Server, key: str) -> list[Any]:
    return httpx.get(f"{upstream.url}/requests/{key}").json()  # type: ignore[no-any-return]


def had(sample: str, cut: int) -> str:
    return "".join(pieces(SAMPLES[sample])[:cut])


@pytest.mark.parametrize(
    ("sample", "behaviour"), [("prose", "exact"), ("code", "whitespace"), ("cjk", "exact"), ("table", "skip")]
)
def test_an_upstream_without_prefill_continues_the_answer(
    auto: Server, upstream: Server, sample: str, behaviour: str
) -> None:
    key = uuid.uuid4().hex
    got = ask(auto, key=key, cut="9", behaviour=behaviour, sample=sample)
    assert got["error"] is None, got["error"]
    assert got["text"] == SAMPLES[sample]
    assert got["ids"] == {"chatcmpl-1"} and got["finish"] == ["stop"]
    first, second = seen(upstream, key)
    assert second["messages"][:-2] == first["messages"] == MESSAGES
    assert second["messages"][-2] == {"role": "assistant", "content": had(sample, 9)}
    assert second["messages"][-1]["role"] == "user"
    assert not any(m["role"] == "system" for m in second["messages"])


def test_a_paraphrase_gives_up_with_exactly_what_the_client_had(auto: Server, upstream: Server) -> None:
    """The control: a model that never repeats the anchor. Every attempt fails; the client keeps its
    text, once, and gets the first failure's error."""
    key = uuid.uuid4().hex
    got = ask(auto, key=key, cut="9", behaviour="paraphrase", sample="prose")
    assert isinstance(got["error"], openai.APIError)
    assert got["text"] == had("prose", 9)
    assert len(seen(upstream, key)) == 3  # the first run and two re-runs


def test_a_refused_prefill_falls_back_to_the_anchor(auto: Server, upstream: Server) -> None:
    """``auto`` asks a DeepSeek model with a prefill; this upstream answers 400 (the relay's SDK raises
    ``BadRequestError``). The client never sees that 400: the next re-run asks with the anchor."""
    key = uuid.uuid4().hex
    got = ask(auto, "deepseek-chat", key=key, cut="9", prefill="refuse", sample="prose")
    assert got["error"] is None, got["error"]
    assert got["text"] == SAMPLES["prose"]
    _, prefilled, anchored = seen(upstream, key)
    assert prefilled["messages"][-1] == {"role": "assistant", "content": had("prose", 9), "prefix": True}
    assert [m["role"] for m in anchored["messages"]] == ["user", "assistant", "user"]


def test_prefill_through_the_docs_relay_with_the_official_sdk(prefilling: Server, upstream: Server) -> None:
    """``recover_body="prefill"`` forwarded by ``create(**body)``: the SDK takes vLLM's fields from
    ``extra_body`` and sends them at the top level (as top-level keys of the body it raised
    ``TypeError`` on every re-run)."""
    key = uuid.uuid4().hex
    got = ask(prefilling, "my-vllm-model", key=key, cut="9", prefill="honour", sample="prose")
    assert got["error"] is None, got["error"]
    assert got["text"] == SAMPLES["prose"]
    second = seen(upstream, key)[1]
    assert second["continue_final_message"] is True and second["add_generation_prompt"] is False
    assert "extra_body" not in second
    assert second["messages"][-1] == {"role": "assistant", "content": had("prose", 9), "prefix": True}


def test_anthropic_claude_sonnet_4_6_continues_without_prefill(auto: Server, upstream: Server) -> None:
    """The official anthropic SDK on both sides: ``auto`` asks Claude Sonnet 4.6 with the anchor (no
    prefill, which it would refuse), and the client's stream helper reads one whole message."""
    key = uuid.uuid4().hex
    meta = {"key": key, "cut": "9", "behaviour": "whitespace", "sample": "prose", "prefill": "refuse"}
    client = anthropic.Anthropic(base_url=auto.url, api_key="test", max_retries=0)
    with client.messages.stream(
        model="claude-sonnet-4-6",
        max_tokens=500,
        messages=MESSAGES,  # type: ignore[arg-type]
        metadata={"user_id": json.dumps(meta)},
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == SAMPLES["prose"] and final.id == "msg-1" and final.stop_reason == "end_turn"
    _, second = seen(upstream, key)
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert second["messages"][1]["content"] == had("prose", 9)
