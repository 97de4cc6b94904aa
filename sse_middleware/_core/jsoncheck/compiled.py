"""The compiled form of a schema: a graph of :class:`Node`, one per (sub)schema, that the evaluator walks
while a document streams, and the two passes over the finished graph that ``compile_schema`` runs: no
``$ref`` cycle that consumes no input, and which nodes are *exact* (nothing they apply is skipped).
"""

from __future__ import annotations

from typing import Any

from ..._exceptions import SchemaError


class Node:
    """One compiled (sub)schema. Mutable only while compiling, so that a recursive ``$ref`` can point back
    at a node whose children are not yet filled in."""

    __slots__ = (
        "additional",
        "all_of",
        "any_of",
        "enum",
        "exact",
        "exclusive_maximum",
        "exclusive_minimum",
        "items",
        "local_exact",
        "max_items",
        "max_length",
        "maximum",
        "min_items",
        "min_length",
        "minimum",
        "names",
        "never",
        "one_of",
        "prefix_items",
        "properties",
        "required",
        "types",
        "where",
    )

    def __init__(self, where: str) -> None:
        self.where = where  # the JSON pointer it was compiled from, for messages
        self.never = False
        self.types: frozenset[str] | None = None  # None: any type
        self.enum: tuple[Any, ...] | None = None  # None: any value
        self.min_length: int | None = None
        self.max_length: int | None = None
        self.minimum: float | None = None
        self.maximum: float | None = None
        self.exclusive_minimum: float | None = None
        self.exclusive_maximum: float | None = None
        self.properties: dict[str, Node] = {}
        self.required: frozenset[str] = frozenset()
        self.additional: Node | None = None  # None: any extra property is allowed (or not evaluated)
        self.names: tuple[str, ...] = ()  # the property names, for a key that must be one of them
        self.prefix_items: tuple[Node, ...] = ()
        self.items: Node | None = None
        self.min_items: int | None = None
        self.max_items: int | None = None
        self.all_of: tuple[Node, ...] = ()
        self.any_of: tuple[tuple[Node, ...], ...] = ()
        self.one_of: tuple[tuple[Node, ...], ...] = ()
        self.local_exact = True
        self.exact = True

    def children(self) -> list[Node]:
        """Every node this one applies, to the same value or to a child value."""
        found = [*self.properties.values(), *self.prefix_items, *self.all_of]
        found += [node for group in (*self.any_of, *self.one_of) for node in group]
        found += [node for node in (self.additional, self.items) if node is not None]
        return found

    def same_value(self) -> list[Node]:
        """The nodes applied to the same value: a cycle through these alone never consumes input."""
        return [*self.all_of, *(node for group in (*self.any_of, *self.one_of) for node in group)]


class CompiledSchema:
    """The checker's form of one schema: its root node and the longest name a key is compared with."""

    __slots__ = ("key_cap", "root")

    def __init__(self, root: Node, key_cap: int) -> None:
        self.root = root
        self.key_cap = key_cap


def reject_empty_cycles(nodes: list[Node]) -> None:
    """A ``$ref``/combinator cycle that consumes no input can never be evaluated to an answer."""
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for start in nodes:
        if id(start) in state:
            continue
        stack: list[tuple[Node, list[Node]]] = [(start, start.same_value())]
        state[id(start)] = 1
        while stack:
            current, pending = stack[-1]
            if not pending:
                state[id(current)] = 2
                stack.pop()
                continue
            nxt = pending.pop()
            mark = state.get(id(nxt))
            if mark == 1:
                raise SchemaError(f"a $ref cycle through {nxt.where} consumes no input")
            if mark is None:
                state[id(nxt)] = 1
                stack.append((nxt, nxt.same_value()))


def mark_exact(nodes: list[Node]) -> None:
    """A node is exact when neither it nor anything it applies has a keyword the checker skips."""
    parents: dict[int, list[Node]] = {}
    for node in nodes:
        for child in node.children():
            parents.setdefault(id(child), []).append(node)
    todo = [node for node in nodes if not node.local_exact]
    for node in todo:
        node.exact = False
    while todo:
        for parent in parents.get(id(todo.pop()), []):
            if parent.exact:
                parent.exact = False
                todo.append(parent)
