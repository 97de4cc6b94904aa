"""The schema half of the checker: which compiled nodes a value being read must still satisfy.

Each value being read has a flat list of trackers, one per node applied to it: the node the parent gave
it, and that node's ``allOf``/``anyOf``/``oneOf`` branches (whose own branches follow them). A tracker
that a keyword rules out dies, and its death climbs: to the branch group that holds it (an ``allOf``
member kills its owner, an ``anyOf``/``oneOf`` group only once no member is left), and from a child value
to the parent value's tracker that applied it. When the root tracker dies, the document is invalid.
Nothing here proves a match, except ``oneOf``'s "more than one", which counts only *exact* branches.
The trackers are in ``tracker.py``; what each keyword says of one, in ``keywords.py``.
"""

from __future__ import annotations

import json
from typing import Final

from .compiled import CompiledSchema, Node
from .keywords import end_message, key_run, start_message, string_run
from .tracker import Group, Tracker

_ALL: Final = 0
_ANY: Final = 1
_ONE: Final = 2
_MAX_TRACKERS: Final = 512  # per value; past it the schema check stops (never a fault), syntax goes on
_MAX_NUMBER: Final = 4000  # digits Python's int() reads by default; past it jsonschema cannot even parse


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
        message = start_message(tracker, kind, literal)
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
                group = Group(group_kind, [])
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
                found = key_run(tracker, run) if key else string_run(tracker, run)
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
            message = end_message(tracker, value, number)
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


def _number(text: str) -> int | float | None:
    if len(text) > _MAX_NUMBER:
        return None
    return float(text) if any(c in text for c in ".eE") else int(text)


def _show(name: str, whole: bool) -> str:
    return json.dumps(name if whole else name + "…", ensure_ascii=False)
