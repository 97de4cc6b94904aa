"""Coalescing end to end: real uvicorn, the official SDKs and raw httpx as clients, each against the
same app served without the middleware (the control). Timing bounds are set against the 50 ms window
(``coalesce_max_delay``), each compared with the bare app's own times in the same run, so that a first
token held for one window, or a window twice too long, fails."""

from __future__ import annotations

import itertools

import anthropic
import openai
import pytest

from sse_middleware import StreamingSettings
from sse_middleware._core.sse import Event

from ..support.apps import TOKENS
from ..support.clients import read_stream
from ..support.servers import Server, uvicorn

pytestmark = pytest.mark.timeout(120)
N = 240  # tokens, paced at 200 tokens/s: a fast API
QUERY = {"n": N, "delay": 0.005}
EXPECTED = "".join((TOKENS * (N // len(TOKENS) + 1))[:N])
MESSAGES = [{"role": "user", "content": "hi"}]


WINDOW = StreamingSettings().coalesce_max_delay  # 50 ms
JITTER = 0.02  # scheduling noise allowed on top, well under one window


def openai_pieces(server: Server) -> list[str]:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    pieces: list[str] = []
    for chunk in client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        stream=True,  # type: ignore[arg-type]
        extra_query=QUERY,
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
    return pieces


def anthropic_pieces(server: Server) -> list[str]:
    client = anthropic.Anthropic(base_url=server.url, api_key="test", max_retries=0)
    pieces: list[str] = []
    with client.messages.stream(
        model="m",
        max_tokens=10,
        messages=MESSAGES,  # type: ignore[arg-type]
        extra_query=QUERY,
    ) as stream:
        for text in stream.text_stream:
            pieces.append(text)
    return pieces


@pytest.mark.parametrize("read", [openai_pieces, anthropic_pieces], ids=["openai", "anthropic"])
def test_sdk_reads_the_same_text_in_far_fewer_chunks(wrapped: Server, control: Server, read: object) -> None:
    reader = read  # type: ignore[assignment]
    ours, theirs = reader(wrapped), reader(control)  # type: ignore[operator]
    assert "".join(ours) == "".join(theirs) == EXPECTED
    assert len(theirs) == N  # the control: one chunk per token
    assert len(ours) * 4 <= len(theirs), (len(ours), len(theirs))  # several-fold fewer


def content_times(url: str, *, since_first_event: bool = False) -> list[float]:
    """When each piece of content text arrived (s since the request, or since the stream's first event,
    which leaves out the connection and the app's start), read raw with httpx."""
    seen = read_stream(url)
    assert seen.error is None
    events = [(t, item) for t, item in seen.items if isinstance(item, Event)]
    start = events[0][0] if since_first_event else 0.0
    return [t - start for t, item in events if '"content":"' in item.data and '"content":""' not in item.data]


@pytest.fixture(scope="module")
def fast(wrapped: Server, control: Server) -> dict[str, list[list[float]]]:
    """Three runs of a fast stream (240 tokens, 5 ms apart) through each server, timed from the stream's
    first event (the role chunk, which nothing holds): the client's setup and the connection, which a
    loaded machine stretches by tens of milliseconds either way, are not the middleware's."""
    path = "/openai?n=240&delay=0.005"
    return {
        name: [content_times(server.url + path, since_first_event=True) for _ in range(3)]
        for name, server in (("ours", wrapped), ("theirs", control))
    }


def test_the_first_token_is_never_delayed(fast: dict[str, list[list[float]]]) -> None:
    """The leading edge, end to end: the first token arrives as soon as without the middleware (best of
    three runs each), not one window later."""
    ours, theirs = (min(run[0] for run in fast[name]) for name in ("ours", "theirs"))
    assert ours < theirs + JITTER, (ours, theirs)


def test_no_text_waits_longer_than_the_window(fast: dict[str, list[list[float]]]) -> None:
    """Merged pieces leave at least once per window while tokens flow: the longest silence between two
    pieces is at most the app's own longest one plus the window (and merging did happen)."""
    for ours, theirs in zip(fast["ours"], fast["theirs"], strict=True):
        assert len(ours) * 4 <= len(theirs)  # merged: otherwise the bound below would prove nothing
        gaps = [b - a for a, b in itertools.pairwise(ours)]
        app_gaps = [b - a for a, b in itertools.pairwise(theirs)]
        assert max(gaps) < max(app_gaps) + WINDOW + JITTER, (max(gaps), max(app_gaps))


def test_slow_tokens_each_go_out_at_once(wrapped: Server, control: Server) -> None:
    """Tokens 0.3 s apart: each is the first after a silence, so none is merged and none waits; every
    arrival within JITTER of the bare app's (best of two runs each), counted from the stream's first event
    (the role chunk, sent at once) so that a loaded machine's slower request start is not counted."""
    path = "/openai?n=4&delay=0.3"

    def best_of_two(server: Server) -> list[float]:
        runs = [content_times(server.url + path, since_first_event=True) for _ in range(2)]
        return [min(t) for t in zip(*runs, strict=True)]

    ours, theirs = best_of_two(wrapped), best_of_two(control)
    assert len(ours) == len(theirs) == 4  # slow tokens are never merged
    assert all(o < t + JITTER for o, t in zip(ours, theirs, strict=True)), (ours, theirs)


def test_generic_sse_is_never_merged(wrapped: Server, control: Server) -> None:
    ours, theirs = read_stream(wrapped.url + "/sse?n=30"), read_stream(control.url + "/sse?n=30")
    assert ours.body == theirs.body and len(ours.events) == 30


def test_coalescing_off_forwards_every_token() -> None:
    with uvicorn("tests.support.apps:app", {"SSE_MIDDLEWARE_COALESCE": "false"}) as server:
        pieces = openai_pieces(server)
    assert len(pieces) == N and "".join(pieces) == EXPECTED


def test_text_plain_stream_is_merged_and_complete(wrapped: Server, control: Server) -> None:
    ours = read_stream(wrapped.url + "/plain?n=200&delay=0.002")
    theirs = read_stream(control.url + "/plain?n=200&delay=0.002")
    assert ours.body == theirs.body
    assert len(ours.reads) * 3 < len(theirs.reads)
