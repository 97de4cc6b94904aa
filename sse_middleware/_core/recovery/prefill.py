"""How a re-run asks its upstream for a continuation of the client's text: the request body rewritten
(``recover_body``), for the request shapes the middleware reads.

``prefill``: the client's text as a final assistant turn the upstream continues, and nothing else (never
a system prompt of ours; the app's own prompt is the app's):

* Anthropic Messages: a final assistant turn holding the text. The API rejects a final assistant turn
  that ends in whitespace, so that is left out of it; the splice then drops the whitespace again where
  the continuation repeats it. A request with extended thinking is not rewritten: the API requires its
  final assistant turn to begin with a thinking block, which the middleware does not have.
* OpenAI chat: a final assistant message with ``"prefix": true`` (what DeepSeek's and Mistral's chat
  APIs read), plus ``continue_final_message: true, add_generation_prompt: false`` (what vLLM's
  OpenAI-compatible server reads) under the body's ``extra_body`` key: a relay that forwards the body
  with the official SDK (``create(**body)``) hands them to it as ``extra_body``, which it merges into the
  request's JSON (as top-level keys they are a ``TypeError`` in the SDK).

``anchor``: for upstreams without prefill (OpenAI's API, newer Claude models), the client's text as an
assistant turn and one short user turn asking the model to go on, first repeating its last words
(:mod:`.anchor`); for OpenAI chat, Responses and Anthropic Messages.

A request that already ends with an assistant turn (the app's own prefill) gets the text appended to it.
``auto`` picks one of these per request from the body's ``model`` (:data:`MODELS`), and a prefill that
the upstream refused (its re-run failed before its first event: a 400 "does not support assistant
message prefill") is followed by an anchored re-run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any, Final, NamedTuple

from ..wire import loads
from .anchor import PROMPT, Seam, anchor_of, prompt_for
from .common import Matcher

MODELS: Final[Mapping[str, str]] = {
    "*claude-opus-4-[6-9]*": "anchor",
    "*claude-sonnet-4-[6-9]*": "anchor",
    "*claude-opus-[5-9]*": "anchor",
    "*claude-sonnet-[5-9]*": "anchor",
    "*claude*": "prefill",
    "*deepseek*": "prefill",
    "*mistral*": "prefill",
    "*codestral*": "prefill",
    "*devstral*": "prefill",
    "*": "anchor",
}
"""``recover_body="auto"``: the mode for a request whose ``model`` matches a pattern (case-insensitive,
first match wins; the setting ``recover_models`` is read before these). Claude Sonnet and Opus from 4.6
answer a prefill with 400; earlier Claude models, DeepSeek and Mistral continue a prefill; OpenAI's API,
and any model not named, take the anchor (which every chat API accepts)."""
MODES: Final = ("same", "prefill", "anchor")
_VLLM: Final = {"continue_final_message": True, "add_generation_prompt": False}


class Prefilled(NamedTuple):
    body: bytes
    left_out: str
    """Trailing whitespace of the client's text that the prefill could not carry."""


class Asked(NamedTuple):
    """A re-run's body, and what splices its text onto the client's (None: the splicer's own)."""

    body: bytes
    text: Matcher | None
    how: str
    """``prefill`` or ``anchor``."""


def prefill(body: bytes, dialect: str, text: str) -> Prefilled | None:
    """The body asking for a continuation of ``text``; None when the body is not a shape read here."""
    request = loads(body)
    return _prefill(request, dialect, text) if isinstance(request, dict) else None


def _prefill(request: dict[str, Any], dialect: str, text: str) -> Prefilled | None:
    if not text or not isinstance(request.get("messages"), list):
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
        extra = request.get("extra_body")
        extra = {**(extra if isinstance(extra, dict) else {}), **_VLLM}
        return Prefilled(_dumps({**request, "messages": messages, "extra_body": extra}), "")
    return None


def anchored(body: bytes, dialect: str, text: str, prompt: str = PROMPT) -> tuple[bytes, str] | None:
    """The body asking for a continuation of ``text`` that first repeats its anchor, and the anchor;
    None when the body is not a shape read here."""
    request = loads(body)
    return _anchored(request, dialect, text, prompt) if isinstance(request, dict) else None


def _anchored(request: dict[str, Any], dialect: str, text: str, prompt: str) -> tuple[bytes, str] | None:
    anchor = anchor_of(text)
    if not anchor:
        return None
    field = "input" if dialect == "openai-responses" else "messages"
    turns = request.get(field)
    if dialect not in ("openai", "anthropic", "openai-responses") or not isinstance(turns, (list, str)):
        return None
    if isinstance(turns, str):  # Responses' shorthand: the input is one user message
        turns = [{"role": "user", "content": turns}]
    turns = list(turns)
    _append(turns, text, {}, "output_text" if field == "input" else "text")
    turns.append({"role": "user", "content": prompt_for(prompt, anchor)})
    return _dumps({**request, field: turns}), anchor


def mode_for(request: Any, models: Mapping[str, str] | None) -> str:
    """``recover_body="auto"``: the mode for this request's model (the app's table, then ours)."""
    model = request.get("model") if isinstance(request, dict) else None
    name = model.casefold() if isinstance(model, str) else ""
    for table in (models or {}, MODELS):
        for pattern, mode in table.items():
            if fnmatchcase(name, pattern.casefold()):
                return mode
    return "anchor"


class Asking:
    """How each re-run of one stream asks for the continuation: ``mode`` is ``prefill``, ``anchor`` or
    ``auto`` (by the model, through ``models`` then :data:`MODELS`); ``prompt`` is the anchor's."""

    __slots__ = ("_mode", "_models", "_no_prefill", "_prompt", "last")

    def __init__(self, mode: str, prompt: str = PROMPT, models: Mapping[str, str] | None = None) -> None:
        self._mode, self._prompt, self._models = mode, prompt, models
        self._no_prefill = False  # a prefill re-run was refused: from now on, the anchor
        self.last: str | None = None  # how the last re-run asked

    def ask(self, body: bytes, dialect: str, text: str) -> Asked | None:
        """The next re-run's body; None: the body replayed unchanged (a shape not read here, no text)."""
        request = loads(body)
        mode = mode_for(request, self._models) if self._mode == "auto" else self._mode
        if mode == "prefill" and self._no_prefill:
            mode = "anchor"
        self.last = None
        if not isinstance(request, dict) or not text.strip():
            return None
        if mode == "prefill":
            found = _prefill(request, dialect, text)
            if found is not None:
                self.last = mode
                seam = Matcher(found.left_out, True, lenient=True) if found.left_out else None
                return Asked(found.body, seam, mode)
        elif mode == "anchor":
            made = _anchored(request, dialect, text, self._prompt)
            if made is not None:
                self.last = mode
                return Asked(made[0], Seam(text, made[1]), mode)
        return None

    def refused(self) -> bool:
        """The last re-run failed before its first event; True when that was a prefill, which the next
        re-run replaces with the anchor (an upstream that refuses a prefill refuses it every time)."""
        if self.last != "prefill":
            return False
        self._no_prefill = True
        return True


def _append(messages: list[Any], text: str, extra: dict[str, Any], part: str = "text") -> None:
    last = messages[-1] if messages else None
    if not (isinstance(last, dict) and last.get("role") == "assistant"):
        messages.append({"role": "assistant", "content": text, **extra})
        return
    content = last.get("content")
    if isinstance(content, list):
        merged: Any = [*content, {"type": part, "text": text}]
    else:
        merged = (content if isinstance(content, str) else "") + text
    messages[-1] = {**last, "content": merged, **extra}


def _dumps(request: dict[str, Any]) -> bytes:
    return json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()
