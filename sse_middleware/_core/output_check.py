"""Sans-I/O: a stream's JSON output held against what its request declared, character by character.

One :class:`~.jsoncheck.checker.JsonChecker` per part that has a schema (a tool call's arguments by the
tool's name, the text content by ``response_format`` / ``text.format`` or a per-request schema), made at
the part's first text. The pipeline feeds each delta's text here before merging it; the first character
that rules out every valid document ends the stream: the text before it still goes out, the rest of the
stream does not (see :meth:`~.pipeline.Pipeline.feed`). Text an event carries that is no delta
(:meth:`~.dialects.base.Dialect.texts`: an AG-UI opening chunk, an OpenAI chunk with a finish reason) is
fed too; such an event cannot be cut, so one that holds the faulty character does not go out at all. A
part is keyed as the client accumulates it (:meth:`~.dialects.base.Dialect.part_key`): one document per
choice, message or call, whichever events carried it.

A schema the checker cannot read (a remote ``$ref``, a cycle, not a schema at all) disables that part's
check, never the request: :attr:`OutputCheck.unreadable` says why, for one warning and a span attribute.
A document the stream leaves unfinished is not reported: the format's own finish reason (``length``,
``max_tokens``) already says so, and the text has gone out.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

from .._exceptions import SSEMiddlewareError
from .jsoncheck.checker import Fault, JsonChecker
from .jsoncheck.request import NO_CHECK, DeclaredSchemas, checker_for
from .wire import Part

_UNSET: Final = object()


class OutputCheck:
    __slots__ = ("_checkers", "_declared", "_fed", "fault", "part", "unreadable")

    def __init__(self, declared: DeclaredSchemas) -> None:
        self._declared = declared
        self._checkers: dict[Hashable, JsonChecker | None] = {}
        self._fed: dict[Hashable, int] = {}  # characters fed per part, to place a fault in its delta
        self.fault: Fault | None = None
        self.part: Part | None = None  # the part the fault is in
        self.unreadable: str | None = None  # why a declared schema could not be used, if one could not

    def feed(self, part: Part, key: Hashable, text: str) -> int | None:
        """How much of ``text`` may go out (its first faulty character's index), or None: all of it."""
        checker = self._checkers.get(key, _UNSET)
        if checker is _UNSET:
            checker = self._checkers[key] = self._make(part)
        if checker is None:
            return None
        assert isinstance(checker, JsonChecker)
        before = self._fed.get(key, 0)
        self._fed[key] = before + len(text)
        fault = checker.feed(text)
        if fault is None:
            return None
        self.fault, self.part = fault, part
        return min(max(fault.offset - before, 0), len(text))

    def _make(self, part: Part) -> JsonChecker | None:
        if part.kind == "tool_arguments":
            declared = self._declared.for_tool(part.name) if part.name is not None else NO_CHECK
        elif part.kind == "text":
            declared = self._declared.content
        else:
            return None  # reasoning is free text
        try:
            return checker_for(declared)
        except SSEMiddlewareError as exc:  # SchemaError: this part goes unchecked, the stream goes on
            self.unreadable = self.unreadable or str(exc)
            return None

    def message(self) -> str:
        """Where and why, for the client: e.g. ``tool call get_weather, arguments at $.days: ...``."""
        fault, part = self.fault, self.part
        if fault is None or part is None:
            return ""
        if part.kind == "tool_arguments":
            return f"tool call {part.name}, arguments {fault.message}"
        return f"output {fault.message}"
