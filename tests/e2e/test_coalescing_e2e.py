"""Coalescing end to end: real uvicorn, the official SDKs as clients, controls without the middleware."""

from __future__ import annotations

import time

import anthropic
import openai
import pytest

from ..support.apps import TOKENS
from ..support.clients import read_stream
from ..support.servers import Server, uvicorn

pytestmark = pytest.mark.timeout(120)
N = 240  # tokens, paced at 200 tokens/s: a fast API
QUERY = {"n": N, "delay": 0.005}
EXPECTED = "".join((TOKENS * (N // len(TOKENS) + 1))[:N])
MESSAGES = [{"role": "user", "content": "hi"}]


def openai_pieces(server: Server) -> tuple[list[str], float]:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    pieces: list[str] = []
    start = time.monotonic()
    first = 0.0
    for chunk in client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        stream=True,  # type: ignore[arg-type]
        extra_query=QUERY,
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or time.monotonic() - start
            pieces.append(chunk.choices[0].delta.content)
    return pieces, first


def anthropic_pieces(server: Server) -> tuple[list[str], float]:
    client = anthropic.Anthropic(base_url=server.url, api_key="test", max_retries=0)
    pieces: list[str] = []
    start = time.monotonic()
    first = 0.0
    with client.messages.stream(
        model="m",
        max_tokens=10,
        messages=MESSAGES,  # type: ignore[arg-type]
        extra_query=QUERY,
    ) as stream:
        for text in stream.text_stream:
            first = first or time.monotonic() - start
            pieces.append(text)
    return pieces, first


@pytest.mark.parametrize("read", [openai_pieces, anthropic_pieces], ids=["openai", "anthropic"])
def test_sdk_reads_the_same_text_in_far_fewer_chunks(wrapped: Server, control: Server, read: object) -> None:
    reader = read  # type: ignore[assignment]
    ours, ours_first = reader(wrapped)  # type: ignore[operator]
    theirs, theirs_first = reader(control)  # type: ignore[operator]
    assert "".join(ours) == "".join(theirs) == EXPECTED
    assert len(theirs) == N  # the control: one chunk per token
    assert len(ours) * 4 <= len(theirs), (len(ours), len(theirs))  # several-fold fewer
    assert ours_first < theirs_first + 0.25  # the first token is not held back


def test_first_token_goes_out_at_once(wrapped: Server) -> None:
    """Leading edge: with tokens 0.3 s apart nothing is merged and nothing waits."""
    client = openai.OpenAI(base_url=wrapped.url + "/v1", api_key="test", max_retries=0)
    arrivals = []
    start = time.monotonic()
    for chunk in client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        stream=True,  # type: ignore[arg-type]
        extra_query={"n": 4, "delay": 0.3},
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            arrivals.append(time.monotonic() - start)
    assert len(arrivals) == 4  # slow tokens are never merged
    assert arrivals[0] < 0.3 + 0.2


def test_generic_sse_is_never_merged(wrapped: Server, control: Server) -> None:
    ours, theirs = read_stream(wrapped.url + "/sse?n=30"), read_stream(control.url + "/sse?n=30")
    assert ours.body == theirs.body and len(ours.events) == 30


def test_coalescing_off_forwards_every_token() -> None:
    with uvicorn("tests.support.apps:app", {"SSE_MIDDLEWARE_COALESCE": "false"}) as server:
        pieces, _ = openai_pieces(server)
    assert len(pieces) == N and "".join(pieces) == EXPECTED


def test_text_plain_stream_is_merged_and_complete(wrapped: Server, control: Server) -> None:
    ours = read_stream(wrapped.url + "/plain?n=200&delay=0.002")
    theirs = read_stream(control.url + "/plain?n=200&delay=0.002")
    assert ours.body == theirs.body
    assert len(ours.reads) * 3 < len(theirs.reads)
