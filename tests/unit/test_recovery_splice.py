"""The sans-I/O recovery: what triggers it, what the client has, and the splice of a re-run, per format.

A run is fed to a :class:`Recoverer` in arbitrary chunks, as the shell would; the client's bytes are what
it returned plus, on giving up, the first failure's ending. Each client stream is read back with a reader
as strict as the format's SDK about what matters here: one id, the text once, blocks balanced.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sse_middleware._core.recovery import Failure, GiveUp, Recoverer, Retry, Whole, prefill
from sse_middleware._core.sse import parse

from ..support.responses_streams import MIDDLE, responses_error, responses_events, responses_read
from ..support.tier import examples
from ..support.upstream import (
    ANSWER,
    anthropic_error,
    anthropic_events,
    chat_chunk,
    chat_error,
    chat_events,
    sse,
    tokens,
)

PARTS = tokens(ANSWER)
Chunker = Callable[[bytes], list[bytes]]


def whole(body: bytes) -> list[bytes]:
    return [body]


def run(
    recoverer: Recoverer,
    first: Sequence[bytes],
    reruns: Sequence[Sequence[bytes]],
    *,
    raised: bool = False,
    chunks: Chunker = whole,
) -> tuple[bytes, Retry | GiveUp | Whole | None]:
    """The client's bytes. ``raised``: each run that stops short of its end marker without a failure of
    its own raised instead (a cut connection, seen by the app as an exception)."""
    out: list[bytes] = []
    decision: Retry | GiveUp | Whole | None = None

    def pump(events: Sequence[bytes]) -> Failure | None:
        for chunk in chunks(b"".join(events)):
            got, failure = recoverer.feed(chunk)
            out.extend(got)
            if failure is not None:
                return failure
        ended = recoverer.end()
        transcript = recoverer.transcript
        cut = raised and ended is None and not (transcript is not None and transcript.ended)
        return Failure("exception") if cut else ended

    failure = pump(first)
    for rerun in [*reruns, None]:
        if failure is None:
            break
        decision = recoverer.fail(failure, b"{}")
        if isinstance(decision, GiveUp):
            out.append(decision.failure.ending or b"")
            break
        if isinstance(decision, Whole):
            out.append(decision.marker)
            break
        if rerun is None:  # the test gave no run for this attempt
            break
        failure = pump(rerun)
    return b"".join(out), decision


def chat_read(body: bytes) -> dict[str, Any]:
    """What the openai SDK's accumulator makes of a chat stream (and what it would raise on)."""
    ids, text, reasoning, finishes, roles, errors, usage, done = set(), [], [], [], 0, [], None, False
    for event in parse(body):
        if event.data == "[DONE]":
            done = True
            continue
        obj = json.loads(event.data)
        if "error" in obj:
            errors.append(obj["error"])
            continue
        ids.add(obj["id"])
        usage = obj.get("usage") or usage
        for choice in obj["choices"]:
            delta = choice["delta"]
            roles += delta.get("role") is not None
            text.append(delta.get("content") or "")
            reasoning.append(delta.get("reasoning_content") or "")
            if choice["finish_reason"]:
                finishes.append(choice["finish_reason"])
    return {
        "ids": ids,
        "text": "".join(text),
        "reasoning": "".join(reasoning),
        "finishes": finishes,
        "roles": roles,
        "errors": errors,
        "usage": usage,
        "done": done,
    }


def anthropic_read(body: bytes) -> dict[str, Any]:
    """What the anthropic SDK's accumulator makes of a Messages stream; it raises on what it rejects."""
    starts, blocks, open_, errors, stop, usage, ended = [], {}, set(), [], None, {}, False
    for event in parse(body):
        obj = json.loads(event.data)
        name = event.event
        if name == "message_start":
            starts.append(obj["message"]["id"])
            usage.update(obj["message"]["usage"])
        elif name == "content_block_start":
            assert obj["index"] not in blocks, f"block {obj['index']} started twice"
            blocks[obj["index"]] = [obj["content_block"]["type"], ""]
            open_.add(obj["index"])
        elif name == "content_block_delta":
            assert obj["index"] in open_, f"a delta for block {obj['index']}, which is not open"
            delta = obj["delta"]
            blocks[obj["index"]][1] += delta.get("text", "") + delta.get("thinking", "")
        elif name == "content_block_stop":
            open_.remove(obj["index"])
        elif name == "message_delta":
            stop = obj["delta"]["stop_reason"]
            usage.update({k: v for k, v in obj["usage"].items() if v is not None})
        elif name == "message_stop":
            ended = True
        elif name == "error":
            errors.append(obj["error"])
    text = "".join(t for kind, t in (blocks[i] for i in sorted(blocks)) if kind == "text")
    thinking = "".join(t for kind, t in (blocks[i] for i in sorted(blocks)) if kind == "thinking")
    return {
        "ids": starts,
        "text": text,
        "thinking": thinking,
        "indices": sorted(blocks),
        "open": open_,
        "stop": stop,
        "errors": errors,
        "usage": usage,
        "ended": ended,
    }


def continue_() -> Recoverer:
    return Recoverer("continue", 2, 0.25)


# -- OpenAI chat -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("cut", [0, 1, 7, len(PARTS) - 1])
@pytest.mark.parametrize("rerun", ["restart", "continuation"])
def test_chat_cut_then_spliced_is_one_whole_answer(cut: int, rerun: str) -> None:
    first = chat_events(PARTS, "chatcmpl-A")[: 1 + cut]  # the role chunk and ``cut`` tokens, then the cut
    rest = PARTS if rerun == "restart" else PARTS[cut:]
    body, decision = run(continue_(), first, [chat_events(rest, "chatcmpl-B", usage=(25, 9))], raised=True)
    got = chat_read(body)
    assert isinstance(decision, Retry) and decision.recovery.text == "".join(PARTS[:cut])
    assert got["text"] == ANSWER
    assert got["ids"] == {"chatcmpl-A"}
    assert got["roles"] == 1 and got["finishes"] == ["stop"] and got["done"] and not got["errors"]


@pytest.mark.parametrize("cut", [0, 7])
def test_chat_without_a_rerun_the_cut_stream_is_half_an_answer(cut: int) -> None:
    """The control for the splice: the same first run through the same recoverer, with no re-run to
    splice (``recover_attempts=0``): the client keeps what it had, with the failure's ending."""
    first = [*chat_events(PARTS, "chatcmpl-A")[: 1 + cut], chat_error()]
    body, decision = run(Recoverer("continue", 0, 0.25), first, [chat_events(PARTS, "chatcmpl-B")])
    got = chat_read(body)
    assert isinstance(decision, GiveUp) and "0 re-run(s)" in decision.why
    assert got["text"] == "".join(PARTS[:cut]) and got["errors"] and not got["done"]


def test_chat_upstream_error_chunk_is_held_and_the_rerun_continues() -> None:
    first = [*chat_events(PARTS, "chatcmpl-A")[:6], chat_error()]
    body, decision = run(continue_(), first, [chat_events(PARTS, "chatcmpl-B")])
    got = chat_read(body)
    assert isinstance(decision, Retry) and decision.recovery.reason == "upstream_error"
    assert got["text"] == ANSWER and not got["errors"] and got["ids"] == {"chatcmpl-A"}


def test_chat_gives_up_after_the_attempts_with_the_first_failure() -> None:
    first = [*chat_events(PARTS, "chatcmpl-A")[:6], chat_error()]
    failing = chat_events(PARTS, "chatcmpl-B")[:3]  # each re-run cut again, earlier than the first
    body, decision = run(continue_(), first, [failing, failing, failing], raised=True)
    got = chat_read(body)
    assert isinstance(decision, GiveUp) and decision.failure.reason == "upstream_error"
    assert "2 re-run(s) failed" in decision.why
    assert got["text"] == "".join(PARTS[:5])  # nothing the client had is lost, nothing repeated
    assert got["errors"] and got["errors"][0]["type"] == "server_error"  # the first failure's ending


def test_chat_usage_counts_every_attempt() -> None:
    first = chat_events(PARTS, "chatcmpl-A")[:9]  # 8 tokens went out
    had = "".join(PARTS[:8])
    body, _ = run(continue_(), first, [chat_events(PARTS, "chatcmpl-B", usage=(25, 40))], raised=True)
    usage = chat_read(body)["usage"]
    estimate = -(-len(had) // 4)
    assert usage == {
        "prompt_tokens": 50,
        "completion_tokens": 40 + estimate,
        "total_tokens": 90 + estimate,
    }


def test_chat_tool_call_that_reached_the_client_is_not_continued() -> None:
    head = {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f"}}]}
    first = [chat_chunk("chatcmpl-A", {"role": "assistant"}), chat_chunk("chatcmpl-A", head)]
    _, decision = run(continue_(), first, [], raised=True)
    assert isinstance(decision, GiveUp) and "tool call" in decision.why


def test_chat_finish_reason_length_is_no_trigger() -> None:
    events = [
        *chat_events(PARTS[:3], "chatcmpl-A")[:-2],
        chat_chunk("chatcmpl-A", {}, "length"),
        b"data: [DONE]\n\n",
    ]
    body, decision = run(continue_(), events, [])
    assert decision is None and chat_read(body)["finishes"] == ["length"]


def test_chat_request_fault_error_is_no_trigger() -> None:
    bad = sse({"error": {"message": "bad", "type": "invalid_request_error", "param": None, "code": None}})
    body, decision = run(continue_(), [chat_events(PARTS, "chatcmpl-A")[0], bad], [])
    assert decision is None  # the stream ended with its error, as it does without recovery
    assert chat_read(body)["errors"][0]["type"] == "invalid_request_error"


def test_chat_truncated_stream_is_a_trigger() -> None:
    first = chat_events(PARTS, "chatcmpl-A")[:-1]  # everything but [DONE]: the finish reason went out
    body, decision = run(continue_(), first, [])
    assert decision is None and body == b"".join(first)  # the answer is whole: as without recovery
    first = chat_events(PARTS, "chatcmpl-A")[:5]
    body, decision = run(continue_(), first, [chat_events(PARTS, "chatcmpl-B")])
    assert isinstance(decision, Retry) and decision.recovery.reason == "truncated"
    assert chat_read(body)["text"] == ANSWER


def test_chat_diverged_rerun_fails_the_attempt() -> None:
    first = chat_events(PARTS, "chatcmpl-A")[:9]
    other = tokens(ANSWER[:20] + "something else entirely.")
    body, decision = run(continue_(), first, [chat_events(other, "chatcmpl-B")], raised=True)
    assert isinstance(decision, Retry) and decision.recovery.reason == "diverged"
    assert chat_read(body)["text"] == "".join(PARTS[:8])


def test_retry_mode_recovers_only_before_text() -> None:
    first = chat_events(PARTS, "chatcmpl-A")[:1]
    body, decision = run(Recoverer("retry", 2, 0.25), first, [chat_events(PARTS, "chatcmpl-B")], raised=True)
    assert isinstance(decision, Retry) and chat_read(body)["text"] == ANSWER
    _, decision = run(Recoverer("retry", 2, 0.25), chat_events(PARTS, "chatcmpl-A")[:3], [], raised=True)
    assert isinstance(decision, GiveUp) and "continue" in decision.why


def test_generic_sse_is_never_recovered() -> None:
    body, decision = run(continue_(), [b"event: note\ndata: hi\n\n"], [], raised=True)
    assert isinstance(decision, GiveUp) and "not recoverable" in decision.why
    assert body.startswith(b"event: note\ndata: hi\n\n")


# -- Anthropic -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cut", [0, 1, 12, len(PARTS) - 1])
@pytest.mark.parametrize("rerun", ["restart", "continuation"])
def test_anthropic_overloaded_then_spliced(cut: int, rerun: str) -> None:
    first = [*anthropic_events(PARTS, "msg_A")[: 3 + cut], anthropic_error()]
    rest = PARTS if rerun == "restart" else PARTS[cut:]
    body, decision = run(continue_(), first, [anthropic_events(rest, "msg_B", usage=(31, 50))])
    got = anthropic_read(body)
    assert isinstance(decision, Retry) and decision.recovery.reason == "upstream_error"
    assert got["text"] == ANSWER and got["ids"] == ["msg_A"] and got["indices"] == [0]
    assert got["stop"] == "end_turn" and got["ended"] and not got["errors"] and not got["open"]


def test_anthropic_thinking_restart_drops_the_repeated_block() -> None:
    thinking = tokens("First I think about it, then I answer.")
    full = anthropic_events(PARTS, "msg_A", thinking=thinking)
    # cut inside the text block: thinking (start, deltas, signature, stop) = 3 + len(thinking) events
    first = full[: 1 + len(thinking) + 3 + 2 + 5]
    body, _ = run(continue_(), first, [anthropic_events(PARTS, "msg_B", thinking=thinking)], raised=True)
    got = anthropic_read(body)
    assert got["thinking"] == "".join(thinking) and got["text"] == ANSWER
    assert got["indices"] == [0, 1] and got["ids"] == ["msg_A"] and not got["open"]


def test_anthropic_failure_between_blocks_numbers_new_blocks_on() -> None:
    thinking = tokens("Thinking first.")
    full = anthropic_events(PARTS, "msg_A", thinking=thinking)
    first = full[: 1 + 1 + len(thinking) + 2]  # the thinking block whole and stopped
    continuation = anthropic_events(PARTS, "msg_B")  # a continuation: text only, at its index 0
    body, _ = run(continue_(), first, [continuation], raised=True)
    got = anthropic_read(body)
    assert got["indices"] == [0, 1] and got["text"] == ANSWER and got["thinking"] == "Thinking first."


def test_anthropic_usage_sums_attempts() -> None:
    first = [*anthropic_events(PARTS, "msg_A", usage=(30, 0))[:8], anthropic_error()]
    body, _ = run(continue_(), first, [anthropic_events(PARTS, "msg_B", usage=(31, 44))])
    usage = anthropic_read(body)["usage"]
    assert usage["input_tokens"] == 61
    assert usage["output_tokens"] == 44 + 1  # the first attempt's own report (message_start: 1)


def test_anthropic_non_retryable_error_passes_as_today() -> None:
    first = [*anthropic_events(PARTS, "msg_A")[:5], anthropic_error("invalid_request_error")]
    body, decision = run(continue_(), first, [])
    assert decision is None and anthropic_read(body)["errors"][0]["type"] == "invalid_request_error"


def test_anthropic_tool_use_is_not_continued() -> None:
    start = sse(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "f"},
        },
        "content_block_start",
    )
    first = [anthropic_events(PARTS, "msg_A")[0], start, anthropic_error()]
    body, decision = run(continue_(), first, [])
    assert isinstance(decision, GiveUp) and "tool call" in decision.why
    assert anthropic_read(body)["errors"][0]["type"] == "overloaded_error"


# -- the property: any cut point, any chunking ----------------------------------------------------------
def _chunker(data: st.DataObject) -> Chunker:
    def chunks(body: bytes) -> list[bytes]:
        cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=8)))
        edges = [0, *cuts, len(body)]
        return [body[a:b] for a, b in itertools.pairwise(edges)]

    return chunks


@settings(max_examples=examples(150), deadline=None)
@given(data=st.data(), fmt=st.sampled_from(["openai", "anthropic", "responses"]), restart=st.booleans())
def test_the_client_has_the_first_attempts_prefix_plus_the_continuation_once(
    data: st.DataObject, fmt: str, restart: bool
) -> None:
    words = data.draw(
        st.lists(st.text("ab \n\u00e9\U0001f600", min_size=1, max_size=6), min_size=1, max_size=20)
    )
    cut = data.draw(st.integers(0, len(words)))
    overload = data.draw(st.booleans())
    rest = words if restart else words[cut:]
    if fmt == "openai":
        first = chat_events(words, "chatcmpl-A")[: 1 + cut] + ([chat_error()] if overload else [])
        rerun = chat_events(rest, "chatcmpl-B")
    elif fmt == "anthropic":
        first = anthropic_events(words, "msg_A")[: 3 + cut] + ([anthropic_error()] if overload else [])
        rerun = anthropic_events(rest, "msg_B")
    else:
        first = responses_events(words, "resp_A")[: MIDDLE + cut] + ([responses_error()] if overload else [])
        rerun = responses_events(rest, "resp_B")
    had, rest_text = "".join(words[:cut]), "".join(words[cut:])
    if restart and cut and not rest_text and not overload:
        return  # a stream cut after its last token but before its end: covered by the truncation test
    body, decision = run(continue_(), first, [rerun], raised=not overload, chunks=_chunker(data))
    got = {"openai": chat_read, "anthropic": anthropic_read, "responses": responses_read}[fmt](body)
    allowed = _outcomes(had, rest_text, restart)
    assert got["text"] in allowed, (words, cut, allowed)
    if got["text"] != had or not allowed - {had}:
        assert isinstance(decision, Retry)
        assert len(set(got["ids"])) == 1 and not got["errors"]
        spliced = decision.recovery.reason != "diverged"  # else a next attempt is due: no end yet
        if fmt == "anthropic" and spliced:  # one text block, the client's index, started once, stopped
            assert got["indices"] == [0] and not got["open"], (words, cut)
            assert got["ended"] and got["stop"] == "end_turn"
        if fmt == "responses" and spliced:  # every event that repeats the text repeats the deltas'
            assert got["repeats"] == [got["text"]] * 4 and got["final"]["status"] == "completed"


def _outcomes(had: str, rest: str, restart: bool) -> set[str]:
    """What the client may end with, by the rules of :class:`~.common.Matcher`: the whole answer, except
    where a continuation is ambiguous (it starts like the answer, or with the whitespace the answer
    ends with), and then never a character twice."""
    whole = had + rest
    if restart or not had or not rest:
        return {whole}
    if rest[0] != had[0]:
        tail = had[len(had.rstrip()) :]
        if tail and rest[0].isspace():  # taken for a prefill's repeat of that whitespace: dropped
            same = next((i for i, (a, b) in enumerate(zip(rest, tail, strict=False)) if a != b), None)
            return {had + rest[same if same is not None else min(len(tail), len(rest)) :], had}
        return {whole}
    # starts like the answer: taken for a restart; if it repeats it whole that much is dropped, if it
    # departs the attempt counts as diverged, and the client keeps what it had
    return {had + rest[len(had) :], had}


# -- prefill ---------------------------------------------------------------------------------------------
def test_prefill_anthropic_appends_an_assistant_turn_without_trailing_space() -> None:
    body = json.dumps({"model": "m", "system": "app's own", "messages": [{"role": "user", "content": "hi"}]})
    asked = prefill(body.encode(), "anthropic", "Half an answer ")
    assert asked is not None and asked.left_out == " "
    request = json.loads(asked.body)
    assert request["messages"][-1] == {"role": "assistant", "content": "Half an answer"}
    assert request["system"] == "app's own" and len(request["messages"]) == 2  # nothing of ours


def test_prefill_openai_sets_prefix_and_vllm_flags() -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    asked = prefill(body, "openai", "Half ")
    assert asked is not None
    request = json.loads(asked.body)
    assert request["messages"][-1] == {"role": "assistant", "content": "Half ", "prefix": True}
    # vLLM's fields ride in extra_body: the official SDK takes them there (as keywords: a TypeError)
    assert request["extra_body"] == {"continue_final_message": True, "add_generation_prompt": False}
    assert not any(m["role"] == "system" for m in request["messages"])


def test_prefill_leaves_what_it_cannot_read() -> None:
    assert prefill(b"not json", "openai", "x") is None
    assert prefill(b'{"input": "hi"}', "openai", "x") is None
    thinking = json.dumps({"messages": [], "thinking": {"type": "enabled", "budget_tokens": 1024}}).encode()
    assert prefill(thinking, "anthropic", "x") is None
    assert prefill(b'{"messages": []}', "anthropic", "") is None


def test_prefill_continuation_splices_through_the_left_out_space() -> None:
    recoverer = Recoverer("continue", 2, 0.25, body="prefill")
    first = [*anthropic_events(PARTS, "msg_A")[:8], anthropic_error()]  # 5 tokens, the last ends in a space
    out: list[bytes] = []
    for raw in first:
        got, failure = recoverer.feed(raw)
        out += got
    assert failure is not None
    request = json.dumps({"messages": [{"role": "user", "content": "q"}]}).encode()
    decision = recoverer.fail(failure, request)
    assert isinstance(decision, Retry)
    assert json.loads(decision.body)["messages"][-1]["content"] == "".join(PARTS[:5]).rstrip()
    rest = ANSWER[len("".join(PARTS[:5]).rstrip()) :]  # what the upstream continues: from the space on
    for raw in anthropic_events(tokens(rest), "msg_B"):
        got, failure = recoverer.feed(raw)
        out += got
    assert anthropic_read(b"".join(out))["text"] == ANSWER


# -- the AI SDK's UI message stream, and Responses before its text ---------------------------------------
def ui_events(parts: list[str], message: str, part: str = "txt-0") -> list[bytes]:
    out = [sse({"type": "start", "messageId": message}), sse({"type": "start-step"})]
    out.append(sse({"type": "text-start", "id": part}))
    out += [sse({"type": "text-delta", "id": part, "delta": p}) for p in parts]
    out += [sse({"type": "text-end", "id": part}), sse({"type": "finish-step"}), sse({"type": "finish"})]
    return [*out, b"data: [DONE]\n\n"]


def ui_read(body: bytes) -> dict[str, Any]:
    kinds, text, parts = [], [], set()
    for event in parse(body):
        if event.data == "[DONE]":
            continue
        obj = json.loads(event.data)
        kinds.append(obj["type"])
        if obj["type"] == "text-delta":
            assert obj["id"] in parts, "a delta for a part that was not started"
            text.append(obj["delta"])
        elif obj["type"] == "text-start":
            parts.add(obj["id"])
    return {"kinds": kinds, "text": "".join(text), "parts": parts}


@pytest.mark.parametrize("rerun", ["restart", "continuation"])
def test_ui_message_stream_error_part_then_spliced(rerun: str) -> None:
    first = [*ui_events(PARTS, "m-A", "a")[: 3 + 6], sse({"type": "error", "errorText": "overloaded"})]
    rest = PARTS if rerun == "restart" else PARTS[6:]
    body, decision = run(continue_(), first, [ui_events(rest, "m-B", "b")])
    got = ui_read(body)
    assert isinstance(decision, Retry) and decision.recovery.dialect == "ai-sdk"
    assert got["text"] == ANSWER and got["parts"] == {"a"}
    assert got["kinds"].count("start") == 1 and got["kinds"].count("start-step") == 1
    assert "error" not in got["kinds"] and got["kinds"][-1] == "finish"


def test_responses_is_retried_before_its_text() -> None:
    failed = sse({"type": "error", "code": "server_error", "message": "boom", "sequence_number": 1}, "error")
    body, decision = run(
        continue_(), [responses_events(PARTS, "resp_A")[0], failed], [responses_events(PARTS, "resp_B")]
    )
    events = parse(body)
    objs = [json.loads(e.data) for e in events]
    assert isinstance(decision, Retry)
    assert [o["sequence_number"] for o in objs] == list(range(len(objs)))
    assert {o["response"]["id"] for o in objs if "response" in o} == {"resp_A"}
    assert "".join(o.get("delta", "") for o in objs) == ANSWER


def test_a_continuation_does_not_repeat_the_trailing_whitespace_a_prefill_left_out() -> None:
    """An app that prefills ``recovery().text.rstrip()`` itself (``recover_body="same"``): the upstream's
    continuation starts with the whitespace the client already has."""
    first = [*anthropic_events(PARTS, "msg_A")[:8], anthropic_error()]  # 5 tokens: "... from the "
    had = "".join(PARTS[:5])
    rest = tokens(ANSWER[len(had.rstrip()) :])  # " end of the answer ..."
    body, _ = run(continue_(), first, [anthropic_events(rest, "msg_B")])
    assert anthropic_read(body)["text"] == ANSWER


def test_a_rerun_in_another_format_gives_up() -> None:
    first = chat_events(PARTS, "chatcmpl-A")[:6]
    body, decision = run(continue_(), first, [anthropic_events(PARTS, "msg_B")], raised=True)
    assert isinstance(decision, GiveUp) and "another format (anthropic)" in decision.why
    assert chat_read(body)["text"] == "".join(PARTS[:5])  # nothing of the alien stream reached it


def test_responses_usage_counts_the_failed_attempt() -> None:
    failed = sse({"type": "error", "code": "server_error", "message": "boom", "sequence_number": 1}, "error")
    done = responses_events(PARTS, "resp_B")
    last = json.loads(parse(done[-1])[0].data)
    last["response"]["usage"] = {"input_tokens": 10, "output_tokens": 40, "total_tokens": 50}
    done[-1] = sse(last, "response.completed")
    body, _ = run(continue_(), [responses_events(PARTS, "resp_A")[0], failed], [done])
    usage = json.loads(parse(body)[-1].data)["response"]["usage"]
    assert usage == {"input_tokens": 20, "output_tokens": 40, "total_tokens": 60}
