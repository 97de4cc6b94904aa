"""What the JSON checker keeps between characters, and the steps each of its parts ends on: a value's end
(told to the schema evaluator, the path popped) and a fault (sticky: the first one stays).

The reader's states are here too, since every part moves between them: ``checker.py`` reads the structure,
``scalars.py`` the characters inside a string or a number.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from .compiled import CompiledSchema
from .evaluate import Evaluator
from .path import format_path

SYNTAX: Final = "json_syntax"
SCHEMA: Final = "json_schema"

VALUE, ARRAY_FIRST, OBJECT_FIRST, KEY, COLON, AFTER, STRING, ESCAPE, UNICODE, NUMBER, LITERAL = range(11)
# number states: after '-', after a leading 0, in the integer digits, after '.', in the fraction, after
# 'e', after the exponent's sign, in the exponent
N_SIGN, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP = range(8)
N_ENDS: Final = frozenset({N_ZERO, N_INT, N_FRAC, N_EXP})
PATH_KEY_CAP: Final = 64  # characters of a key kept for the path in a message


@dataclasses.dataclass(frozen=True, slots=True)
class Fault:
    """Why the text so far can no longer be a valid document, and where."""

    code: str  # "json_syntax" or "json_schema"
    offset: int  # index, in all the text fed, of the character that proved it (the end, at close)
    path: str  # JSONPath-like: $, $.days, $.items[2]
    message: str  # for a person: "at $.days: expected integer, got a string"


class CheckerState:
    """The state of one :class:`~.checker.JsonChecker`: a stack of open containers and the few characters in
    flight, never the text so far."""

    def __init__(self, schema: CompiledSchema | None = None) -> None:
        self._evaluator = Evaluator(schema) if schema is not None else None
        self._key_cap = max(schema.key_cap + 1 if schema is not None else 0, PATH_KEY_CAP)
        self._state = VALUE
        self._containers: list[list[int]] = []  # [is_object, items so far] per open container
        self._path: list[str | int] = []
        self._offset = 0
        self._fault: Fault | None = None
        self._done = False
        self._closed = False
        self._in_key = False
        self._key: list[str] = []
        self._key_length = 0
        self._escape_start = 0
        self._hex = ""
        self._high: tuple[int, int] | None = None  # a high surrogate escape waiting for its low half
        self._number: list[str] = []
        self._number_state = N_SIGN
        self._literal = ""

    @property
    def fault(self) -> Fault | None:
        return self._fault

    @property
    def done(self) -> bool:
        """The top-level value is complete (only whitespace may follow)."""
        return self._done

    # -- a value's end, a fault --------------------------------------------------------------------------

    def _end_value(self, offset: int, number: str | None) -> None:
        """``offset``: where the value is known to have ended (its last character, or the one after)."""
        if self._evaluator is not None:
            self._schema(offset, self._evaluator.value_end(number))
        self._finish_value()

    def _finish_value(self) -> None:
        if self._containers:
            self._path.pop()
        else:
            self._done = True
        self._state = AFTER

    def _schema(self, offset: int, message: str | None) -> None:
        if message is not None and self._fault is None:
            path = format_path(self._path)
            self._fault = Fault(SCHEMA, offset, path, f"at {path}: {message}")

    def _syntax(self, offset: int, message: str) -> None:
        if self._fault is None:
            path = format_path(self._path)
            self._fault = Fault(SYNTAX, offset, path, f"invalid JSON at {path}: {message}")


def show_char(char: str) -> str:
    """A character as a syntax message names it."""
    return repr(char) if char.isprintable() else f"U+{ord(char):04X}"
