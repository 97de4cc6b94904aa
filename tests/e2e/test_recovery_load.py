"""Recovery under load: 100 concurrent streams through uvicorn, each first attempt failing at a random
token (a cut connection or the provider's error event), ``stall_timeout=1``, read by the official OpenAI
and Anthropic SDKs while two busy loops hold both cores. Every client reads the whole answer.

What it guards: a re-run waits for its upstream's answer (a new connection, a loaded machine) before its
response starts. That wait is not silence, as a first run's is not; when it counted against
``stall_timeout``, a third to two thirds of these streams gave up.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from ..support.servers import Server, uvicorn
from ..support.upstream import ANSWER, tokens

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
APP = "tests.support.apps_recovery:app"
MESSAGES = [{"role": "user", "content": "Why stream?"}]
SHORT = ANSWER[: ANSWER.index(".") + 1]  # its first sentence: a stream's cost is its tokens'
PARTS = tokens(SHORT)
STREAMS = 100


@pytest.fixture(scope="module")
def upstream() -> Iterator[Server]:
    with uvicorn("tests.support.upstream:app") as server:
        yield server


@pytest.fixture(scope="module")
def relay(upstream: Server) -> Iterator[Server]:
    env = {
        "UPSTREAM_URL": upstream.url,
        "SSE_MIDDLEWARE_RECOVER": "continue",
        "SSE_MIDDLEWARE_STALL_TIMEOUT": "1",
    }
    with uvicorn(APP, env) as server:
        yield server


@pytest.fixture
def busy_cores() -> Iterator[None]:
    """Two processes spinning, one per core, for the test's length."""
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for proc in spinning:
            proc.kill()
            proc.wait()


def _fault(rng: random.Random) -> dict[str, str]:
    kind = rng.choice(["cut", "overload"])
    fault = f"{kind}@{rng.randrange(len(PARTS))}"
    return {"x-fault": fault, "x-fault-key": uuid.uuid4().hex, "x-answer": SHORT}


async def _openai(client: openai.AsyncOpenAI, headers: dict[str, str]) -> dict[str, Any]:
    got: dict[str, Any] = {"text": "", "finish": [], "error": None}
    try:
        stream = await client.chat.completions.create(
            model="fake-gpt",
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=True,
            extra_headers=headers,
        )
        async for chunk in stream:
            for choice in chunk.choices:
                got["text"] += choice.delta.content or ""
                if choice.finish_reason:
                    got["finish"].append(choice.finish_reason)
    except Exception as exc:
        got["error"] = repr(exc)
    return got


async def _anthropic(client: anthropic.AsyncAnthropic, headers: dict[str, str]) -> dict[str, Any]:
    got: dict[str, Any] = {"text": "", "finish": [], "error": None}
    try:
        async with client.messages.stream(
            model="fake-claude",
            max_tokens=500,
            messages=MESSAGES,  # type: ignore[arg-type]
            extra_headers=headers,
        ) as stream:
            async for text in stream.text_stream:
                got["text"] += text
            final = await stream.get_final_message()
        got["finish"].append(final.stop_reason)
    except Exception as exc:
        got["error"] = repr(exc)
    return got


async def _all(url: str) -> list[dict[str, Any]]:
    rng = random.Random(40)
    chat = openai.AsyncOpenAI(base_url=url + "/v1", api_key="test", max_retries=0, timeout=90)
    messages = anthropic.AsyncAnthropic(base_url=url, api_key="test", max_retries=0, timeout=90)
    reads = [
        _openai(chat, _fault(rng)) if i % 2 else _anthropic(messages, _fault(rng)) for i in range(STREAMS)
    ]
    try:
        return await asyncio.gather(*reads)
    finally:
        await chat.close()
        await messages.close()


def test_every_client_reads_the_whole_answer_under_load(relay: Server, busy_cores: None) -> None:
    results = asyncio.run(_all(relay.url))
    failed = [r for r in results if r["error"] is not None or r["text"] != SHORT]
    assert not failed, f"{len(failed)} of {STREAMS}: {failed[:3]}"
    assert all(r["finish"] in (["stop"], ["end_turn"]) for r in results)
