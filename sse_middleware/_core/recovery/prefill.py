"""``recover_body="prefill"``: the request body rewritten to ask for a continuation of the client's text.

For the two request shapes the middleware reads, and nothing else; never a system prompt of ours (the
app's own prompt is the app's):

* Anthropic Messages: a final assistant turn holding the text, which the API continues. The API rejects
  a final assistant turn that ends in whitespace, so that is left out of it; the splice then drops the
  whitespace again where the continuation repeats it.
* OpenAI chat: a final assistant message with ``"prefix": true`` (what DeepSeek's and Mistral's chat
  APIs read), plus ``continue_final_message: true, add_generation_prompt: false`` (what vLLM's
  OpenAI-compatible server reads). OpenAI's own API has neither: this is for upstreams that do.

A request that already ends with an assistant turn (the app's own prefill) gets the text appended to it.
A request with extended thinking is not rewritten: Anthropic requires its final assistant turn to begin
with a thinking block, which the middleware does not have.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from ..wire import loads


class Prefilled(NamedTuple):
    body: bytes
    left_out: str
    """Trailing whitespace of the client's text that the prefill could not carry."""


def prefill(body: bytes, dialect: str, text: str) -> Prefilled | None:
    """The body asking for a continuation of ``text``; None when the body is not a shape read here."""
    request = loads(body)
    if not text or not isinstance(request, dict) or not isinstance(request.get("messages"), list):
        return None
    messages: list[Any] = list(request["messages"])
    if dialect == "anthropic":
        if request.get("thinking") and (request["thinking"] or {}).get("type") != "disabled":
            return None
        kept = text.rstrip()
        if not kept:
            return None
        _append(messages, kept, {})
        return Prefilled(_dumps({**request, "messages": messages}), text[len(kept) :])
    if dialect == "openai":
        _append(messages, text, {"prefix": True})
        changed = {**request, "messages": messages, "continue_final_message": True}
        changed["add_generation_prompt"] = False
        return Prefilled(_dumps(changed), "")
    return None


def _append(messages: list[Any], text: str, extra: dict[str, Any]) -> None:
    last = messages[-1] if messages else None
    if not (isinstance(last, dict) and last.get("role") == "assistant"):
        messages.append({"role": "assistant", "content": text, **extra})
        return
    content = last.get("content")
    if isinstance(content, list):
        merged: Any = [*content, {"type": "text", "text": text}]
    else:
        merged = (content if isinstance(content, str) else "") + text
    messages[-1] = {**last, "content": merged, **extra}


def _dumps(request: dict[str, Any]) -> bytes:
    return json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()
