"""How a re-run asks for the continuation (``recover_body``): the bodies of ``prefill`` and ``anchor`` per
request shape, ``auto``'s choice by model, the fall-back from a refused prefill, and the anchored
re-run spliced through the :class:`Recoverer` for OpenAI chat and Anthropic Messages."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sse_middleware import StreamingSettings, override
from sse_middleware._core.recovery import Failure, GiveUp, Recoverer, Retry, prefill
from sse_middleware._core.recovery.anchor import PROMPT, anchor_of
from sse_middleware._core.recovery.prefill import Asking, anchored, mode_for
from sse_middleware._exceptions import ConfigError

from ..support.upstream import ANSWER, anthropic_events, chat_events, tokens
from ..support.upstream_anchor import reply
from .test_recovery_splice import anthropic_read, chat_read

PARTS = tokens(ANSWER)
USER = {"role": "user", "content": "Why stream?"}


def body(**fields: Any) -> bytes:
    return json.dumps({"model": "gpt-4o", "messages": [USER], "stream": True, **fields}).encode()


# -- prefill ---------------------------------------------------------------------------------------------
def test_prefill_keeps_the_apps_own_assistant_prefill_and_appends_the_text() -> None:
    """The app prefilled "{" itself; the client has what the model wrote after it."""
    mine = {"role": "assistant", "content": '{"answer": "'}
    for dialect in ("openai", "anthropic"):
        asked = prefill(body(messages=[USER, mine]), dialect, "Half an")
        assert asked is not None
        last = json.loads(asked.body)["messages"][-1]
        assert last["content"] == '{"answer": "Half an', dialect
    blocks = {"role": "assistant", "content": [{"type": "text", "text": "Sure: "}]}
    asked = prefill(body(messages=[USER, blocks]), "anthropic", "Half an")
    assert asked is not None
    assert json.loads(asked.body)["messages"][-1]["content"] == [
        {"type": "text", "text": "Sure: "},
        {"type": "text", "text": "Half an"},
    ]


def test_prefill_puts_vllms_fields_where_the_official_sdk_takes_them() -> None:
    """Top-level ``continue_final_message`` is a TypeError in ``create(**body)``; under ``extra_body``
    the SDK merges it into the JSON it sends. An ``extra_body`` the request had is kept."""
    import openai

    asked = prefill(body(extra_body={"top_k": 5}), "openai", "Half ")
    assert asked is not None
    request = json.loads(asked.body)
    assert "continue_final_message" not in request
    assert request["extra_body"] == {
        "top_k": 5,
        "continue_final_message": True,
        "add_generation_prompt": False,
    }
    client = openai.OpenAI(api_key="test", base_url="http://127.0.0.1:9/v1", max_retries=0)
    with pytest.raises(TypeError):  # control: what the old body did to the SDK
        client.chat.completions.create(**{**request, "continue_final_message": True})
    with pytest.raises(openai.APIConnectionError):  # the SDK took the body and tried to send it
        client.chat.completions.create(**request)


# -- anchor ----------------------------------------------------------------------------------------------
def test_anchored_chat_body_is_the_text_then_one_user_turn() -> None:
    made = anchored(body(), "openai", "Half an answer ")
    assert made is not None
    request, anchor = json.loads(made[0]), made[1]
    assert anchor == "Half an answer"
    assert request["messages"] == [
        USER,
        {"role": "assistant", "content": "Half an answer "},
        {"role": "user", "content": PROMPT.replace("{anchor}", "Half an answer")},
    ]
    assert not any(m["role"] == "system" for m in request["messages"])
    assert {k: v for k, v in request.items() if k != "messages"} == {"model": "gpt-4o", "stream": True}


def test_anchored_anthropic_and_responses_bodies() -> None:
    made = anchored(body(model="claude-sonnet-4-6", max_tokens=100), "anthropic", "Half ")
    assert made is not None
    assert [m["role"] for m in json.loads(made[0])["messages"]] == ["user", "assistant", "user"]
    responses = json.dumps({"model": "gpt-5", "input": "Why stream?", "stream": True}).encode()
    made = anchored(responses, "openai-responses", "Half ")
    assert made is not None
    assert json.loads(made[0])["input"] == [
        {"role": "user", "content": "Why stream?"},
        {"role": "assistant", "content": "Half "},
        {"role": "user", "content": PROMPT.replace("{anchor}", "Half")},
    ]
    assert anchored(b'{"messages": []}', "ai-sdk", "Half") is None
    assert anchored(b"not json", "openai", "Half") is None


@pytest.mark.parametrize(
    ("model", "mode"),
    [
        ("gpt-4o", "anchor"),
        ("o3-mini", "anchor"),
        ("claude-sonnet-4-6", "anchor"),
        ("claude-opus-4-7-20260101", "anchor"),
        ("us.anthropic.claude-opus-4-6-v1:0", "anchor"),
        ("claude-sonnet-4-5-20250929", "prefill"),
        ("claude-3-7-sonnet-latest", "prefill"),
        ("deepseek-chat", "prefill"),
        ("mistral-large-latest", "prefill"),
        ("meta-llama/Llama-3.1-8B-Instruct", "anchor"),
    ],
)
def test_auto_picks_by_model(model: str, mode: str) -> None:
    assert mode_for({"model": model}, None) == mode


def test_the_apps_model_table_is_read_before_ours() -> None:
    mine = {"meta-llama/*": "prefill", "gpt-4o*": "same"}
    assert mode_for({"model": "meta-llama/Llama-3.1-8B-Instruct"}, mine) == "prefill"
    assert mode_for({"model": "GPT-4o-mini"}, mine) == "same"
    assert mode_for({"model": "claude-sonnet-4-6"}, mine) == "anchor"
    assert Asking("auto", models=mine).ask(body(model="gpt-4o"), "openai", "Half") is None


def test_a_refused_prefill_is_followed_by_the_anchor() -> None:
    asking = Asking("prefill")
    first = asking.ask(body(), "openai", "Half ")
    assert first is not None and first.how == "prefill"
    assert asking.refused()
    second = asking.ask(body(), "openai", "Half ")
    assert second is not None and second.how == "anchor"
    assert not asking.refused()  # an anchored re-run that failed is no reason to change again
    control = Asking("prefill")  # control: without the refusal, prefill again
    assert control.ask(body(), "openai", "Half ") is not None
    assert (control.ask(body(), "openai", "Half ") or first).how == "prefill"


def test_settings_check_the_prompt_and_the_model_table() -> None:
    with pytest.raises(ConfigError, match="anchor"):
        StreamingSettings(recover_prompt="Please continue.")
    with pytest.raises(ConfigError, match="recover_models"):
        StreamingSettings(recover_models={"gpt-*": "restart"})
    env = {"SSE_MIDDLEWARE_RECOVER_BODY": "auto", "SSE_MIDDLEWARE_RECOVER_MODELS": '{"my-*": "prefill"}'}
    settings = StreamingSettings.from_env(env)
    assert settings.recover_body == "auto" and settings.recover_models == {"my-*": "prefill"}
    scope: dict[str, Any] = {}
    override(scope, recover_body="anchor", recover_prompt="Go on from: {anchor}")
    with pytest.raises(ConfigError, match="anchor"):
        override(scope, recover_prompt="Go on.")


# -- through the Recoverer -------------------------------------------------------------------------------
def pump(recoverer: Recoverer, events: list[bytes], out: list[bytes], size: int = 0) -> Failure | None:
    raw = b"".join(events)
    for i in range(0, len(raw), size or len(raw)):
        got, failure = recoverer.feed(raw[i : i + (size or len(raw))])
        out.extend(got)
        if failure is not None:
            return failure
    return recoverer.end()


def anchored_rerun(
    dialect: str, behaviour: str, cut: int, size: int = 0, mode: str = "anchor"
) -> tuple[bytes, Retry | GiveUp]:
    """The client's bytes: a first run cut after ``cut`` tokens, then re-runs the fake model answers
    as ``behaviour`` says, until one holds or recovery gives up."""
    recoverer = Recoverer("continue", 2, 0.25, body=mode)
    events = chat_events if dialect == "openai" else anthropic_events
    out: list[bytes] = []
    first = events(PARTS)
    failure = pump(recoverer, first[: cut + (1 if dialect == "openai" else 3)], out, size)
    assert failure is not None
    request = body(model="gpt-4o" if dialect == "openai" else "claude-sonnet-4-6")
    while True:
        decision = recoverer.fail(failure or Failure("exception"), request)
        if isinstance(decision, GiveUp):
            out.append(decision.failure.ending or b"")
            return b"".join(out), decision
        asked = json.loads(decision.body)["messages"]
        had = asked[-2]["content"]
        assert had == "".join(PARTS[:cut])
        text = reply(behaviour, ANSWER, had, anchor_of(had))
        failure = pump(recoverer, events(tokens(text), "rerun"), out, size)
        if failure is None:
            return b"".join(out), decision


@pytest.mark.parametrize("behaviour", ["exact", "whitespace", "skip", "restart"])
@pytest.mark.parametrize("cut", [1, 9, len(PARTS) - 2])
@pytest.mark.parametrize("size", [0, 7])
def test_chat_anchored_rerun_is_one_whole_answer(behaviour: str, cut: int, size: int) -> None:
    got = chat_read(anchored_rerun("openai", behaviour, cut, size)[0])
    assert got["text"] == ANSWER and got["ids"] == {"chatcmpl-1"} and got["finishes"] == ["stop"]
    assert got["roles"] == 1 and got["done"] and not got["errors"]


@pytest.mark.parametrize("behaviour", ["exact", "whitespace", "skip", "restart"])
@pytest.mark.parametrize("cut", [1, 9, len(PARTS) - 2])
def test_anthropic_anchored_rerun_is_one_whole_answer(behaviour: str, cut: int) -> None:
    got = anthropic_read(anchored_rerun("anthropic", behaviour, cut, 5)[0])
    assert got["text"] == ANSWER and got["ids"] == ["msg_1"] and got["stop"] == "end_turn"
    assert got["indices"] == [0] and not got["open"] and got["ended"] and not got["errors"]


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_a_paraphrasing_rerun_gives_up_with_exactly_what_the_client_had(dialect: str) -> None:
    raw, decision = anchored_rerun(dialect, "paraphrase", 9)
    assert isinstance(decision, GiveUp) and decision.failure.reason == "truncated"  # the first failure
    assert decision.why.endswith("the last: diverged")
    read = chat_read if dialect == "openai" else anthropic_read
    assert read(raw)["text"] == "".join(PARTS[:9])


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_control_the_same_reply_replayed_as_same_shows_the_anchor_twice(dialect: str) -> None:
    """Without the anchor mode (``same``), the app that asked for the repeat itself gets it shown."""
    recoverer = Recoverer("continue", 2, 0.25)
    events = chat_events if dialect == "openai" else anthropic_events
    out: list[bytes] = []
    failure = pump(recoverer, events(PARTS)[: 9 + (1 if dialect == "openai" else 3)], out)
    assert failure is not None
    assert isinstance(recoverer.fail(failure, body()), Retry)
    had = "".join(PARTS[:9])
    assert pump(recoverer, events(tokens(reply("exact", ANSWER, had, anchor_of(had))), "r"), out) is None
    read = chat_read if dialect == "openai" else anthropic_read
    assert read(b"".join(out))["text"] != ANSWER


def test_a_skip_near_the_end_is_held_until_the_reply_ends_then_shown() -> None:
    """A reply shorter than the head the seam holds: decided at its finish, its text not lost."""
    got = chat_read(anchored_rerun("openai", "skip", len(PARTS) - 2)[0])
    assert got["text"] == ANSWER
    got = anthropic_read(anchored_rerun("anthropic", "skip", len(PARTS) - 2)[0])
    assert got["text"] == ANSWER and got["indices"] == [0]


def test_a_refused_prefill_rerun_falls_back_to_the_anchor() -> None:
    """A 400 for the prefill (the re-run did not start): the next re-run asks with the anchor, and the
    first failure stays the one a give-up would end with."""
    recoverer = Recoverer("continue", 2, 0.25, body="prefill")
    out: list[bytes] = []
    failure = pump(recoverer, chat_events(PARTS)[:6], out)
    assert failure is not None
    decision = recoverer.fail(failure, body())
    assert isinstance(decision, Retry) and json.loads(decision.body)["messages"][-1]["role"] == "assistant"
    again = recoverer.refuse("the re-run answered 400")
    assert isinstance(again, Retry) and again.recovery.attempt == 2
    assert json.loads(again.body)["messages"][-1]["role"] == "user"
    gave_up = recoverer.refuse("the re-run answered 400")  # anchored, refused: give up
    assert isinstance(gave_up, GiveUp) and gave_up.failure.reason == "truncated"  # the first failure's
    control = Recoverer("continue", 2, 0.25)  # control: a refused re-run of the same body gives up
    pump(control, chat_events(PARTS)[:6], [])
    control.fail(Failure("exception"), body())
    assert isinstance(control.refuse("the re-run answered 400"), GiveUp)


def test_a_prefill_rerun_that_raised_before_its_first_event_falls_back_to_the_anchor() -> None:
    """The relay's SDK raises on the 400 before its response starts: the same fall-back."""
    recoverer = Recoverer("continue", 2, 0.25, body="prefill")
    failure = pump(recoverer, chat_events(PARTS)[:6], [])
    assert failure is not None
    assert isinstance(recoverer.fail(failure, body()), Retry)
    again = recoverer.fail(Failure("exception", None, "BadRequestError"), body())
    assert isinstance(again, Retry) and json.loads(again.body)["messages"][-1]["role"] == "user"
    control = Recoverer("continue", 2, 0.25, body="prefill")  # control: a prefill re-run cut mid-way
    failure = pump(control, chat_events(PARTS)[:6], [])
    assert failure is not None and isinstance(control.fail(failure, body()), Retry)
    assert pump(control, chat_events(tokens("more words"), "r")[:2], []) is not None
    again = control.fail(Failure("exception"), body())
    assert isinstance(again, Retry) and json.loads(again.body)["messages"][-1]["role"] == "assistant"


def test_the_docs_relay_is_the_one_the_e2e_test_runs() -> None:
    """docs/recovery.md's OpenAI relay, from its route to its response, is in the e2e test's relay
    line for line (indented one level: there it is built in a function)."""
    import inspect
    import re
    import textwrap
    from pathlib import Path

    from ..support import upstream_anchor

    page = (Path(__file__).parents[2] / "docs" / "recovery.md").read_text(encoding="utf-8")
    block = re.search(r"The OpenAI relay these run through.*?```python\n(.*?)```", page, re.S)
    assert block is not None
    docs = block.group(1)
    route = docs[docs.index("@app.post") : docs.index("app.add_middleware")].strip()
    ours = textwrap.dedent(inspect.getsource(upstream_anchor._relay))
    assert textwrap.indent(route, "    ") in ours
