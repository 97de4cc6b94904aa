"""The dialect interface, and the formats that merge nothing.

A dialect reads one stream format the way an httpx decoder reads one content encoding: a small object
per stream, fed whole raw events in order, keeping only what it must between them.

* :meth:`Dialect.delta`: the merge key, envelope and text of an event the coalescer may merge with the
  next ones of the same key, or None: then the event goes out unchanged.
* :meth:`Dialect.build`: a merged frame, from the first event's envelope and the merged text. Merging
  keeps that event's bytes and splices the text in, so ids, model and extra fields reach the client as
  the app wrote them.
* :meth:`Dialect.flush`: bytes the dialect itself still holds (a character the stream never finished).
* :meth:`Dialect.texts`: the text an event carries that is not a delta (an AG-UI opening chunk, an OpenAI
  chunk with a finish reason or two choices): it goes out unmerged, but guards and the output check read
  it as they read a delta's. :meth:`Dialect.part_key` says which part of the answer a key's text adds
  to, as the client accumulates it, so that one part's text reaches a guard as one text whatever events
  carried it.

Plus what telemetry reads (:meth:`~Dialect.content`, :meth:`~Dialect.info`), and what the class itself
says of its format: its name, how a stream of it is recognized (:meth:`~Dialect.detect`, ``hint``), its
end marker (:meth:`~Dialect.is_end`), its error event and its content-filter ending (``ending``). Every
table of formats is derived from the classes (:mod:`.registry`): a format is one class there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from typing import Any, ClassVar

from ..errors import ErrorInfo
from ..lines import CR, LF
from ..wire import (
    BACKSLASH,
    QUOTE,
    TEXT,
    Delta,
    Envelope,
    Known,
    Part,
    escape,
    loads,
    name_and_data,
    object_data,
    unescape,
)
from .endings import Ending, NoEnding, data_error, sse_error
from .recovery.base import Transcript

__all__ = [
    "Delta",
    "Dialect",
    "First",
    "Generic",
    "Opaque",
    "Part",
    "Spliced",
    "Undetected",
    "data_error",
    "sse_error",
]

_UNPARSED: Any = object()


class First:
    """A stream's first event with data, as every format's :meth:`Dialect.detect` reads it: its name,
    its data, and its JSON parsed once (by ``parse``) for all that ask. ``route``: the route's relay
    memory, when a relay may be learned or merged (coalescing on)."""

    __slots__ = ("_obj", "_parse", "data", "name", "raw", "route")

    def __init__(
        self, raw: bytes, name: str | None, data: bytes, parse: Callable[[bytes], Any], route: Any
    ) -> None:
        self.raw, self.name, self.data, self.route = raw, name, data, route
        self._parse = parse
        self._obj: Any = _UNPARSED

    @property
    def parsed(self) -> bool:
        return self._obj is not _UNPARSED

    @property
    def obj(self) -> Any:
        """The data as JSON (None when it is not JSON); a non-object is not parsed at all."""
        if self._obj is _UNPARSED:
            self._obj = self._parse(self.data) if self.data[:1] == b"{" else None
        return self._obj


class Dialect:
    """The base: merges nothing, reports every event as output, fails with generic SSE's error event."""

    name: ClassVar[str] = "sse"
    """What the ``dialect`` setting calls the format (and the span's ``sse_middleware.dialect``)."""
    provider: ClassVar[str] = "sse"
    operation: ClassVar[str] = "stream"
    merges: ClassVar[bool] = False
    """Whether :meth:`delta` may find anything: the pipeline calls it per event only then."""
    detecting: ClassVar[bool] = False
    """Whether the format is still unknown (the pipeline asks :mod:`.detect` at the next event)."""
    ending: ClassVar[type[Ending]] = Ending
    """The content-filter ending a guard's trip sends (see :mod:`.endings`)."""
    end_marker: ClassVar[str | None] = None
    """The format's clean end, as a report names it; None: the format has none, so no stream is known
    to be cut short by its last event. :meth:`is_end` recognizes it."""
    chat_resume: ClassVar[bool] = False
    """Whether a stream of this format is a chat whose client resumes it by the chat's id (the AI SDK's
    ``GET {api}/{chatId}/stream``)."""
    hint: ClassVar[tuple[bytes, bytes] | None] = None
    """A response header (lowercase name, value) that names this format before any event."""
    rank: ClassVar[int] = 0
    """Detection asks lower ranks first: a format that proves itself by its own event types is 0."""
    recovery: ClassVar[type[Transcript] | None] = None
    """The format's mid-stream recovery (:mod:`.recovery`): what the client has, the splice of a re-run,
    the body of a re-run that asks for a continuation. None: its streams are never recovered; a format
    says so itself, with why as this attribute's docstring."""

    @classmethod
    def detect(cls, first: First) -> Dialect | None:
        """A reader of this format for the stream whose first event with data is ``first``, or None when
        the event does not prove the format. Asked in the registry's order; the first answer wins."""
        return None

    @classmethod
    def named(cls, json_text_field: str) -> Dialect:
        """A reader for a stream the ``dialect`` setting names this format."""
        return cls()

    @classmethod
    def is_end(cls, raw: bytes) -> bool:
        """Whether ``raw`` is the format's end marker: the event a complete stream ends with."""
        return False

    @classmethod
    def owed_end(cls, raw: bytes) -> bool:
        """Whether ``raw`` is an event of this format that promises its end marker, for a stream read
        without knowing the format (the check's reader): its own event types, not a guess."""
        return False

    @classmethod
    def reported_error(cls, raw: bytes) -> str | None:
        """The message of this format's own error event in ``raw`` (the app failed and said so)."""
        return None

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

    def part_key(self, key: Hashable) -> Hashable:
        """The part of the answer a delta of merge key ``key`` adds to, as the client accumulates it. A
        merge key may be finer (an OpenAI chunk's role is in it, so that a role change never merges),
        but guards and the output check must read one part's text as one text, however it was cut."""
        return key

    def texts(self, raw: bytes) -> list[tuple[Hashable, str]]:
        """(merge key, text) of each piece of text in ``raw``, an event :meth:`delta` did not read:
        text the client takes from an event that cannot be merged or cut (asked only when parts
        matter: guards, output checks). A repetition of text already streamed (a ``done`` event, a
        snapshot) is not text here."""
        return []

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
        # Its halves, each an attribute of its own: same_text() reads them per token. Empty before any
        # delta: an empty head strips nothing, so no event is taken for one of its shape.
        self._before = self._after = b""

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
            self._before, self._after = before, after  # neither is ever empty (a field name, a quote)
        return found

    def same_text(self, raw: bytes) -> str | None:
        """The text of ``raw`` when it is the last delta's envelope around another non-empty text: what
        a full parse would find then (consecutive deltas usually differ in nothing else). The text must
        be a valid JSON string body on one line; anything else, including no last delta, is None."""
        # removeprefix() and removesuffix() answer "does it start (end) with" and cut in one C call each,
        # where startswith, endswith and a slice are three slower ones: each returns ``raw`` itself (an
        # exact bytes object, as the shell makes every body) when the half is not there.
        tail = raw.removeprefix(self._before)
        if tail is raw:
            return None
        contents = tail.removesuffix(self._after)
        if contents is tail or not contents or LF in contents or CR in contents:
            return None  # another shape, no text (whatever a parse says about an empty one), or not one line
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


def message_of(obj: Any) -> str | None:
    """The message an error body carries: itself (a string), its ``error``'s, or its own ``message``."""
    if not isinstance(obj, dict):
        return None
    response = obj.get("response")  # the Responses API's response.failed
    for holder in (obj.get("error"), response.get("error") if isinstance(response, dict) else None, obj):
        if isinstance(holder, str):
            return holder
        if isinstance(holder, dict) and isinstance(holder.get("message"), str):
            return str(holder["message"])
    return None


def named_error(raw: bytes, kind: str) -> str | None:
    """The message of an error event named ``kind``: its body's, else the start of its data."""
    name, data = name_and_data(raw)
    if name != kind:
        return None
    return message_of(loads(data) if data[:1] == b"{" else None) or data_text(raw) or name


def data_text(raw: bytes) -> str:
    """The start of an event's data, for a report that has nothing better to quote."""
    return name_and_data(raw)[1][:200].decode(errors="replace")


def matched(match: re.Match[bytes], key: Hashable) -> Delta | None:
    """A fast-path regex's delta (its group 3 is the escaped text); None when it holds no text."""
    text = unescape(match.group(3))
    if not text:
        return None
    raw = match.string
    return Delta(key, (raw[: match.start(3)], raw[match.end(3) :]), text)


class Generic(Dialect):
    """Generic SSE: a spec parser must see exactly the app's events, so nothing is merged. Its error
    event (``event: error``) is also Anthropic's and the Responses API's name for theirs."""

    rank = 2
    recovery = None
    """Nothing in a generic stream says what text its client has, nor when its answer is whole."""

    @classmethod
    def detect(cls, first: First) -> Dialect | None:
        return cls()  # the registry's last word: any stream no other format claims

    @classmethod
    def reported_error(cls, raw: bytes) -> str | None:
        return named_error(raw, "error")


class Undetected(Generic):
    """An SSE stream whose first event with data has not come yet (comments and ``retry`` decide nothing).
    It may still turn out to merge, so the pipeline keeps its coalescer until the format is known."""

    name = "auto"
    merges = True
    detecting = True


class Opaque(Generic):
    """NDJSON, or a stream the app compressed: bytes pass as they come; no in-band error channel."""

    name = "bytes"
    ending = NoEnding

    def error_event(self, info: ErrorInfo) -> bytes | None:
        return None
