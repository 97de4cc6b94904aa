"""How a re-run asks its upstream for a continuation of the client's text: the request body rewritten
(``recover_body``), in the shape of the stream's format, which its recovery class says
(:class:`~..dialects.recovery.base.Transcript`: ``prefilled``, ``turns``, ``text_part``).

``prefill``: the client's text as a final assistant turn the upstream continues, and nothing else (never
a system prompt of ours; the app's own prompt is the app's): Anthropic Messages and OpenAI chat (each
format's module says how).

``anchor``: for upstreams without prefill (OpenAI's API, newer Claude models), the client's text as an
assistant turn and one short user turn asking the model to go on, first repeating its last words
(:mod:`.anchor`); for the formats whose requests hold their turns in a field (OpenAI chat, Responses and
Anthropic Messages).

A request that already ends with an assistant turn (the app's own prefill) gets the text appended to it.
``auto`` picks one of these per request from the body's ``model`` (:data:`MODELS`), and a prefill that
the upstream refused (its re-run failed before its first event: a 400 "does not support assistant
message prefill") is followed by an anchored re-run.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any, Final, NamedTuple

from ..dialects import BY_NAME
from ..dialects.recovery.base import Transcript
from ..dialects.recovery.common import Matcher
from ..dialects.recovery.request import Prefilled, append_turn, dump_body
from ..wire import loads
from .anchor import PROMPT, Seam, anchor_of, prompt_for

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


def _shape(dialect: str) -> type[Transcript] | None:
    """The recovery class of the format named ``dialect``: it knows its requests' shape."""
    found = BY_NAME.get(dialect)
    return found.recovery if found is not None else None


def _prefill(request: dict[str, Any], dialect: str, text: str) -> Prefilled | None:
    shape = _shape(dialect)
    return shape.prefilled(request, text) if shape is not None and text else None


def anchored(body: bytes, dialect: str, text: str, prompt: str = PROMPT) -> tuple[bytes, str] | None:
    """The body asking for a continuation of ``text`` that first repeats its anchor, and the anchor;
    None when the body is not a shape read here."""
    request = loads(body)
    return _anchored(request, dialect, text, prompt) if isinstance(request, dict) else None


def _anchored(request: dict[str, Any], dialect: str, text: str, prompt: str) -> tuple[bytes, str] | None:
    anchor = anchor_of(text)
    shape = _shape(dialect)
    if not anchor or shape is None or shape.turns is None:
        return None
    field = shape.turns
    turns = request.get(field)
    if not isinstance(turns, (list, str)):
        return None
    if isinstance(turns, str):  # a shorthand (the Responses API's): the input is one user message
        turns = [{"role": "user", "content": turns}]
    turns = list(turns)
    append_turn(turns, text, {}, shape.text_part)
    turns.append({"role": "user", "content": prompt_for(prompt, anchor)})
    return dump_body({**request, field: turns}), anchor


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
