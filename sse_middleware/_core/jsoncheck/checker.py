"""An incremental JSON reader that says, at the first character that proves it, that a text can no longer
become a valid document: RFC 8259 syntax exactly (what ``json.loads`` accepts once NaN and Infinity are
refused), and optionally a JSON Schema (the subset in ``schema.py``).

It keeps a stack of open containers and the few characters in flight (an escape, a number), never the text
so far, so each character costs the same however long the document grows. Faults are sticky.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Final

from .compiled import CompiledSchema
from .evaluate import Evaluator
from .path import format_path

SYNTAX: Final = "json_syntax"
SCHEMA: Final = "json_schema"

_VALUE, _ARRAY_FIRST, _OBJECT_FIRST, _KEY, _COLON, _AFTER, _STRING, _ESCAPE, _UNICODE, _NUMBER, _LITERAL = (
    range(11)
)
# number states: after '-', after a leading 0, in the integer digits, after '.', in the fraction, after
# 'e', after the exponent's sign, in the exponent
_N_SIGN, _N_ZERO, _N_INT, _N_DOT, _N_FRAC, _N_E, _N_ESIGN, _N_EXP = range(8)
_N_ENDS: Final = frozenset({_N_ZERO, _N_INT, _N_FRAC, _N_EXP})
_DIGITS: Final = frozenset("0123456789")
_WHITESPACE: Final = frozenset(" \t\n\r")
_WHITESPACE_RUN: Final = re.compile(r"[ \t\n\r]*")
_PLAIN_RUN: Final = re.compile(r'[^"\\\x00-\x1f]+')
_ESCAPES: Final = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_LITERALS: Final = {"t": ("true", True), "f": ("false", False), "n": ("null", None)}
_KIND_OF_LITERAL: Final = {True: "boolean", False: "boolean", None: "null"}
_PATH_KEY_CAP: Final = 64  # characters of a key kept for the path in a message


@dataclasses.dataclass(frozen=True, slots=True)
class Fault:
    """Why the text so far can no longer be a valid document, and where."""

    code: str  # "json_syntax" or "json_schema"
    offset: int  # index, in all the text fed, of the character that proved it (the end, at close)
    path: str  # JSONPath-like: $, $.days, $.items[2]
    message: str  # for a person: "at $.days: expected integer, got a string"


class JsonChecker:
    """``feed(text)`` as the text streams, ``close()`` at its end; each returns the fault, if any."""

    def __init__(self, schema: CompiledSchema | None = None) -> None:
        self._evaluator = Evaluator(schema) if schema is not None else None
        self._key_cap = max(schema.key_cap + 1 if schema is not None else 0, _PATH_KEY_CAP)
        self._state = _VALUE
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
        self._number_state = _N_SIGN
        self._literal = ""

    @property
    def fault(self) -> Fault | None:
        return self._fault

    @property
    def done(self) -> bool:
        """The top-level value is complete (only whitespace may follow)."""
        return self._done

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
        if self._state == _NUMBER and self._number_state in _N_ENDS:
            self._end_number(end)
        if self._fault is None and not self._done:
            what = "empty text" if self._state == _VALUE and not self._containers else "unexpected end"
            self._syntax(end, f"{what}, the JSON value is not complete")
        return self._fault

    # -- one step: consume from text[index:], return the next index ------------------------------------------

    def _step(self, text: str, index: int, base: int) -> int:
        state = self._state
        char = text[index]
        if state == _STRING:
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
                self._state = _ESCAPE
            else:
                self._syntax(base + index, f"unescaped control character {char!r} in a string")
            return index + 1
        if char in _WHITESPACE and state in (_VALUE, _ARRAY_FIRST, _OBJECT_FIRST, _KEY, _COLON, _AFTER):
            return _WHITESPACE_RUN.match(text, index).end()  # type: ignore[union-attr]
        offset = base + index
        if state == _NUMBER:
            if self._number_digit(char):
                return index + 1
            if self._number_state not in _N_ENDS:
                self._syntax(offset, f"unexpected {_show(char)} in a number")
                return index + 1
            self._end_number(offset)
            return index  # the character after the number is read again, in the state after a value
        if state == _ESCAPE:
            self._escape(char, offset)
        elif state == _UNICODE:
            self._unicode(char, offset)
        elif state == _LITERAL:
            if char == self._literal[0]:
                self._literal = self._literal[1:]
                if not self._literal:
                    self._end_value(offset + 1, None)
            else:
                self._syntax(offset, f"unexpected {_show(char)} in a literal")
        elif state in (_VALUE, _ARRAY_FIRST):
            if char == "]" and state == _ARRAY_FIRST:
                self._close_container(offset, False)
            else:
                self._begin_value(char, offset)
        elif state in (_OBJECT_FIRST, _KEY):
            if char == '"':
                self._in_key = True
                self._key.clear()
                self._key_length = 0
                self._state = _STRING
                if self._evaluator is not None:
                    self._evaluator.key_start()
            elif char == "}" and state == _OBJECT_FIRST:
                self._close_container(offset, True)
            else:
                self._syntax(offset, f"unexpected {_show(char)}, expected a property name")
        elif state == _COLON:
            if char == ":":
                self._state = _VALUE
            else:
                self._syntax(offset, f"unexpected {_show(char)}, expected ':'")
        else:
            self._after_value(char, offset)
        return index + 1

    def _begin_value(self, char: str, offset: int) -> None:
        if char == '"':
            kind, literal, state = "string", None, _STRING
        elif char == "-" or char in _DIGITS:
            kind, literal, state = "number", None, _NUMBER
            self._number = [char]
            self._number_state = _N_SIGN if char == "-" else _N_ZERO if char == "0" else _N_INT
        elif char in _LITERALS:
            self._literal, literal = _LITERALS[char]
            self._literal = self._literal[1:]
            kind, state = _KIND_OF_LITERAL[literal], _LITERAL
        elif char in "{[":
            kind, literal = ("object", None) if char == "{" else ("array", None)
            state = _OBJECT_FIRST if char == "{" else _ARRAY_FIRST
        else:
            self._syntax(offset, f"unexpected {_show(char)}, expected a value")
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
            self._syntax(offset, f"unexpected {_show(char)} after the JSON value")
        elif char == ",":
            self._state = _KEY if self._containers[-1][0] else _VALUE
        elif char in "}]" and (char == "}") == bool(self._containers[-1][0]):
            self._close_container(offset, char == "}")
        else:
            closer = "'}'" if self._containers[-1][0] else "']'"
            self._syntax(offset, f"unexpected {_show(char)}, expected ',' or {closer}")

    def _close_container(self, offset: int, is_object: bool) -> None:
        if self._evaluator is not None:
            self._schema(offset, self._evaluator.value_end())
        self._containers.pop()
        self._finish_value()

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
        self._state = _AFTER

    # -- strings ---------------------------------------------------------------------------------------

    def _chars(self, run: str, start: int) -> None:
        """Decoded characters of the current string or key; ``start`` is the text offset of the first, and
        of each next one (a run from the text itself) or of all of them (one escape)."""
        if self._high is not None:
            self._flush_high()
            if self._fault is not None:
                return
        if self._evaluator is not None:
            found = self._evaluator.text(run, self._in_key)
            if found is not None:
                message = found[0]
                if self._in_key:
                    prefix = "".join(self._key) + run[: found[1] + 1]
                    shown = json.dumps(prefix[:_PATH_KEY_CAP] + "…", ensure_ascii=False)
                    message = f"property {shown} {message}"
                self._schema(start + found[1], message)
                return
        if self._in_key and self._key_length < self._key_cap:
            self._key.append(run[: self._key_cap - self._key_length])
        if self._in_key:
            self._key_length += len(run)

    def _flush_high(self) -> None:
        if self._high is not None:
            code, start = self._high
            self._high = None
            self._chars(chr(code), start)

    def _escape(self, char: str, offset: int) -> None:
        if char == "u":
            self._hex = ""
            self._state = _UNICODE
        elif char in _ESCAPES:
            self._state = _STRING
            self._chars(_ESCAPES[char], self._escape_start)
        else:
            self._syntax(offset, f"invalid escape '\\{char}' in a string")

    def _unicode(self, char: str, offset: int) -> None:
        if char not in "0123456789abcdefABCDEF":
            self._syntax(offset, f"unexpected {_show(char)} in a \\u escape")
            return
        self._hex += char
        if len(self._hex) < 4:
            return
        self._state = _STRING
        code = int(self._hex, 16)
        if 0xDC00 <= code <= 0xDFFF and self._high is not None:
            high, start = self._high
            self._high = None
            self._chars(chr(0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00)), start)
        elif 0xD800 <= code <= 0xDBFF:
            self._flush_high()
            self._high = (code, self._escape_start)
        else:
            self._chars(chr(code), self._escape_start)

    def _end_string(self, offset: int) -> None:
        if not self._in_key:
            self._end_value(offset, None)
            return
        self._state = _COLON
        if self._evaluator is not None:
            whole = self._key_length <= self._key_cap
            self._schema(offset, self._evaluator.key_end("".join(self._key), whole))

    # -- numbers ---------------------------------------------------------------------------------------

    def _number_digit(self, char: str) -> bool:
        state = self._number_state
        digit = char in _DIGITS
        if digit and state in (_N_SIGN, _N_INT):
            state = _N_ZERO if state == _N_SIGN and char == "0" else _N_INT
        elif digit and state in (_N_DOT, _N_FRAC):
            state = _N_FRAC
        elif digit and state in (_N_E, _N_ESIGN, _N_EXP):
            state = _N_EXP
        elif char == "." and state in (_N_ZERO, _N_INT):
            state = _N_DOT
        elif char in "eE" and state in (_N_ZERO, _N_INT, _N_FRAC):
            state = _N_E
        elif char in "+-" and state == _N_E:
            state = _N_ESIGN
        else:
            return False
        self._number_state = state
        if len(self._number) <= 4096:  # past jsonschema's reach, only the syntax matters
            self._number.append(char)
        return True

    def _end_number(self, offset: int) -> None:
        self._end_value(offset, "".join(self._number))

    # -- faults ----------------------------------------------------------------------------------------

    def _schema(self, offset: int, message: str | None) -> None:
        if message is not None and self._fault is None:
            path = format_path(self._path)
            self._fault = Fault(SCHEMA, offset, path, f"at {path}: {message}")

    def _syntax(self, offset: int, message: str) -> None:
        if self._fault is None:
            path = format_path(self._path)
            self._fault = Fault(SYNTAX, offset, path, f"invalid JSON at {path}: {message}")


def _show(char: str) -> str:
    return repr(char) if char.isprintable() else f"U+{ord(char):04X}"
