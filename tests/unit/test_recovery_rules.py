"""The sans-I/O recovery's rules, one example each where a property alone would catch a change only by
chance: the ids and values a splice rewrites, the open block or part a re-run takes over, the usage of a
failed re-run, the backoff, the request faults, the "diverged" rule, a whole re-run's end marker, a run
that had not shown its format yet, and what an exception says (its status, its Retry-After).
"""

from __future__ import annotations

import email.utils
import json
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from sse_middleware._core.recovery import Failure, GiveUp, Recoverer, Retry, Whole, prefill
from sse_middleware._core.recovery.raised import request_fault, retry_after, status_of
from sse_middleware._core.sse import parse
from sse_middleware._core.tokens import estimate_tokens

from ..support.upstream import ANSWER, anthropic_events, chat_events, sse, tokens
from .test_recovery_splice import anthropic_read, chat_read, continue_, run, ui_events, ui_read

PARTS = tokens(ANSWER)


# -- what a splice rewrites -----------------------------------------------------------------------------
def test_a_spliced_chat_chunk_takes_the_first_chunks_created() -> None:
    """The re-run's chunks carry their own ``created``; the client's answer has one value throughout."""
    first = chat_events(PARTS, "chatcmpl-A")[:7]
    rerun = [e.replace(b"1700000000", b"1800000000") for e in chat_events(PARTS, "chatcmpl-B")]
    body, _ = run(continue_(), first, [rerun], raised=True)
    created = {json.loads(e.data)["created"] for e in parse(body) if e.data != "[DONE]"}
    assert created == {1700000000} and chat_read(body)["text"] == ANSWER


def test_an_anthropic_restart_that_catches_up_at_its_last_delta_takes_over_the_open_block() -> None:
    """The client had every text delta of the block, not its stop; the restart's block catches up at
    its last delta, with nothing new: it still becomes the client's open block, so its stop closes it."""
    first = anthropic_events(PARTS, "msg_A")[: 3 + len(PARTS)]  # start, block start, ping, every delta
    body, decision = run(continue_(), first, [anthropic_events(PARTS, "msg_B")], raised=True)
    got = anthropic_read(body)
    assert isinstance(decision, Retry) and got["text"] == ANSWER
    assert got["indices"] == [0] and not got["open"] and got["ended"] and not got["errors"]


def test_an_ai_sdk_rerun_part_never_reuses_an_id_the_client_has() -> None:
    """The client's part ``a`` ended before the failure; the re-run opens a new part, also ``a``: it goes
    out under another id, so the client never sees ``a`` started twice."""
    first = ui_events(PARTS, "m-A", "a")[:-3]  # through text-end: no finish-step, finish, [DONE]
    error = sse({"type": "error", "errorText": "overloaded"})
    more = ui_events(tokens("And a second part."), "m-B", "a")
    body, decision = run(continue_(), [*first, error], [more])
    assert isinstance(decision, Retry)
    starts = [json.loads(e.data)["id"] for e in parse(body) if '"text-start"' in e.data]
    assert starts == ["a", "a-r1"] and ui_read(body)["text"] == ANSWER + "And a second part."


def test_a_failed_reruns_usage_is_its_own() -> None:
    """Three attempts: the first run and the first re-run failed before their counts arrived, each is
    estimated from its own output (the re-run's: everything it streamed, repeats included)."""
    first = chat_events(PARTS, "chatcmpl-A")[:9]  # 8 tokens
    rerun = chat_events(PARTS, "chatcmpl-B")[:13]  # a restart cut after 12
    last = chat_events(PARTS, "chatcmpl-C", usage=(25, 40))
    body, decision = run(continue_(), first, [rerun, last], raised=True)
    assert isinstance(decision, Retry) and decision.recovery.attempt == 2
    estimates = estimate_tokens(len("".join(PARTS[:8]))) + estimate_tokens(len("".join(PARTS[:12])))
    usage = chat_read(body)["usage"]
    assert usage["completion_tokens"] == 40 + estimates and usage["prompt_tokens"] == 75


def test_the_backoff_starts_at_recover_backoff_and_doubles() -> None:
    recoverer = Recoverer("continue", 3, 0.25)
    delays = []
    for _ in range(3):
        decision = recoverer.fail(Failure("exception"), b"{}")
        assert isinstance(decision, Retry)
        delays.append(decision.delay)
    assert delays == [0.25, 0.5, 1.0]
    assert isinstance(recoverer.fail(Failure("exception")), GiveUp)


def test_the_apps_own_prefill_is_continued_not_replaced() -> None:
    """A request that already ends with the app's assistant turn: the client's text is appended to it."""
    request: dict[str, list[Any]] = {
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "Sure: "}]
    }
    asked = prefill(json.dumps(request).encode(), "anthropic", "half an answer")
    assert asked is not None
    assert json.loads(asked.body)["messages"][-1] == {"role": "assistant", "content": "Sure: half an answer"}
    blocks = {"role": "assistant", "content": [{"type": "text", "text": "Sure: "}]}
    request["messages"][-1] = blocks
    asked = prefill(json.dumps(request).encode(), "openai", "half")
    assert asked is not None
    last = json.loads(asked.body)["messages"][-1]
    assert last["content"] == [{"type": "text", "text": "Sure: "}, {"type": "text", "text": "half"}]


# The error types that say the request (or a filter) is at fault, written out here: a test that read the
# package's own set would change with it.
@pytest.mark.parametrize(
    "kind",
    [
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "content_filter",
        "invalid_output",
        "blocked",
    ],
)
def test_a_request_fault_error_event_is_no_trigger(kind: str) -> None:
    bad = sse({"error": {"message": "no", "type": kind, "param": None, "code": None}})
    body, decision = run(continue_(), [*chat_events(PARTS, "chatcmpl-A")[:4], bad], [])
    assert decision is None and chat_read(body)["errors"][0]["type"] == kind


def test_a_server_error_event_is_a_trigger() -> None:
    """The control: the same event with ``server_error`` is re-run."""
    bad = sse({"error": {"message": "no", "type": "server_error", "param": None, "code": None}})
    _, decision = run(continue_(), [*chat_events(PARTS, "chatcmpl-A")[:4], bad], [])
    assert isinstance(decision, Retry) and decision.recovery.reason == "upstream_error"


# -- the "diverged" rule --------------------------------------------------------------------------------
def test_a_rerun_whose_first_delta_repeats_then_departs_is_diverged() -> None:
    """One delta that begins like the client's text and departs inside itself (``"Streaming is"`` where
    the client has ``"Streaming moves"``): neither a restart nor a continuation."""
    first = chat_events(PARTS, "chatcmpl-A")[:6]
    rerun = chat_events(["Streaming is ", "different."], "chatcmpl-B")
    body, decision = run(continue_(), first, [rerun], raised=True)
    assert isinstance(decision, Retry) and decision.recovery.reason == "diverged"
    assert chat_read(body)["text"] == "".join(PARTS[:5])


def test_a_continuation_that_differs_at_its_first_character_is_passed_whole() -> None:
    """The control for the rule: a first delta that departs at once is a continuation."""
    first = chat_events(PARTS, "chatcmpl-A")[:6]
    rest = tokens(ANSWER[len("".join(PARTS[:5])) :])
    body, decision = run(continue_(), first, [chat_events(rest, "chatcmpl-B")], raised=True)
    assert isinstance(decision, Retry) and decision.recovery.reason != "diverged"
    assert chat_read(body)["text"] == ANSWER


@pytest.mark.parametrize("fmt", ["anthropic", "ai-sdk"])
def test_a_rerun_that_repeats_part_then_departs_is_diverged(fmt: str) -> None:
    other = tokens(ANSWER[:20] + "something else entirely.")
    if fmt == "anthropic":
        first = anthropic_events(PARTS, "msg_A")[:11]  # 8 tokens
        rerun = anthropic_events(other, "msg_B")
    else:
        first = ui_events(PARTS, "m-A", "a")[:11]
        rerun = ui_events(other, "m-B", "b")
    body, decision = run(continue_(), first, [rerun], raised=True)
    assert isinstance(decision, Retry) and decision.recovery.reason == "diverged"
    text = anthropic_read(body)["text"] if fmt == "anthropic" else ui_read(body)["text"]
    assert text == "".join(PARTS[:8])


def test_a_rerun_that_ends_inside_the_clients_text_is_diverged() -> None:
    """A restart that stops (its finish reason) before it caught up has less than the client."""
    first = chat_events(PARTS, "chatcmpl-A")[:9]
    body, decision = run(continue_(), first, [chat_events(PARTS[:3], "chatcmpl-B")], raised=True)
    assert isinstance(decision, Retry) and decision.recovery.reason == "diverged"
    assert chat_read(body)["text"] == "".join(PARTS[:8]) and not chat_read(body)["finishes"]


# -- how a run ends ------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_whole_rerun_owes_its_end_marker(fmt: str) -> None:
    if fmt == "openai":
        first, rerun = chat_events(PARTS, "chatcmpl-A")[:7], chat_events(PARTS, "chatcmpl-B")[:-1]
        marker = b"data: [DONE]\n\n"
    else:
        first, rerun = anthropic_events(PARTS, "msg_A")[:9], anthropic_events(PARTS, "msg_B")[:-1]
        marker = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    recoverer = continue_()
    recoverer.feed(b"".join(first))
    assert recoverer.end() is not None  # the first run: truncated
    assert isinstance(recoverer.fail(Failure("exception"), b"{}"), Retry)
    recoverer.feed(b"".join(rerun))
    assert recoverer.end() is None and recoverer.owed() == marker
    assert recoverer.owed() is None  # owed once


def test_a_rerun_that_fails_after_its_finish_reason_ends_whole() -> None:
    recoverer = continue_()
    recoverer.feed(b"".join(chat_events(PARTS, "chatcmpl-A")[:7]))
    assert isinstance(recoverer.fail(Failure("exception"), b"{}"), Retry)
    recoverer.feed(b"".join(chat_events(PARTS, "chatcmpl-B")[:-1]))
    assert recoverer.fail(Failure("exception"), b"{}") == Whole(b"data: [DONE]\n\n")


def test_a_first_run_that_fails_after_its_finish_reason_gives_up() -> None:
    """The control: on a first run the stream is the app's own, and ends as without recovery."""
    recoverer = continue_()
    recoverer.feed(b"".join(chat_events(PARTS, "chatcmpl-A")[:-1]))
    decision = recoverer.fail(Failure("exception"), b"{}")
    assert isinstance(decision, GiveUp) and "whole" in decision.why


def test_a_run_that_showed_no_event_is_rerun_and_its_format_learned() -> None:
    recoverer = Recoverer("retry", 2, 0.25)
    assert recoverer.feed(b": ping\n\n")[1] is None
    decision = recoverer.fail(Failure("stall"), b'{"q":1}')
    assert isinstance(decision, Retry) and decision.body == b'{"q":1}'
    assert (decision.recovery.dialect, decision.recovery.text) == ("", "")
    out, failure = recoverer.feed(b"".join(anthropic_events(PARTS, "msg_B")))
    assert failure is None and recoverer.end() is None
    assert anthropic_read(b"".join(out))["text"] == ANSWER
    assert recoverer.transcript is not None and recoverer.transcript.name == "anthropic"


def test_a_retry_after_is_the_delay_up_to_the_maximum() -> None:
    recoverer = Recoverer("continue", 3, 0.25)
    waited = recoverer.fail(Failure("exception"), b"{}", wait=2.0)
    assert isinstance(waited, Retry) and waited.delay == 2.0
    shorter = recoverer.fail(Failure("exception"), b"{}", wait=0.1)
    assert isinstance(shorter, Retry) and shorter.delay == 0.5  # the backoff, when it is longer
    too_long = recoverer.fail(Failure("exception"), b"{}", wait=31.0)
    assert isinstance(too_long, GiveUp) and "31 s" in too_long.why


# -- what an exception says ----------------------------------------------------------------------------
def _response(status: int, **headers: str) -> httpx2.Response:
    return httpx2.Response(status, headers=headers, request=httpx2.Request("POST", "http://u/v1"))


def _exceptions() -> list[tuple[BaseException, int | None, float | None]]:
    request = httpx.Request("POST", "http://u/v1")
    limited = httpx.Response(429, headers={"Retry-After": "7"}, request=request)
    date = email.utils.formatdate(1_000_060, usegmt=True)
    return [
        (openai.BadRequestError("bad", response=_response(400), body=None), 400, None),
        (
            openai.RateLimitError("slow", response=_response(429, **{"retry-after-ms": "1500"}), body=None),
            429,
            1.5,
        ),
        (
            anthropic.InternalServerError("x", response=_response(503, **{"retry-after": date}), body=None),
            503,
            60.0,
        ),
        (httpx.HTTPStatusError("429", request=request, response=limited), 429, 7.0),
        (ConnectionResetError("gone"), None, None),
        (openai.APIConnectionError(request=request), None, None),  # type: ignore[arg-type]
    ]


@pytest.mark.parametrize(("exc", "status", "wait"), _exceptions(), ids=lambda v: type(v).__name__)
def test_what_an_exception_says(exc: BaseException, status: int | None, wait: float | None) -> None:
    assert status_of(exc) == status
    assert retry_after(exc, now=1_000_000) == wait
    assert request_fault(exc) == (status if status == 400 else None)


def test_a_status_is_read_through_what_the_exception_was_raised_from() -> None:
    try:
        try:
            raise openai.NotFoundError("gone", response=_response(404), body=None)
        except openai.APIStatusError as inner:
            raise RuntimeError("the relay failed") from inner
    except RuntimeError as outer:
        assert request_fault(outer) == 404
    assert request_fault(_Status(409)) is None and request_fault(_Status(422)) == 422


class _Status(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status_code = status


# -- a continuation with nothing more to say -------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["anthropic", "ai-sdk"])
def test_an_empty_continuation_block_closes_the_clients_open_block(fmt: str) -> None:
    """The client had the whole text, not the block's (part's) end; the re-run continues with an empty
    block: it ends the client's open block (before: dropped, and the client's block never stopped)."""
    if fmt == "anthropic":
        first = anthropic_events(PARTS, "msg_A")[: 3 + len(PARTS)]
        body, _ = run(continue_(), first, [anthropic_events([], "msg_B")], raised=True)
        got = anthropic_read(body)
        assert got["text"] == ANSWER and got["indices"] == [0] and not got["open"] and got["ended"]
        return
    first = ui_events(PARTS, "m-A", "a")[: 3 + len(PARTS)]
    body, _ = run(continue_(), first, [ui_events([], "m-B", "b")], raised=True)
    ends = [json.loads(e.data)["id"] for e in parse(body) if '"text-end"' in e.data]
    assert ends == ["a"] and ui_read(body)["text"] == ANSWER and ui_read(body)["parts"] == {"a"}
