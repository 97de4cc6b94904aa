"""The schema half of the checker: which compiled nodes a value being read must still satisfy.

Each value being read has a flat list of trackers, one per node applied to it: the node the parent gave
it, and that node's ``allOf``/``anyOf``/``oneOf`` branches (whose own branches follow them). A tracker
that a keyword rules out dies, and its death climbs: to the branch group that holds it (an ``allOf``
member kills its owner, an ``anyOf``/``oneOf`` group only once no member is left), and from a child value
to the parent value's tracker that applied it. When the root tracker dies, the document is invalid.
Nothing here proves a match, except ``oneOf``'s "more than one", which counts only *exact* branches.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from .compiled import CompiledSchema, Node
from .schema import json_equal

_ALL: Final = 0
_ANY: Final = 1
_ONE: Final = 2
_MAX_TRACKERS: Final = 512  # per value; past it the schema check stops (never a fault), syntax goes on
_MAX_NUMBER: Final = 4000  # digits Python's int() reads by default; past it jsonschema cannot even parse

ARTICLE: Final = {
    "string": "a string",
    "number": "a number",
    "object": "an object",
    "array": "an array",
    "boolean": "a boolean",
    "null": "null",
}
_TYPE_ORDER: Final = ("object", "array", "string", "integer", "number", "boolean", "null")


class _Group:
    __slots__ = ("alive", "kind", "members")

    def __init__(self, kind: int, members: list[Tracker]) -> None:
        self.kind = kind
        self.members = members
        self.alive = len(members)


class Tracker:
    """One node held against one value: that value's progress as far as the node's keywords care."""

    __slots__ = (
        "alive",
        "candidates",
        "child",
        "count",
        "group",
        "groups",
        "kind",
        "length",
        "names",
        "node",
        "owner",
        "position",
        "seen",
    )

    def __init__(self, node: Node, owner: Tracker | None, group: _Group | None) -> None:
        self.node = node
        self.owner = owner
        self.group = group
        self.alive = True
        self.groups: list[_Group] = []
        self.kind = ""
        self.candidates: list[Any] | None = None  # enum values still reachable
        self.position = 0  # code points of the string (or key) read so far
        self.length = 0
        self.count = 0  # items of an array
        self.seen: set[str] = set()  # required names present
        self.child: Node | None = None  # the node for the value after the current key
        self.names: list[str] | None = None  # property names the current key may still become


class Evaluator:
    """Events from the syntax reader in, the first message that rules the document out."""

    def __init__(self, compiled: CompiledSchema) -> None:
        self.root = compiled.root
        self.stack: list[list[Tracker]] = []
        self.failure: str | None = None
        self.enabled = True
        self._created = 0

    def value_start(self, kind: str, literal: object, in_array: bool) -> str | None:
        """A value begins: ``kind`` is known from its first character (``literal``: true/false/null)."""
        if not self.enabled:
            return None
        heads: list[tuple[Node, Tracker | None]] = []
        if not self.stack:
            heads.append((self.root, None))
        else:
            for parent in self.stack[-1]:
                if not parent.alive:
                    continue
                node = self._item(parent) if in_array else parent.child
                if node is not None and parent.alive:
                    heads.append((node, parent))
        trackers: list[Tracker] = []
        self._created = 0
        for node, owner in heads:
            self._start(Tracker(node, owner, None), kind, literal, trackers)
        self.stack.append(trackers)
        if self._created > _MAX_TRACKERS:
            self.enabled = False
            self.stack.clear()
        return self.failure

    def _item(self, parent: Tracker) -> Node | None:
        node = parent.node
        index = parent.count
        parent.count += 1
        if node.max_items is not None and parent.count > node.max_items:
            self._kill(parent, f"expected at most {node.max_items} items")
            return None
        return node.prefix_items[index] if index < len(node.prefix_items) else node.items

    def _start(self, tracker: Tracker, kind: str, literal: object, out: list[Tracker]) -> None:
        out.append(tracker)
        self._created += 1
        tracker.kind = kind
        message = _start_message(tracker, kind, literal)
        if message is not None:
            self._kill(tracker, message)
            return
        node = tracker.node
        pending: list[Tracker] = []
        for group_kind, members in (
            (_ALL, node.all_of),
            *((_ANY, g) for g in node.any_of),
            *((_ONE, g) for g in node.one_of),
        ):
            if members:
                group = _Group(group_kind, [])
                group.members = [Tracker(member, tracker, group) for member in members]
                group.alive = len(group.members)
                tracker.groups.append(group)
                pending += group.members
        for member in pending:
            if not tracker.alive or self._created > _MAX_TRACKERS:
                return
            self._start(member, kind, literal, out)

    def text(self, run: str, key: bool) -> tuple[str, int] | None:
        """Characters (decoded) of the current string, or of the current key: the failure and the index in
        ``run`` of the first character at which the document is ruled out."""
        if not self.enabled or not self.stack:
            return None
        kills: list[tuple[int, Tracker, str]] = []
        for tracker in self.stack[-1]:
            if tracker.alive:
                found = _key_run(tracker, run) if key else _string_run(tracker, run)
                if found is not None:
                    kills.append((found[0], tracker, found[1]))
        for index, tracker, message in sorted(kills, key=lambda kill: kill[0]):
            self._kill(tracker, message)
            if self.failure is not None:
                return self.failure, index
        return None

    def key_start(self) -> None:
        if self.enabled and self.stack:
            for tracker in self.stack[-1]:
                node = tracker.node
                tracker.position = 0
                closed = node.additional is not None and node.additional.never
                tracker.names = list(node.names) if closed else None

    def key_end(self, name: str, whole: bool) -> str | None:
        """A key is complete (``whole``: not cut short; a cut key is longer than every name compared)."""
        if not self.enabled or not self.stack:
            return None
        for tracker in self.stack[-1]:
            if not tracker.alive:
                continue
            node = tracker.node
            known = node.properties.get(name) if whole else None
            tracker.child = known if known is not None else node.additional
            if whole and name in node.required:
                tracker.seen.add(name)
            if known is None and tracker.child is not None and tracker.child.never:
                self._kill(tracker, f"property {_show(name, whole)} is not allowed")
        return self.failure

    def value_end(self, number: str | None = None) -> str | None:
        """The current value ends (``number``: its text, when it is a number)."""
        if not self.enabled or not self.stack:
            return None
        value = _number(number) if number is not None else None
        for tracker in reversed(self.stack.pop()):
            if not tracker.alive:
                continue
            message = _end_message(tracker, value, number)
            if message is None:
                for group in tracker.groups:
                    exact = sum(1 for m in group.members if m.alive and m.node.exact)
                    if group.kind == _ONE and exact > 1:
                        message = f"matches {exact} oneOf branches, not exactly one"
            if message is not None:
                self._kill(tracker, message)
        return self.failure

    def _kill(self, tracker: Tracker, message: str) -> None:
        current: Tracker | None = tracker
        while current is not None and current.alive:
            current.alive = False
            group = current.group
            if current.owner is None:
                self.failure = self.failure or message
                return
            if group is not None:
                group.alive -= 1
                if group.kind != _ALL and group.alive > 0:
                    return
            current = current.owner


def _start_message(tracker: Tracker, kind: str, literal: object) -> str | None:
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


def _string_run(tracker: Tracker, run: str) -> tuple[int, str] | None:
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


def _key_run(tracker: Tracker, run: str) -> tuple[int, str] | None:
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


def _end_message(tracker: Tracker, value: int | float | None, text: str | None) -> str | None:
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


def _number(text: str) -> int | float | None:
    if len(text) > _MAX_NUMBER:
        return None
    return float(text) if any(c in text for c in ".eE") else int(text)


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


def _show(name: str, whole: bool) -> str:
    return json.dumps(name if whole else name + "…", ensure_ascii=False)
