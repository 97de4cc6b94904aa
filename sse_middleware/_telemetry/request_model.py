"""``gen_ai.request.model`` from the request body the app read: sans-I/O, bounded, cheap.

The shell hands over at most :data:`PEEK_BYTES` of the body the app itself read through ``receive``
(never reading it for the app). An OpenAI- or Anthropic-style body is a JSON object whose *top-level*
``"model"`` names the model; a ``"model"`` key nested in a message or a tool schema does not count.

Parsing the whole body would cost as much as the app's own parse of it, once more per stream. Both
official SDKs put ``"model"`` after ``"messages"``, near the end, and hand-written clients often put it
first, so the two ends are tried first, each for the price of a few bytes: the first member, then a
top-level ``"model"`` found from the end, proven top-level by parsing only what follows it. A body cut
at the bound is walked member by member, within :data:`_WALK_BYTES`. Whatever cannot be proven gives
``None``, never a guess: a miss costs an attribute, a wrong model would mislead every chart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["MAX_MODEL_CHARS", "PEEK_BYTES", "BodyPeek", "request_model"]

PEEK_BYTES: Final = 1 << 20
"""How much of the request body the shell keeps (references to the app's own chunks, dropped once the
response starts). A body this long or longer is taken as cut short."""
MAX_MODEL_CHARS: Final = 256  # a longer "model" is no model name; it stays off spans and metrics
_WALK_BYTES: Final = 16 * 1024  # a cut body is walked member by member only this far
_CANDIDATES: Final = 4  # at most this many "model" keys tried from the end (nested ones are rejected)

_KEY: Final = b'"model"'
_WS: Final = re.compile(r"[ \t\n\r]*")
_WS_BYTES: Final = b" \t\n\r"
_WS_CHARS: Final = frozenset(" \t\n\r")
_DECODER: Final = json.JSONDecoder()


def request_model(body: bytes, *, complete: bool) -> str | None:
    """The top-level ``"model"`` string of a JSON object body, else None: not JSON, not an object, no
    such key, a value that is not a short string, or a body cut before it. ``complete``: ``body`` is
    the whole body, not a prefix: only then does a member that closes an object at the end of the
    bytes prove it belongs to the outermost one (if the body is valid JSON: an app that streams has
    parsed it; a broken body it accepted anyway may give any string member that ends it)."""
    start = 0
    while start < len(body) and body[start] in _WS_BYTES:
        start += 1
    if body[start : start + 1] != b"{":
        return None
    model = _first_member(body, start + 1)
    walk = not complete  # cut short: "model" may be anywhere before the cut, or after it
    if model is None and not walk:
        model, walk = _from_the_end(body)
    if model is None and walk:
        model = _walk(body[:_WALK_BYTES].decode("utf-8", "replace"), start + 1)
    return model if model is not None and 0 < len(model) <= MAX_MODEL_CHARS else None


def _first_member(body: bytes, at: int) -> str | None:
    """``{"model": "x", ...``: the common hand-written order."""
    head = body[at : at + 64 + MAX_MODEL_CHARS * 6].decode("utf-8", "replace")
    i = _skip(head, 0)
    if not head.startswith('"model"', i):
        return None
    return _string_after_colon(head, i + len('"model"'))[0]


def _from_the_end(body: bytes) -> tuple[str | None, bool]:
    """A complete body: each ``"model"`` from the end, kept only if it is a member of the outermost
    object, which holds exactly when what follows its value closes that object and nothing else.
    Also says whether it gave up (more nested ``"model"`` keys than it tries): then walk instead."""
    end = len(body)
    for _ in range(_CANDIDATES):
        at = body.rfind(_KEY, 0, end)
        if at < 0:
            return None, False
        end = at
        # A structural quote follows "{" or "," (and whitespace); one inside a string follows a "\".
        before = at - 1
        while before >= 0 and body[before] in _WS_BYTES:
            before -= 1
        if before < 0 or body[before] not in b"{,":
            continue
        tail = body[at + len(_KEY) :].decode("utf-8", "replace")
        value, after = _string_after_colon(tail, 0)
        if value is not None and _closes_the_object(tail, after):
            return value, False
    return None, True


def _closes_the_object(text: str, at: int) -> bool:
    """Whether ``text[at:]`` is the rest of one object's members and its closing brace, then the end."""
    i = _skip(text, at)
    if text.startswith("}", i):
        rest = text[i + 1 :]
    elif text.startswith(",", i):
        try:
            _, end = _DECODER.raw_decode("{" + text[i + 1 :])
        except ValueError:
            return False
        rest = text[i + end :]
    else:
        return False
    return not rest.strip(" \t\n\r")


def _walk(text: str, at: int) -> str | None:
    """A body cut short: decode member after member (in C) until ``"model"`` or the cut."""
    i = at
    try:
        while True:
            i = _skip(text, i)
            key, i = _DECODER.raw_decode(text, i)
            if not isinstance(key, str):
                return None
            if key == "model":
                return _string_after_colon(text, i)[0]
            i = _skip(text, i)
            if not text.startswith(":", i):
                return None
            i = _skip(text, i + 1)
            _, i = _DECODER.raw_decode(text, i)
            i = _skip(text, i)
            if not text.startswith(",", i):
                return None
            i += 1
    except ValueError:  # the cut, or not JSON
        return None


def _string_after_colon(text: str, at: int) -> tuple[str | None, int]:
    """``: "value"`` at ``at``: the decoded string and where it ends; (None, at) for anything else."""
    i = _skip(text, at)
    if not text.startswith(":", i):
        return None, at
    i = _skip(text, i + 1)
    if not text.startswith('"', i):
        return None, at
    try:
        value, end = _DECODER.raw_decode(text, i)
    except ValueError:
        return None, at
    return (value, end) if isinstance(value, str) else (None, at)


def _skip(text: str, at: int) -> int:
    """Past the JSON whitespace at ``at`` (compact bodies, the usual kind, have none to skip)."""
    if text[at : at + 1] not in _WS_CHARS:
        return at
    match = _WS.match(text, at)
    return match.end() if match else at


class BodyPeek:
    """What the app has read of its request body, up to :data:`PEEK_BYTES`: references to the app's own
    chunks, never a copy and never a read of ours, given up at the first :meth:`model` call."""

    __slots__ = ("_chunks", "_complete", "_size")

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._size = 0
        self._complete = False

    def see(self, message: Mapping[str, Any]) -> None:
        """A message the app received (call for each)."""
        if self._size <= PEEK_BYTES and message["type"] == "http.request":
            body = message.get("body")
            if body:
                self._chunks.append(body)
                self._size += len(body)
            self._complete = not message.get("more_body", False) and self._size <= PEEK_BYTES

    def document(self) -> Any:
        """The whole body as parsed JSON, or None (cut at the bound, not finished, or not JSON). A full
        parse: called only when a feature needs the body (the output check), before :meth:`model`."""
        if not self._complete or not self._chunks:
            return None
        try:
            return json.loads(self.seen())
        except ValueError:
            return None

    def whole(self) -> bytes | None:
        """The whole body, when the app read all of it and it was within the bound; else None."""
        return self.seen() if self._complete and self._chunks else (b"" if self._complete else None)

    def seen(self) -> bytes:
        """The body seen so far (a prefix, if it was longer than the bound), kept as it is."""
        chunks = self._chunks
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def model(self) -> str | None:
        """:func:`request_model` of the body seen so far; nothing is kept after this."""
        chunks, complete = self._chunks, self._complete
        self._chunks, self._size, self._complete = [], PEEK_BYTES + 1, False
        if not chunks:
            return None
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        return request_model(bytes(body[:PEEK_BYTES]), complete=complete)
