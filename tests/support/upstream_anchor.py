"""Continuation without prefill as a fake model plays it: texts to cut, the five ways a model answers a
re-run that asks it to repeat its last words and go on, an OpenAI chat upstream with no prefill that
plays them, and the relay docs/recovery.md shows, verbatim.

* :func:`reply`: what the model writes, given the whole answer, the client's text and the anchor it was
  asked to repeat: ``exact`` (the anchor, then the rest), ``whitespace`` (the anchor with its whitespace
  changed), ``skip`` (the rest at once), ``restart`` (the whole answer again), ``paraphrase`` (the
  anchor's words reordered and recased, then the rest), ``reword`` (the whole answer again, two of its
  first words swapped: a restart in other words);
* ``upstream`` (``tests.support.upstream_anchor:upstream``): ``POST /v1/chat/completions`` and
  ``POST /v1/messages``. The request's ``metadata`` (a field the official SDKs take, so the relay passes
  the body on unchanged; for Anthropic, JSON in its ``user_id``) says
  ``key``, ``cut`` (the first request's connection closes after that many tokens), ``behaviour``,
  ``sample`` (a key of :data:`SAMPLES`; the upstream's default answer otherwise) and ``prefill``:
  ``ignore`` (a request ending with an assistant turn is answered from scratch: no prefill),
  ``refuse`` (400, as Claude Sonnet 4.6 answers a prefill) or ``honour`` (continued, when the body says
  ``continue_final_message`` at its top level, as vLLM reads it). ``GET /requests/{key}``: the bodies it got;
* ``relay`` (``tests.support.upstream_anchor:relay``): the docs' relay (and the same for Anthropic
  Messages), its upstream at ``UPSTREAM_URL``, the middleware's settings from ``SSE_MIDDLEWARE_*``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from anthropic import AsyncAnthropic
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from openai import AsyncOpenAI

from sse_middleware import StreamingMiddleware

from .upstream import ANSWER, anthropic_events, chat_events, tokens

SAMPLES = {
    "prose": ANSWER
    + "\n\nA relay that continues the answer must not show any of it twice. It asks the model to repeat "
    "its last words, finds them, and drops them: the reader sees one answer, whole, in order.",
    "code": (
        "def splice(had, reply):\n"
        '    """Join a reply onto what the client has."""\n'
        "    for i, ch in enumerate(reply):\n"
        "        if i >= len(had) or ch != had[i]:\n"
        "            return reply[i:]\n"
        '    return ""\n'
        "\n\n"
        "class Seam:\n"
        "    def __init__(self, anchor):\n"
        "        self.anchor = anchor\n"
        "        self.held = []\n"
    ),
    "table": (
        "| setting | default | meaning |\n"
        "|---|---|---|\n"
        "| recover | off | re-run the app when its provider fails |\n"
        "| recover_attempts | 2 | re-runs before giving up |\n"
        "| recover_backoff | 0.25 | seconds before the first re-run |\n"
        "| recover_body | same | what the re-run is asked |\n"
    ),
    "cjk": (
        "流式传输把用户感到的等待从整个回答的结尾移到第一个词。缓冲的代理会把它夺回，"  # noqa: RUF001
        "中途失败的服务也一样：客户端只得到半个回答和一个错误。"  # noqa: RUF001
        "中間で失敗したら、中継は同じ回答の続きを頼み、最後の言葉を探して重ねずに繋ぐ。"
        "読者には一つの回答だけが見える。"
    ),
    "emoji": (
        "Family night \U0001f468\u200d\U0001f469\u200d\U0001f467 with the "
        "\U0001f469\u200d\u2764\ufe0f\u200d\U0001f468 and \U0001f3f3\ufe0f\u200d\U0001f308 flags, "
        "\U0001f44d\U0001f3fd from all of us \U0001f1fa\U0001f1f8\U0001f1eb\U0001f1f7! Next week: "
        "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f games, 1\ufe0f\u20e3 round "
        "each, \u2764\ufe0f for the winner \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466."
    ),
}
BEHAVIOURS = ("exact", "whitespace", "skip", "restart", "paraphrase", "reword")
FIRST_CUT = 24
"""Cut points start here: an anchor of a word or two cannot tell a paraphrase from new text."""


def cut_points(text: str, count: int) -> list[int]:
    """``count`` cut points spread over ``text`` from :data:`FIRST_CUT`, its end included (any code
    point: a cut may split a grapheme cluster, as a token boundary may)."""
    span = len(text) - FIRST_CUT
    return sorted({FIRST_CUT + span * i // (count - 1) for i in range(count)})


def reply(behaviour: str, answer: str, had: str, anchor: str) -> str:
    """What the model writes to an anchored re-run (``answer`` is what it would have written whole)."""
    after = answer[len(had.rstrip()) :]  # the client's trailing whitespace, then the rest
    if behaviour == "exact":
        return anchor + after
    if behaviour == "whitespace":
        return _respaced(anchor) + after
    if behaviour == "skip":
        return answer[len(had) :]
    if behaviour == "restart":
        return answer
    if behaviour == "reword":  # a restart in other words: the answer with two of its first words swapped
        words = answer.split(" ", 3)
        if len(words) < 4:  # text without spaces: two of its first characters
            return answer[0] + answer[2] + answer[1] + answer[3:]
        return " ".join([words[0], words[2], words[1], words[3]])
    if behaviour == "paraphrase":
        words = anchor.split()
        garbled = " ".join(reversed(words)) if len(words) > 1 else anchor[::-1]
        return garbled.swapcase() + after
    raise ValueError(behaviour)


def _respaced(text: str) -> str:
    """Each whitespace run replaced by another (a space by a line break, anything else by two spaces)."""
    out, i = [], 0
    while i < len(text):
        j = i
        while j < len(text) and text[j].isspace():
            j += 1
        if j > i:
            out.append("\n" if text[i:j] == " " else "  ")
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def pieces(text: str) -> list[str]:
    """The upstream's tokens: words, and text without spaces (CJK) in pieces of up to 8 characters."""
    return [word[i : i + 8] for word in tokens(text) for i in range(0, len(word), 8)]


def anchor_in(had: str, prompt: str) -> str:
    """The longest end of the client's text (without its trailing whitespace) that the prompt quotes:
    the anchor, as a model reads it from whatever prompt asked for it."""
    core = had.rstrip()
    return next((core[i:] for i in range(len(core)) if core[i:] in prompt), "")


# -- the upstream -------------------------------------------------------------------------------------
SEEN: dict[str, list[Any]] = {}


async def upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    if scope["path"].startswith("/requests/"):
        await _respond(send, 200, json.dumps(SEEN.get(scope["path"].rsplit("/", 1)[1], [])).encode())
        return
    request = json.loads(await Request(scope, receive).body())
    meta = request.get("metadata") or {}
    if "user_id" in meta:  # Anthropic's metadata takes one string
        meta = json.loads(meta["user_id"])
    SEEN.setdefault(meta.get("key", ""), []).append(request)
    answer = SAMPLES.get(meta.get("sample", ""), ANSWER)
    messages = request["messages"]
    cut = None
    if messages[-1]["role"] == "assistant":  # a prefill
        if meta.get("prefill") == "refuse":
            error = {"type": "invalid_request_error", "message": "This model does not support assistant "
                     "message prefill. The conversation must end with a user message."}  # fmt: skip
            await _respond(send, 400, json.dumps({"error": error}).encode())
            return
        prefix = messages[-1]["content"]
        honoured = meta.get("prefill") == "honour" and request.get("continue_final_message")
        text = answer[len(prefix) :] if honoured and answer.startswith(prefix) else answer
    elif len(messages) > 1 and messages[-2]["role"] == "assistant":
        had = messages[-2]["content"]
        text = reply(meta.get("behaviour", "exact"), answer, had, anchor_in(had, messages[-1]["content"]))
    else:  # the first request of a key is cut, if it says so
        text, cut = answer, int(meta.get("cut", "-1")) if len(SEEN[meta.get("key", "")]) == 1 else None
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
    )
    attempt = len(SEEN[meta.get("key", "")])
    if scope["path"].endswith("/messages"):
        events, first = anthropic_events(pieces(text), f"msg-{attempt}"), 3  # after its start and a ping
    else:
        events, first = chat_events(pieces(text), f"chatcmpl-{attempt}"), 1  # after the role chunk
    for i, event in enumerate(events):
        if cut is not None and i == first + cut:
            raise ConnectionResetError("the fake upstream cuts the connection")
        await send({"type": "http.response.body", "body": event, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def _respond(send: Any, status: int, body: bytes) -> None:
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": body})


# -- the relay docs/recovery.md shows (its client and the middleware's settings from the environment) -----
def _relay() -> Any:
    client = AsyncOpenAI(base_url=os.environ.get("UPSTREAM_URL", "") + "/v1", api_key="test", max_retries=0)
    claude = AsyncAnthropic(base_url=os.environ.get("UPSTREAM_URL", ""), api_key="test", max_retries=0)
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> StreamingResponse:
        body = await request.json()
        stream = await client.chat.completions.create(**body)

        async def relay():
            async for chunk in stream:
                yield f"data: {chunk.model_dump_json(exclude_unset=True)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(relay(), media_type="text/event-stream")

    @app.post("/v1/messages")
    async def messages(request: Request) -> StreamingResponse:
        body = await request.json()
        stream = await claude.messages.create(**body)

        async def relay():
            async for event in stream:
                yield f"event: {event.type}\ndata: {event.model_dump_json(exclude_unset=True)}\n\n"

        return StreamingResponse(relay(), media_type="text/event-stream")

    app.add_middleware(StreamingMiddleware)  # its settings from SSE_MIDDLEWARE_*
    return app


relay = _relay() if os.environ.get("UPSTREAM_URL") else None
