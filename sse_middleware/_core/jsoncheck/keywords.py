"""What each keyword family says of one value, for one :class:`~.tracker.Tracker`: ``type``, ``enum`` and
``const`` when the value starts; the string's (or key's) characters as they are read (``enum`` prefixes,
``maxLength``, the names a closed object allows); and when it ends (``minLength``, a number's bounds,
``required``, ``minItems``). Each returns the message that rules the value out, or ``None``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from .compiled import Node
from .schema import json_equal
from .tracker import Tracker

ARTICLE: Final = {
    "string": "a string",
    "number": "a number",
    "object": "an object",
    "array": "an array",
    "boolean": "a boolean",
    "null": "null",
}
_TYPE_ORDER: Final = ("object", "array", "string", "integer", "number", "boolean", "null")


def start_message(tracker: Tracker, kind: str, literal: object) -> str | None:
    node = tracker.node
    if node.never:
        return "no value is allowed here"
    types = node.types
    if types is not None and kind not in types and not (kind == "number" and "integer" in types):
        return f"expected {_types(types)}, got {ARTICLE[kind]}"
    if node.enum is not None:
        candidates = [value for value in node.enum if _kind(value) == kind]
        if kind in ("boolean", "null"):
            candidates = [value for value in candidates if value is literal]
        if not candidates:
            return f"expected {_choices(node.enum)}, got {ARTICLE[kind]}"
        tracker.candidates = candidates
    return None


def string_run(tracker: Tracker, run: str) -> tuple[int, str] | None:
    node = tracker.node
    start = tracker.position
    tracker.position += len(run)
    failure: tuple[int, str] | None = None
    if tracker.candidates is not None:
        alive = [value for value in tracker.candidates if value.startswith(run, start)]
        if not alive:
            reach = max(_common(value, start, run) for value in tracker.candidates)
            failure = (reach, f"expected {_choices(node.enum or ())}")
        tracker.candidates = alive
    if node.max_length is not None and tracker.position > node.max_length:
        index = max(node.max_length - start, 0)
        if failure is None or index < failure[0]:
            failure = (index, f"expected at most {node.max_length} characters")
    return failure


def key_run(tracker: Tracker, run: str) -> tuple[int, str] | None:
    start = tracker.position
    tracker.position += len(run)
    if tracker.names is None:
        return None
    alive = [name for name in tracker.names if name.startswith(run, start)]
    if alive:
        tracker.names = alive
        return None
    reach = max((_common(name, start, run) for name in tracker.names), default=0)
    tracker.names = None
    return reach, f"is not allowed (allowed: {_choices(tracker.node.names)})"


def end_message(tracker: Tracker, value: int | float | None, text: str | None) -> str | None:
    node = tracker.node
    kind = tracker.kind
    if kind == "string":
        if tracker.candidates is not None and not any(len(v) == tracker.position for v in tracker.candidates):
            return f"expected {_choices(node.enum or ())}"
        if node.min_length is not None and tracker.position < node.min_length:
            return f"expected at least {node.min_length} characters, got {tracker.position}"
    elif kind == "number" and value is not None:
        return _number_message(node, tracker.candidates, value, text or "")
    elif kind == "object":
        missing = sorted(node.required - tracker.seen)
        if missing:
            return f"missing required property {json.dumps(missing[0])}"
    elif kind == "array" and node.min_items is not None and tracker.count < node.min_items:
        return f"expected at least {node.min_items} items, got {tracker.count}"
    return None


def _number_message(node: Node, candidates: list[Any] | None, value: int | float, text: str) -> str | None:
    shown = text if len(text) <= 24 else text[:24] + "…"
    if node.types is not None and "number" not in node.types and not _integral(value):
        return f"expected integer, got {shown}"
    if candidates is not None and not any(json_equal(value, c) for c in candidates):
        return f"expected {_choices(candidates)}, got {shown}"
    if node.minimum is not None and value < node.minimum:
        return f"expected a number at least {node.minimum}, got {shown}"
    if node.maximum is not None and value > node.maximum:
        return f"expected a number at most {node.maximum}, got {shown}"
    if node.exclusive_minimum is not None and value <= node.exclusive_minimum:
        return f"expected a number more than {node.exclusive_minimum}, got {shown}"
    if node.exclusive_maximum is not None and value >= node.exclusive_maximum:
        return f"expected a number less than {node.exclusive_maximum}, got {shown}"
    return None


def _integral(value: int | float) -> bool:
    return isinstance(value, int) or value.is_integer()


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else "?"


def _common(value: str, start: int, run: str) -> int:
    count = 0
    for mine, theirs in zip(value[start:], run, strict=False):
        if mine != theirs:
            break
        count += 1
    return count


def _types(types: frozenset[str]) -> str:
    names = [name for name in _TYPE_ORDER if name in types]
    return " or ".join(names) if names else "nothing (type is an empty list)"


def _choices(values: Sequence[Any]) -> str:
    shown = [json.dumps(value, ensure_ascii=False) for value in values[:5]]
    more = ", ..." if len(values) > 5 else ""
    return ("one of " if len(shown) > 1 or more else "") + ", ".join(shown) + more
