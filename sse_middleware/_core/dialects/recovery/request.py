"""What every format's request rewrite shares: a re-run's body that asks its upstream for a continuation
is the request with the client's text added as the assistant's turn (see ``Transcript.prefilled`` and
``Transcript.turns``), written compactly."""

from __future__ import annotations

import json
from typing import Any, NamedTuple


class Prefilled(NamedTuple):
    body: bytes
    left_out: str
    """Trailing whitespace of the client's text that the prefill could not carry."""


def turns_of(request: dict[str, Any], field: str) -> list[Any] | None:
    """A copy of the request's list of turns under ``field`` (to append to); None when it has none."""
    turns = request.get(field)
    return list(turns) if isinstance(turns, list) else None


def append_turn(messages: list[Any], text: str, extra: dict[str, Any], part: str = "text") -> None:
    """``text`` as the assistant's turn: appended to the last turn when that is the assistant's (the app's
    own prefill), else a turn of its own; ``extra``: fields the turn gets; ``part``: the type of a text
    part, where the turn's content is a list of parts."""
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


def dump_body(request: dict[str, Any]) -> bytes:
    return json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()
