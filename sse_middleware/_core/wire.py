"""Byte-level helpers for reading and writing events without a full parse on the per-token path."""

from __future__ import annotations

import json
import re
from collections.abc import Hashable
from typing import Any, Final, NamedTuple

from .errors import ErrorInfo
from .lines import CR
from .sse import Event, Parser

Envelope = tuple[bytes, bytes]
"""Bytes before and after the escaped text of a delta event: a merged frame is ``before + text + after``."""

QUOTE: Final = 34
BACKSLASH: Final = 92
DONE: Final = b"[DONE]"


class Delta(NamedTuple):
    """What a dialect finds in a mergeable event."""

    key: Hashable
    envelope: Envelope
    text: str


class Part(NamedTuple):
    """Which part of an answer a delta's text belongs to: what guards and output checks are told."""

    kind: str
    """``text``, ``reasoning``, ``tool_arguments``, or ``data`` (an event whose text is not read)."""
    name: str | None = None
    """The tool's name, for a tool call's arguments (None until the stream said it)."""


TEXT: Final = Part("text")
REASONING: Final = Part("reasoning")
DATA: Final = Part("data")


class Known(NamedTuple):
    """A dialect's last delta envelope and key, to read the next event of the same shape without a parse."""

    before: bytes
    after: bytes
    key: Hashable


def loads(data: bytes | str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def unescape(contents: bytes) -> str | None:
    """A JSON string's contents (between the quotes) as text; None if they are not valid.

    Decoded the way ``json.loads`` decodes a whole UTF-8 document, so that the text is what a full parse
    of the event would find (``json.loads`` of bytes would guess UTF-16 from a NUL after the quote).
    """
    try:
        if BACKSLASH not in contents:
            return contents.decode("utf-8")
        text = loads('"' + contents.decode("utf-8", "surrogatepass") + '"')
    except UnicodeDecodeError:
        return None
    return text if isinstance(text, str) else None


def is_done(raw: bytes) -> bool:
    """Whether ``raw`` is the ``data: [DONE]`` event that ends an OpenAI-style stream."""
    event = simple(raw)
    return event is not None and event[0] is None and event[1] == DONE


def escape(text: str) -> bytes:
    """JSON string contents, compact; U+2028/9 escaped because JavaScript parsers of old choke on them.

    A lone surrogate (valid JSON: ``"\\ud800"``) goes out as that same escape, never as an error.
    Text with nothing to escape (most merged text) is its UTF-8, without the encoder's round trip.
    """
    if _ESCAPED.search(text) is None:
        return text.encode()
    out = json.dumps(text, ensure_ascii=False)[1:-1]
    if "\u2028" in out or "\u2029" in out:
        out = out.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return out.encode("utf-8", "backslashreplace")


# What escape() changes: json.dumps(ensure_ascii=False) escapes the quote, the backslash and C0 controls;
# U+2028/9 are escaped on top; a lone surrogate cannot be UTF-8 and becomes its escape.
_ESCAPED: Final = re.compile('["\\\\\x00-\x1f\u2028\u2029\ud800-\udfff]')


def token_counts(usage: Any, input_key: str, output_key: str) -> dict[str, Any]:
    """``input_tokens`` / ``output_tokens`` from a provider's usage object, under its own key names."""
    if not isinstance(usage, dict):
        return {}
    return {"input_tokens": usage.get(input_key), "output_tokens": usage.get(output_key)}


def simple(raw: bytes) -> tuple[bytes | None, bytes] | None:
    """(event name, data) of an LF-framed event made of at most one ``event`` and one ``data`` line."""
    if CR in raw:
        return None
    lines = raw.rstrip(b"\n").split(b"\n")
    name: bytes | None = None
    if len(lines) == 2 and lines[0].startswith(b"event:"):
        name = lines[0][6:].lstrip(b" ")
        lines = lines[1:]
    if len(lines) != 1 or not lines[0].startswith(b"data:"):
        return None
    data = lines[0][5:]
    return name, data[1:] if data[:1] == b" " else data


def data_object(raw: bytes, name: bytes | None = None) -> dict[str, Any] | None:
    """The JSON object in an event made of one ``data`` line (after an ``event: name`` line if named)."""
    data = object_data(raw, name)
    obj = loads(data) if data is not None else None
    return obj if isinstance(obj, dict) else None


def object_data(raw: bytes, name: bytes | None = None) -> bytes | None:
    """The data :func:`data_object` parses: that of an event made of one ``data`` line (after an
    ``event: name`` line if named) that starts as a JSON object; None for any other event."""
    event = simple(raw)
    if event is None or event[0] != name or event[1][:1] != b"{":
        return None
    return event[1]


def read_event(raw: bytes) -> Event | None:
    """The (last) event in ``raw`` by the full parser, for the rare event ``simple`` cannot read."""
    parser = Parser()
    events = [e for e in parser.feed(raw) if isinstance(e, Event)]
    return events[-1] if events else None


def name_and_data(raw: bytes) -> tuple[str | None, bytes]:
    found = simple(raw)
    if found is not None:
        name, data = found
        return (name.decode("utf-8", "replace") if name is not None else None), data
    event = read_event(raw)
    if event is None:
        return None, b""
    return event.event, event.data.encode("utf-8")


def string_field(field: bytes) -> re.Pattern[bytes]:
    return re.compile(rb'"' + re.escape(field) + rb'":\s*"((?:[^"\\]|\\.)*)"')


def dumps(obj: Any) -> str:
    return (
        json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def with_retry(info: ErrorInfo, frame: bytes) -> bytes:
    return frame if info.retry_ms is None else b"retry: %d\n" % info.retry_ms + frame


def with_id(info: ErrorInfo) -> str:
    return f"{info.message} (error id: {info.id})"


def splice(pattern: re.Pattern[bytes], raw: bytes) -> Envelope | None:
    """The bytes around the one string ``pattern`` finds in ``raw``; None unless it occurs exactly once."""
    matches = list(pattern.finditer(raw))
    if len(matches) != 1:
        return None
    match = matches[0]
    return raw[: match.start(1)], raw[match.end(1) :]
