"""What the middleware knows of a stream format: text deltas to merge, telemetry hints, error events.

A *delta* is a whole raw event the coalescer may merge with the next ones of the same key; merging keeps
the first event's bytes and splices the concatenated text into its text field, so the rest of the
envelope (ids, model, extra fields) reaches the client as the app wrote it. Anything that is not a
delta is forwarded untouched. Generic SSE never yields deltas: a spec parser must see the app's events.
The LLM providers' dialects are in :mod:`.providers`.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Hashable
from typing import Any

from .errors import ErrorInfo
from .sse import Event, encode
from .wire import Envelope, dumps, escape, simple, with_retry

Delta = tuple[Hashable, Envelope, str]


class Dialect:
    """Generic SSE: events pass whole and unchanged; an error is ``event: error``."""

    name = "sse"
    provider = "sse"
    operation = "stream"
    merges = False

    def delta(self, raw: bytes) -> Delta | None:
        return None

    def build(self, envelope: Envelope, text: str) -> bytes:
        return envelope[0] + escape(text) + envelope[1]

    def content(self, raw: bytes) -> bool:
        """Whether this event carries output (for TTFT / inter-chunk timing)."""
        return True

    def info(self, raw: bytes) -> dict[str, Any] | None:
        """Model, response id, finish reason, usage, when this event carries them."""
        return None

    def wants_info(self, raw: bytes) -> bool:
        """A cheap byte check: whether :meth:`info` is worth parsing this event for."""
        return False

    def error_event(self, info: ErrorInfo) -> bytes:
        body = {"error": {"type": info.type, "message": info.message, "id": info.id}}
        if info.code is not None:
            body["error"]["code"] = info.code
        return with_retry(info, encode(Event(dumps(body), "error")))


class Text(Dialect):
    """Opt-in: generic SSE whose data is plain text tokens. Merges data of consecutive same-name events.

    A UTF-8 character that a byte-level tokenizer split across two events is rejoined before merging.
    """

    name = "text"
    provider = "sse"
    merges = True

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def delta(self, raw: bytes) -> Delta | None:
        event = simple(raw)
        if event is None:
            return None
        name, data = event
        text = self._decoder.decode(data)
        head = b"event: " + name + b"\n" if name is not None else b""
        return name, (head, b"\n\n"), text

    def build(self, envelope: Envelope, text: str) -> bytes:
        lines = re.split("\r\n|\r|\n", text)
        return envelope[0] + b"".join(b"data: " + line.encode() + b"\n" for line in lines) + b"\n"


class PlainText(Dialect):
    """A text/plain byte stream, merged as text. Its bytes are never altered: the decoder is strict, and a
    stream that is not UTF-8 after all is forwarded as it comes from then on (see ``Pipeline.feed``).
    No in-band error channel: on failure the response is cut instead."""

    name = "plain"
    provider = "text"
    merges = True

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()

    def delta(self, raw: bytes) -> Delta | None:
        """Raises ``UnicodeDecodeError`` for bytes that are not UTF-8."""
        return None, (b"", b""), self._decoder.decode(raw)

    def build(self, envelope: Envelope, text: str) -> bytes:
        return text.encode("utf-8")

    def tail(self) -> bytes:
        """Bytes of a character not finished yet (or never), exactly as received."""
        pending: bytes = self._decoder.getstate()[0]
        self._decoder.reset()
        return pending
