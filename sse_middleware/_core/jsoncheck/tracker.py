"""What the evaluator keeps per value: a :class:`Tracker` per node applied to it, and a :class:`Group` per
``allOf``/``anyOf``/``oneOf`` of that node, holding its branches' trackers."""

from __future__ import annotations

from typing import Any

from .compiled import Node


class Group:
    """One ``allOf``/``anyOf``/``oneOf`` of a tracker's node: its branches' trackers, how many are alive."""

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
        "names",
        "node",
        "owner",
        "position",
        "seen",
    )

    def __init__(self, node: Node, owner: Tracker | None, group: Group | None) -> None:
        self.node = node
        self.owner = owner
        self.group = group
        self.alive = True
        self.groups: list[Group] = []
        self.kind = ""
        self.candidates: list[Any] | None = None  # enum values still reachable
        self.position = 0  # code points of the string (or key) read so far
        self.count = 0  # items of an array
        self.seen: set[str] = set()  # required names present
        self.child: Node | None = None  # the node for the value after the current key
        self.names: list[str] | None = None  # property names the current key may still become
