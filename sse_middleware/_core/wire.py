"""Byte-level helpers for reading and writing events without a full parse on the per-token path."""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import ErrorInfo
from .sse import Event, Parser

Envelope = tuple[bytes, bytes]
"""Bytes before and after the escaped text of a delta event: a merged frame is ``before + text + after``."""


def loads(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def unescape(contents: bytes) -> str | None:
    """A JSON string's contents (between the quotes) as text; None if they are not valid."""
    try:
        return loads(b'"' + contents + b'"') if 92 in contents else contents.decode("utf-8")
    except UnicodeDecodeError:
        return None


def escape(text: str) -> bytes:
    """JSON string contents, compact; U+2028/9 escaped because JavaScript parsers of old choke on them.

    A lone surrogate (valid JSON: ``"\\ud800"``) goes out as that same escape, never as an error.
    """
    out = json.dumps(text, ensure_ascii=False)[1:-1]
    if "\u2028" in out or "\u2029" in out:
        out = out.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return out.encode("utf-8", "backslashreplace")


def simple(raw: bytes) -> tuple[bytes | None, bytes] | None:
    """(event name, data) of an LF-framed event made of at most one ``event`` and one ``data`` line."""
    if 13 in raw:
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
    return re.compile(rb'"' + field + rb'":\s*"((?:[^"\\]|\\.)*)"')


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
