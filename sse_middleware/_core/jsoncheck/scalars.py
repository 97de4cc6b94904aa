"""The characters inside a string (a value or a key) or a number, for the JSON checker: runs of plain
characters, escapes, ``\\u`` escapes and their surrogate pairs, where a string or a key ends (a key's
characters are kept, up to a cap, for the path and the schema's property names), and a number's grammar.
"""

from __future__ import annotations

import json
from typing import Final

from .state import (
    COLON,
    N_DOT,
    N_E,
    N_ESIGN,
    N_EXP,
    N_FRAC,
    N_INT,
    N_SIGN,
    N_ZERO,
    PATH_KEY_CAP,
    STRING,
    UNICODE,
    CheckerState,
    show_char,
)

DIGITS: Final = frozenset("0123456789")
_ESCAPES: Final = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class ScalarReader(CheckerState):
    """The states ``STRING``, ``ESCAPE``, ``UNICODE`` and ``NUMBER`` of the reader, once ``_step`` has sent a
    character (or a run of them) here."""

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
                    shown = json.dumps(prefix[:PATH_KEY_CAP] + "…", ensure_ascii=False)
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
            self._state = UNICODE
        elif char in _ESCAPES:
            self._state = STRING
            self._chars(_ESCAPES[char], self._escape_start)
        else:
            self._syntax(offset, f"invalid escape '\\{char}' in a string")

    def _unicode(self, char: str, offset: int) -> None:
        if char not in "0123456789abcdefABCDEF":
            self._syntax(offset, f"unexpected {show_char(char)} in a \\u escape")
            return
        self._hex += char
        if len(self._hex) < 4:
            return
        self._state = STRING
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
        self._state = COLON
        if self._evaluator is not None:
            whole = self._key_length <= self._key_cap
            self._schema(offset, self._evaluator.key_end("".join(self._key), whole))

    # -- numbers ---------------------------------------------------------------------------------------

    def _number_digit(self, char: str) -> bool:
        state = self._number_state
        digit = char in DIGITS
        if digit and state in (N_SIGN, N_INT):
            state = N_ZERO if state == N_SIGN and char == "0" else N_INT
        elif digit and state in (N_DOT, N_FRAC):
            state = N_FRAC
        elif digit and state in (N_E, N_ESIGN, N_EXP):
            state = N_EXP
        elif char == "." and state in (N_ZERO, N_INT):
            state = N_DOT
        elif char in "eE" and state in (N_ZERO, N_INT, N_FRAC):
            state = N_E
        elif char in "+-" and state == N_E:
            state = N_ESIGN
        else:
            return False
        self._number_state = state
        if len(self._number) <= 4096:  # past jsonschema's reach, only the syntax matters
            self._number.append(char)
        return True

    def _end_number(self, offset: int) -> None:
        self._end_value(offset, "".join(self._number))
