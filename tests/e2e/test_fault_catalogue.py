"""failoverbench's faults that a middleware can act on, in our own suite: examples/relay.py (the relay
docs/recovery.md shows: the official SDKs call a primary and a fallback provider, ``recovery()`` picks
the fallback for a re-run, ``recover="continue"``) under uvicorn, in front of the fake provider of
:mod:`tests.support.upstream`, read by the official openai and anthropic SDKs.

Every client ends with the whole answer, byte for byte and once, or with a clean error (the SDK's
``APIError`` from the format's error event, holding what it had): never a truncated answer that reads
as success. The provider's log counts the attempts: never more re-runs than ``recover_attempts``, and
nothing after a 4xx but a 429's wait. The control: the same routes without the middleware, where
each fault reaches the client.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from ..support.servers import Server, uvicorn
from ..support.upstream import ANSWER, tokens

pytestmark = pytest.mark.timeout(120)
ATTEMPTS = 2  # recover_attempts
STALL = 3  # stall_timeout (s): a fault's silence lasts until the client leaves, a token's gap 2 ms
FIRST = "".join(tokens(ANSWER)[:6])  # what the client has when a primary fails at cut@6
MESSAGES: Any = [{"role": "user", "content": "Why stream?"}]
SHAPES = ("openai", "anthropic")


@pytest.fixture(scope="module")
def upstream() -> Iterator[Server]:
    with uvicorn("tests.support.upstream:app") as server:
        yield server


def providers(upstream: Server) -> dict[str, str]:
    return {"RELAY_PRIMARY_URL": upstream.url, "RELAY_FALLBACK_URL": upstream.url + "/fallback"}


@pytest.fixture(scope="module")
def relay(upstream: Server) -> Iterator[Server]:
    env = {
        **providers(upstream),
        "SSE_MIDDLEWARE_STALL_TIMEOUT": str(STALL),
        "SSE_MIDDLEWARE_RECOVER_ATTEMPTS": str(ATTEMPTS),
        "SSE_MIDDLEWARE_RECOVER_BACKOFF": "0.05",
    }
    with uvicorn("examples.relay:app", env) as server:
        yield server


@pytest.fixture(scope="module")
def bare(upstream: Server) -> Iterator[Server]:
    with uvicorn("tests.support.apps_relay:app", providers(upstream)) as server:
        yield server


@dataclasses.dataclass
class Read:
    """What a client read: the text, the finish reasons, the response ids, and what it raised."""

    text: str = ""
    finish: list[str] = dataclasses.field(default_factory=list)
    ids: set[str] = dataclasses.field(default_factory=set)
    error: Exception | None = None


def ask(shape: str, server: Server, model: str, timeout: float = 30) -> Read:
    """One streamed answer from ``server`` with the official SDK of ``shape``."""
    got = Read()
    try:
        if shape == "openai":
            gpt = openai.OpenAI(
                base_url=server.url + "/v1",
                api_key="unused",
                max_retries=0,
                timeout=timeout,
            )
            for chunk in gpt.chat.completions.create(model=model, messages=MESSAGES, stream=True):
                got.ids.add(chunk.id)
                for choice in chunk.choices:
                    got.text += choice.delta.content or ""
                    got.finish += [choice.finish_reason] if choice.finish_reason else []
        else:
            claude = anthropic.Anthropic(
                base_url=server.url,
                api_key="unused",
                max_retries=0,
                timeout=timeout,
            )
            with claude.messages.stream(model=model, max_tokens=500, messages=MESSAGES) as stream:
                for text in stream.text_stream:
                    got.text += text
                final = stream.get_final_message()
            got.ids.add(final.id)
            got.finish += [final.stop_reason] if final.stop_reason else []
    except Exception as exc:  # the SDK's errors, or its HTTP client's (a broken connection)
        got.error = exc
    return got


def clean(error: Exception) -> bool:
    """An error the SDK read from the stream or the response, not a broken or silent connection."""
    return isinstance(error, openai.APIError | anthropic.APIError) and not isinstance(
        error, openai.APIConnectionError | anthropic.APIConnectionError
    )


def attempts(upstream: Server, run: str) -> list[str]:
    """Each request the provider got for ``run``: its provider's initial and its status, e.g. "p200"."""
    log = httpx.get(f"{upstream.url}/attempts/{run}", timeout=30).json()
    return [f"{entry['provider'][0]}{entry['status']}" for entry in log]


def first_attempts(upstream: Server, run: str) -> list[str]:
    """``attempts`` once there is one: a client that gave up early may leave before its relay asked."""
    for _ in range(100):
        seen = attempts(upstream, run)
        if seen:
            return seen
        time.sleep(0.1)
    return []


def model(primary: str, fallback: str = "") -> tuple[str, str]:
    """A model name that plays ``primary`` and ``fallback`` (see tests/support/upstream.py), and its run."""
    run = uuid.uuid4().hex
    parts = ["fake", f"primary={primary}", *([f"fallback={fallback}"] if fallback else []), f"run={run}"]
    return ",".join(parts), run


@dataclasses.dataclass(frozen=True)
class Case:
    primary: str
    fallback: str  # the fallback's fault ("" for none)
    whole: bool  # the client reads the whole answer (else: a clean error, with what it had)
    seen: str  # the provider's log: "p200 f400": the primary answered 200, then the fallback 400
    fresh: bool = False  # nothing went out before the failure: the client's stream is the fallback's, its id


def catalogue(name: str, *case: Any) -> list[Any]:
    """The case ``name`` for both shapes."""
    return [pytest.param(shape, Case(*case), id=f"{name}-{shape}") for shape in SHAPES]


CASES = [
    *catalogue("cut", "cut@6", "", True, "p200 f200"),
    *catalogue("cut-before-text", "cut@0", "", True, "p200 f200"),
    *catalogue("overloaded", "overload@6", "", True, "p200 f200"),
    *catalogue("malformed-chunk", "malformed@6", "", True, "p200 f200"),
    *catalogue("stall", "stall@6", "", True, "p200 f200"),
    *catalogue("slow-first-token", "slow", "", True, "p200 f200", True),
    *catalogue("ends-early", "truncate@12", "", True, "p200 f200"),
    *catalogue("no-end-marker", "no-end", "", True, "p200"),
    *catalogue("no-end-marker-on-re-run", "cut@6", "no-end", True, "p200 f200"),
    *catalogue("fallback-rejects-prefill", "cut@6", "no-prefill", False, "p200 f400"),
    *catalogue("fallback-rejects-prefill-before-text", "cut@0", "no-prefill", True, "p200 f200"),
    *catalogue("4xx-on-re-run", "cut@6", "status@400", False, "p200 f400"),
    *catalogue("5xx-on-re-run", "cut@6", "status@503", False, "p200 f503 f503"),  # a 5xx is worth another
    *catalogue("429-on-re-run", "cut@6", "rate-limit@2", True, "p200 f429 f200"),
    *catalogue("every-re-run-fails", "cut@6", "cut@0", False, "p200 f200 f200"),
]


@pytest.mark.parametrize(("shape", "case"), CASES)
def test_every_client_ends_whole_or_with_a_clean_error(
    relay: Server, upstream: Server, shape: str, case: Case
) -> None:
    name, run = model(case.primary, case.fallback)
    got = ask(shape, relay, name)
    seen = attempts(upstream, run)
    # Never more attempts than recover_attempts, and nothing after a refusal but a 429's wait.
    assert seen[0].startswith("p") and not any(s.startswith("p") for s in seen[1:]), seen
    assert len(seen) <= 1 + ATTEMPTS, seen
    assert not any(s.startswith(("f4", "p4")) and not s.endswith("429") for s in seen[:-1]), seen
    if got.error is None:  # success is the whole answer, once, as one ordinary stream
        assert got.text == ANSWER
        assert got.finish == ["stop" if shape == "openai" else "end_turn"]
        n = 2 if case.fresh else 1
        assert got.ids == {f"chatcmpl-{n}" if shape == "openai" else f"msg-{n}"}
    else:  # a clean error, and the client kept exactly what it had: never the re-run's refusal
        assert clean(got.error), repr(got.error)
        assert got.text != ANSWER, f"the whole answer, then {got.error!r}"
        assert ANSWER.startswith(got.text), got.text
        assert not any(said in str(got.error) for said in ("prefill", "refused with", "Rate limited"))
    assert (got.error is None) is case.whole, got.error
    assert case.whole or got.text == FIRST  # every give-up here follows a cut@6: the six tokens, once
    assert " ".join(seen) == case.seen


CONTROLS = ["cut@6", "cut@0", "overload@6", "malformed@6", "stall@6", "slow", "truncate@12"]


@pytest.mark.parametrize("shape", SHAPES)
def test_control_without_the_middleware_each_fault_reaches_the_client(
    bare: Server, upstream: Server, shape: str
) -> None:
    """The same routes without the middleware: the client reads part of the answer, then a broken or
    timed out connection, or nothing (a body that ended early reads as the end), and the fallback is
    never asked. (A missing end marker is no fault through these routes: the SDKs end their iteration,
    and the relay writes its own end after a finish reason.)"""
    for primary in CONTROLS:
        name, run = model(primary)
        got = ask(shape, bare, name, timeout=STALL)  # a silent provider: the client gives up
        assert got.text != ANSWER and ANSWER.startswith(got.text), (primary, got.text)
        assert got.error is None or not clean(got.error), (primary, got.error)
        assert first_attempts(upstream, run) == ["p200"], primary
