"""The opt-in ``text`` dialect (SSE whose data is plain text tokens) and text/plain byte streams."""

from __future__ import annotations

import codecs
import re
from collections.abc import Hashable

from ..errors import ErrorInfo
from ..wire import Delta, Envelope, read_event, simple
from .base import Dialect
from .endings import NoEnding


class Text(Dialect):
    """Opt-in: generic SSE whose data is plain text tokens. Merges data of consecutive same-name events.

    A UTF-8 character that a byte-level tokenizer split across two events is rejoined before merging.
    """

    name = "text"
    merges = True
    recovery = None
    """Plain text tokens carry no error event and no end marker: no failure shows in the stream, and no
    answer is known to be whole."""

    def __init__(self) -> None:
        super().__init__()
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def delta(self, raw: bytes) -> Delta | None:
        event = simple(raw)
        if event is None:
            return None
        name, data = event
        text = self._decoder.decode(data)
        head = b"event: " + name + b"\n" if name is not None else b""
        return Delta(name, (head, b"\n\n"), text)

    def texts(self, raw: bytes) -> list[tuple[Hashable, str]]:
        # An event delta() cannot read (an id line, several data lines): its data, under its name.
        event = read_event(raw)
        if event is None or not event.data:
            return []
        return [(event.event.encode() if event.event is not None else None, event.data)]

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
    ending = NoEnding
    envelope: Envelope = (b"", b"")  # the only one: a merged frame is the text's own bytes

    def __init__(self) -> None:
        super().__init__()
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._held = False  # the decoder holds the first bytes of a character

    def delta(self, raw: bytes) -> Delta | None:
        """Raises ``UnicodeDecodeError`` for bytes that are not UTF-8."""
        return Delta(None, self.envelope, self.text(raw))

    def text(self, raw: bytes) -> str:
        """The text of ``raw`` and of what came before it unfinished. Raises ``UnicodeDecodeError`` for
        bytes that are not UTF-8. Whole characters (the usual chunk) skip the incremental decoder."""
        if not self._held:
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                pass  # a character cut at the end (the decoder holds it) or not UTF-8 (it raises too)
        text: str = self._decoder.decode(raw)
        self._held = bool(self._decoder.getstate()[0])
        return text

    def build(self, envelope: Envelope, text: str) -> bytes:
        return text.encode("utf-8")

    def flush(self) -> bytes:
        """Bytes of a character not finished yet (or never), exactly as received."""
        pending: bytes = self._decoder.getstate()[0]
        self._decoder.reset()
        self._held = False
        return pending

    def error_event(self, info: ErrorInfo) -> bytes | None:
        return None
