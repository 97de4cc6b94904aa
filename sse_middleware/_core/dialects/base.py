"""The dialect interface, and the formats that merge nothing or only plain text.

A dialect reads one stream format the way an httpx decoder reads one content encoding: a small object
per stream, fed whole raw events in order, keeping only what it must between them.

* :meth:`Dialect.delta`: the merge key, envelope and text of an event the coalescer may merge with the
  next ones of the same key, or None: then the event goes out unchanged.
* :meth:`Dialect.build`: a merged frame, from the first event's envelope and the merged text. Merging
  keeps that event's bytes and splices the text in, so ids, model and extra fields reach the client as
  the app wrote them.
* :meth:`Dialect.flush`: bytes the dialect itself still holds (a character the stream never finished).

Plus what telemetry reads (:meth:`~Dialect.content`, :meth:`~Dialect.info`) and the stream's own error
event. Adding a format is one subclass, and a name in :mod:`.detect`.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Hashable
from typing import Any, ClassVar

from ..errors import ErrorInfo
from ..lines import CR, LF
from ..sse import Event, encode
from ..wire import (
    BACKSLASH,
    QUOTE,
    TEXT,
    Delta,
    Envelope,
    Known,
    Part,
    dumps,
    escape,
    loads,
    name_and_data,
    object_data,
    simple,
    unescape,
    with_retry,
)

__all__ = [
    "Delta",
    "Dialect",
    "Generic",
    "Opaque",
    "Part",
    "PlainText",
    "Spliced",
    "Text",
    "Undetected",
    "sse_error",
]


def sse_error(info: ErrorInfo) -> bytes:
    """Generic SSE's error event: ``event: error`` and ``{"error": {"type", "message", "id"}}``."""
    body: dict[str, Any] = {"type": info.type, "message": info.message, "id": info.id}
    if info.code is not None:
        body["code"] = info.code
    return with_retry(info, encode(Event(dumps({"error": body}), "error")))


def data_error(info: ErrorInfo, body: dict[str, Any], name: str | None = None) -> bytes:
    """An error event carrying ``body`` (which holds the message and its error id), under ``name``."""
    return with_retry(info, encode(Event(dumps(body), name)))


class Dialect:
    """The base: merges nothing, reports every event as output, fails with generic SSE's error event."""

    name: ClassVar[str] = "sse"
    provider: ClassVar[str] = "sse"
    operation: ClassVar[str] = "stream"
    merges: ClassVar[bool] = False
    """Whether :meth:`delta` may find anything: the pipeline calls it per event only then."""
    detecting: ClassVar[bool] = False
    """Whether the format is still unknown (the pipeline asks :mod:`.detect` at the next event)."""

    def __init__(self) -> None:
        # The last event whose data was parsed, and what the parse gave: read, info and see ask about the
        # same event in turn, and the parse is most of what each costs. Kept by identity (the reference
        # keeps that bytes object alive, so no other event can be mistaken for it). What the parse gave is
        # shared by every reader of the event: none may change it. Set here, not as class defaults: an
        # instance's own attributes are the fast ones to read.
        self._parsed_raw: bytes | None = None
        self._parsed: Any = None

    def delta(self, raw: bytes) -> Delta | None:
        return None

    def build(self, envelope: Envelope, text: str) -> bytes:
        """JSON formats: the text, escaped, spliced between the envelope's halves."""
        return envelope[0] + escape(text) + envelope[1]

    def flush(self) -> bytes:
        return b""

    def part(self, key: Hashable) -> Part:
        """Which part of the answer the deltas of ``key`` are (text unless the format says otherwise)."""
        return TEXT

    def see(self, raw: bytes) -> None:
        """An event that is not a delta, shown when parts matter (guards, output checks): a format whose
        tool calls are named in an event of their own learns the names here."""

    def content(self, raw: bytes) -> bool:
        """Whether this event carries output (for TTFT / inter-chunk timing)."""
        return True

    def info(self, raw: bytes) -> dict[str, Any] | None:
        """Model, response id, finish reason, usage, when this event carries them."""
        return None

    def wants_info(self, raw: bytes) -> bool:
        """A cheap byte check: whether :meth:`info` is worth parsing this event for."""
        return False

    def error_event(self, info: ErrorInfo) -> bytes | None:
        """The stream's own error event; None when the format has no in-band channel."""
        return sse_error(info)

    def parse(self, raw: bytes, data: bytes) -> Any:
        """``loads(data)``, ``data`` being the event ``raw``'s data: parsed once for all that ask."""
        if raw is self._parsed_raw:
            return self._parsed
        value = loads(data)
        self._parsed_raw, self._parsed = raw, value
        return value

    def forget(self) -> None:
        """Drop the last parse (the pipeline is done with the events it was for)."""
        self._parsed_raw = self._parsed = None

    def keep(self, raw: bytes, value: Any) -> None:
        """What a parse of ``raw``'s data gave elsewhere (detection), so that it is not parsed again."""
        self._parsed_raw, self._parsed = raw, value

    def data_object(self, raw: bytes, name: bytes | None = None) -> dict[str, Any] | None:
        """:func:`~..wire.data_object`, parsed once for all that ask."""
        data = object_data(raw, name)
        value = self.parse(raw, data) if data is not None else None
        return value if isinstance(value, dict) else None

    def event_json(self, raw: bytes, *, objects_only: bool = True) -> Any:
        """The JSON in ``raw``'s data, however it is framed (what :meth:`info` reads), parsed once for
        all that ask; None when it is not JSON (or, ``objects_only``, does not start as an object)."""
        data = name_and_data(raw)[1]
        if objects_only and data[:1] != b"{":
            return None
        return self.parse(raw, data)


class Spliced(Dialect):
    """A JSON format: :meth:`read` finds a delta with a full parse; the next events of the same shape,
    which differ only in their text, are answered from the last delta's envelope without one."""

    merges = True

    def __init__(self) -> None:
        super().__init__()
        self._last: Known | None = None  # the last delta's envelope and key
        self.envelope: Envelope = (b"", b"")  # the same envelope, one object for every delta it answers
        self._text_at = slice(0, 0)  # where the text lies in an event of that envelope (none before one)

    def delta(self, raw: bytes) -> Delta | None:
        last = self._last
        if last is not None:
            text = self.same_text(raw)
            if text is not None:
                return Delta(last.key, self.envelope, text)
        return self.learn(raw)

    def learn(self, raw: bytes) -> Delta | None:
        """:meth:`read`; a delta found becomes the envelope that :meth:`same_text` answers from."""
        found = self.read(raw)
        if found is not None:
            before, after = self.envelope = found.envelope
            self._last = Known(before, after, found.key)
            self._text_at = slice(len(before), -len(after))  # an envelope's end is never empty
        return found

    def same_text(self, raw: bytes) -> str | None:
        """The text of ``raw`` when it is the last delta's envelope around another non-empty text: what
        a full parse would find then (consecutive deltas usually differ in nothing else). The text must
        be a valid JSON string body on one line; anything else, including no last delta, is None."""
        before, after = self.envelope
        if not (raw.endswith(after) and raw.startswith(before)):
            return None
        contents = raw[self._text_at]
        if not contents or LF in contents or CR in contents:
            return None  # no text (whatever a parse says about an empty one), or not one line
        if BACKSLASH in contents:
            return unescape(contents)  # None unless valid: an unescaped quote or a bad escape
        if QUOTE in contents:
            return None
        try:
            return contents.decode()
        except UnicodeDecodeError:
            return None

    def read(self, raw: bytes) -> Delta | None:
        """The delta in ``raw`` by a full read, or None."""
        return None


def matched(match: re.Match[bytes], key: Hashable) -> Delta | None:
    """A fast-path regex's delta (its group 3 is the escaped text); None when it holds no text."""
    text = unescape(match.group(3))
    if not text:
        return None
    raw = match.string
    return Delta(key, (raw[: match.start(3)], raw[match.end(3) :]), text)


class Generic(Dialect):
    """Generic SSE: a spec parser must see exactly the app's events, so nothing is merged."""


class Undetected(Generic):
    """An SSE stream whose first event with data has not come yet (comments and ``retry`` decide nothing).
    It may still turn out to merge, so the pipeline keeps its coalescer until the format is known."""

    name = "auto"
    merges = True
    detecting = True


class Opaque(Generic):
    """NDJSON, or a stream the app compressed: bytes pass as they come; no in-band error channel."""

    name = "bytes"

    def error_event(self, info: ErrorInfo) -> bytes | None:
        return None


class Text(Dialect):
    """Opt-in: generic SSE whose data is plain text tokens. Merges data of consecutive same-name events.

    A UTF-8 character that a byte-level tokenizer split across two events is rejoined before merging.
    """

    name = "text"
    merges = True

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
