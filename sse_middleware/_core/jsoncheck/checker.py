"""An incremental JSON reader that says, at the first character that proves it, that a text can no longer
become a valid document: RFC 8259 syntax exactly (what ``json.loads`` accepts once NaN and Infinity are
refused), and optionally a JSON Schema (the subset in ``schema.py``).

It keeps a stack of open containers and the few characters in flight (an escape, a number), never the text
so far, so each character costs the same however long the document grows. Faults are sticky.
This module reads the structure (values, containers, separators, literals); what it keeps is in
``state.py``, the characters inside a string or a number are read in ``scalars.py``.
"""

from __future__ import annotations

import re
from typing import Final

from .scalars import DIGITS, ScalarReader
from .state import (
    AFTER,
    ARRAY_FIRST,
    COLON,
    ESCAPE,
    KEY,
    LITERAL,
    N_ENDS,
    N_INT,
    N_SIGN,
    N_ZERO,
    NUMBER,
    OBJECT_FIRST,
    STRING,
    UNICODE,
    VALUE,
    Fault,
    show_char,
)

__all__ = ["Fault", "JsonChecker"]  # a fault is what the checker answers: its callers import both from here

_WHITESPACE: Final = frozenset(" \t\n\r")
_WHITESPACE_RUN: Final = re.compile(r"[ \t\n\r]*")
_PLAIN_RUN: Final = re.compile(r'[^"\\\x00-\x1f]+')
_LITERALS: Final = {"t": ("true", True), "f": ("false", False), "n": ("null", None)}
_KIND_OF_LITERAL: Final = {True: "boolean", False: "boolean", None: "null"}


class JsonChecker(ScalarReader):
    """``feed(text)`` as the text streams, ``close()`` at its end; each returns the fault, if any."""

    def feed(self, text: str) -> Fault | None:
        if self._fault is not None or self._closed:
            return self._fault
        base = self._offset
        index, end = 0, len(text)
        try:
            while index < end and self._fault is None:
                index = self._step(text, index, base)
        finally:
            self._offset = base + end
        return self._fault

    def close(self) -> Fault | None:
        if self._fault is not None or self._closed:
            return self._fault
        self._closed = True
        end = self._offset
        if self._state == NUMBER and self._number_state in N_ENDS:
            self._end_number(end)
        if self._fault is None and not self._done:
            what = "empty text" if self._state == VALUE and not self._containers else "unexpected end"
            self._syntax(end, f"{what}, the JSON value is not complete")
        return self._fault

    # -- one step: consume from text[index:], return the next index ------------------------------------------

    def _step(self, text: str, index: int, base: int) -> int:
        state = self._state
        char = text[index]
        if state == STRING:
            run = _PLAIN_RUN.match(text, index)
            if run is not None:
                self._chars(run.group(), base + index)
                return run.end()
            if char == '"':
                self._flush_high()
                if self._fault is None:
                    self._end_string(base + index)
            elif char == "\\":
                self._escape_start = base + index
                self._state = ESCAPE
            else:
                self._syntax(base + index, f"unescaped control character {char!r} in a string")
            return index + 1
        if char in _WHITESPACE and state in (VALUE, ARRAY_FIRST, OBJECT_FIRST, KEY, COLON, AFTER):
            return _WHITESPACE_RUN.match(text, index).end()  # type: ignore[union-attr]
        offset = base + index
        if state == NUMBER:
            if self._number_digit(char):
                return index + 1
            if self._number_state not in N_ENDS:
                self._syntax(offset, f"unexpected {show_char(char)} in a number")
                return index + 1
            self._end_number(offset)
            return index  # the character after the number is read again, in the state after a value
        if state == ESCAPE:
            self._escape(char, offset)
        elif state == UNICODE:
            self._unicode(char, offset)
        elif state == LITERAL:
            if char == self._literal[0]:
                self._literal = self._literal[1:]
                if not self._literal:
                    self._end_value(offset + 1, None)
            else:
                self._syntax(offset, f"unexpected {show_char(char)} in a literal")
        elif state in (VALUE, ARRAY_FIRST):
            if char == "]" and state == ARRAY_FIRST:
                self._close_container(offset)
            else:
                self._begin_value(char, offset)
        elif state in (OBJECT_FIRST, KEY):
            if char == '"':
                self._in_key = True
                self._key.clear()
                self._key_length = 0
                self._state = STRING
                if self._evaluator is not None:
                    self._evaluator.key_start()
            elif char == "}" and state == OBJECT_FIRST:
                self._close_container(offset)
            else:
                self._syntax(offset, f"unexpected {show_char(char)}, expected a property name")
        elif state == COLON:
            if char == ":":
                self._state = VALUE
            else:
                self._syntax(offset, f"unexpected {show_char(char)}, expected ':'")
        else:
            self._after_value(char, offset)
        return index + 1

    def _begin_value(self, char: str, offset: int) -> None:
        if char == '"':
            kind, literal, state = "string", None, STRING
        elif char == "-" or char in DIGITS:
            kind, literal, state = "number", None, NUMBER
            self._number = [char]
            self._number_state = N_SIGN if char == "-" else N_ZERO if char == "0" else N_INT
        elif char in _LITERALS:
            self._literal, literal = _LITERALS[char]
            self._literal = self._literal[1:]
            kind, state = _KIND_OF_LITERAL[literal], LITERAL
        elif char in "{[":
            kind, literal = ("object", None) if char == "{" else ("array", None)
            state = OBJECT_FIRST if char == "{" else ARRAY_FIRST
        else:
            self._syntax(offset, f"unexpected {show_char(char)}, expected a value")
            return
        in_array = False
        if self._containers:
            container = self._containers[-1]
            in_array = not container[0]
            if in_array:
                self._path.append(container[1])
                container[1] += 1
            else:
                self._path.append("".join(self._key))
        self._state = state
        self._in_key = False
        if char in "{[":
            self._containers.append([char == "{", 0])
        if self._evaluator is not None:
            self._schema(offset, self._evaluator.value_start(kind, literal, in_array))

    def _after_value(self, char: str, offset: int) -> None:
        if not self._containers:
            self._syntax(offset, f"unexpected {show_char(char)} after the JSON value")
        elif char == ",":
            self._state = KEY if self._containers[-1][0] else VALUE
        elif char in "}]" and (char == "}") == bool(self._containers[-1][0]):
            self._close_container(offset)
        else:
            closer = "'}'" if self._containers[-1][0] else "']'"
            self._syntax(offset, f"unexpected {show_char(char)}, expected ',' or {closer}")

    def _close_container(self, offset: int) -> None:
        if self._evaluator is not None:
            self._schema(offset, self._evaluator.value_end())
        self._containers.pop()
        self._finish_value()
