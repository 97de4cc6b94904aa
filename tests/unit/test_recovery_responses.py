"""A Responses stream recovered after its text reached the client: the re-run continues the client's open
message and text part, and every event that repeats the text repeats what the client got from the
deltas; read back by this repo's strict reader and by the official openai SDK's own stream accumulator."""

from __future__ import annotations

import json
from typing import Any, cast

import httpx2
import openai
import pytest
from openai.lib.streaming.responses import ResponseStream
from openai.types.responses import ResponseStreamEvent

from sse_middleware._core.recovery import GiveUp, Recoverer, Retry
from sse_middleware._core.recovery.anchor import anchor_of

from ..support.responses_streams import MIDDLE, responses_error, responses_events, responses_read
from ..support.upstream import ANSWER, sse, tokens
from ..support.upstream_anchor import reply
from .test_recovery_anchor_body import pump
from .test_recovery_splice import continue_, run

PARTS = tokens(ANSWER)


def first_run(cut: int, overload: bool = True) -> list[bytes]:
    """The client's run: ``cut`` text deltas of its message, then the upstream's error (or a cut)."""
    return responses_events(PARTS, "resp_A")[: MIDDLE + cut] + ([responses_error()] if overload else [])


@pytest.mark.parametrize("cut", [0, 1, 7, len(PARTS) - 1])
@pytest.mark.parametrize("rerun", ["restart", "continuation"])
@pytest.mark.parametrize("overload", [True, False])
def test_responses_cut_after_its_text_is_one_message_with_the_whole_answer(
    cut: int, rerun: str, overload: bool
) -> None:
    rest = PARTS if rerun == "restart" else PARTS[cut:]
    rerun_events = responses_events(rest, "resp_B", usage=(25, 9))
    body, decision = run(continue_(), first_run(cut, overload), [rerun_events], raised=not overload)
    got = responses_read(body)
    assert isinstance(decision, Retry) and decision.recovery.text == "".join(PARTS[:cut])
    assert got["text"] == ANSWER and got["repeats"] == [ANSWER] * 4  # each done event, the final response
    assert got["ids"] == {"resp_A"} and not got["errors"] and got["final"]["status"] == "completed"
    assert got["final"]["usage"]["input_tokens"] == 2 * 25  # the failed attempt sent the same input


def sdk_read(body: bytes) -> tuple[str, list[str], str]:
    """The openai SDK's own reading of a stream (its SSE decoder, its event models and the accumulator
    behind ``client.responses.stream``): the deltas' text, each ``output_text.done``'s, and the final
    response's ``output_text``."""
    client = openai.OpenAI(api_key="test", base_url="http://127.0.0.1:9/v1")
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/responses")  # the SDKs ship their own httpx
    response = httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, content=body, request=request
    )
    raw: openai.Stream[Any] = openai.Stream(
        cast_to=cast(Any, ResponseStreamEvent), response=response, client=client
    )
    stream = ResponseStream(
        raw_stream=raw, text_format=openai.omit, input_tools=openai.omit, starting_after=None
    )
    deltas, dones = "", []
    for event in stream:
        if event.type == "response.output_text.delta":
            deltas += event.delta
        elif event.type == "response.output_text.done":
            dones.append(event.text)
    return deltas, dones, stream.get_final_response().output_text


@pytest.mark.parametrize("rerun", ["restart", "continuation"])
def test_the_openai_sdk_reads_the_spliced_stream_as_one_answer(rerun: str) -> None:
    rest = PARTS if rerun == "restart" else PARTS[9:]
    body, _ = run(continue_(), first_run(9), [responses_events(rest, "resp_B")])
    assert sdk_read(body) == (ANSWER, [ANSWER], ANSWER)


def test_a_diverged_rerun_fails_its_attempt_and_the_client_keeps_its_text() -> None:
    other = tokens(ANSWER[:30] + "something else entirely.")
    body, decision = run(continue_(), first_run(9), [responses_events(other, "resp_B")] * 2)
    assert isinstance(decision, GiveUp) and decision.why.endswith("the last: diverged")
    got = responses_read(body)
    assert got["text"] == "".join(PARTS[:9]) and got["errors"] and got["final"] is None


def test_a_rerun_that_ends_inside_the_clients_text_is_no_answer() -> None:
    short = responses_events(PARTS[:5], "resp_B")
    body, decision = run(continue_(), first_run(9), [short, short])
    assert isinstance(decision, GiveUp) and responses_read(body)["text"] == "".join(PARTS[:9])


def test_reasoning_or_a_tool_call_that_reached_the_client_is_not_continued() -> None:
    """A re-run writes its own reasoning, which cannot follow the client's: with a reasoning item out
    (its summary's text, or none: only the message's text after it), nothing is continued."""
    head, message = responses_events(PARTS, "resp_A")[:2], responses_events(PARTS, "resp_A")[2:9]
    reasoning = {"id": "rs_1", "type": "reasoning", "summary": []}
    added = {"type": "response.output_item.added", "sequence_number": 2, "output_index": 0, "item": reasoning}
    summary = {"type": "response.reasoning_summary_text.delta", "sequence_number": 3, "item_id": "rs_1"}
    summary |= {"output_index": 0, "summary_index": 0, "delta": "Hm."}
    item = sse(added, "response.output_item.added")
    for first in (
        [*head, item, sse(summary, "response.reasoning_summary_text.delta")],
        [*head, item, *message],
    ):
        _, decision = run(continue_(), [*first, responses_error()], [responses_events(PARTS, "resp_B")])
        assert isinstance(decision, GiveUp) and "one output item, a message" in decision.why
    call = {"id": "fc_1", "type": "function_call", "name": "f", "arguments": "", "call_id": "c"}
    first = [*head, sse({**added, "item": call}, "response.output_item.added"), responses_error()]
    _, decision = run(continue_(), first, [])
    assert isinstance(decision, GiveUp) and "tool call" in decision.why


@pytest.mark.parametrize("behaviour", ["exact", "skip", "restart"])
@pytest.mark.parametrize("cut", [9, len(PARTS) - 2])
def test_an_anchored_rerun_is_one_whole_answer(behaviour: str, cut: int) -> None:
    recoverer = Recoverer("continue", 2, 0.25, body="anchor")
    out: list[bytes] = []
    failure = pump(recoverer, first_run(cut), out)
    assert failure is not None
    request = json.dumps({"model": "gpt-5", "input": "Why stream?", "stream": True}).encode()
    decision = recoverer.fail(failure, request)
    assert isinstance(decision, Retry)
    had = json.loads(decision.body)["input"][-2]["content"]
    assert had == "".join(PARTS[:cut])
    text = reply(behaviour, ANSWER, had, anchor_of(had))
    assert pump(recoverer, responses_events(tokens(text), "resp_B"), out, 5) is None
    got = responses_read(b"".join(out))
    assert got["text"] == ANSWER and got["repeats"] == [ANSWER] * 4 and got["ids"] == {"resp_A"}
