"""What every format's recovery shares: reading an event, why a run failed, the text matcher, usage over
attempts.

Recovery reads whole raw events (the framer's output) with a full JSON parse: it runs only on routes that
asked for it, and only the events it changes are written again (compact JSON, so the coalescer's fast
readers still know them).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final, Literal, NamedTuple

from ...sse import Event, encode
from ...tokens import estimate_tokens
from ...wire import dumps, loads, name_and_data

Reason = Literal["exception", "upstream_error", "stall", "truncated", "diverged", "takeover"]
"""Why the previous run failed. ``diverged``: a re-run whose text repeated part of what the client has
and then departed from it (neither a restart nor a continuation), so it could not be spliced.
``takeover``: the host that produced the stream died, and this host took the stream over (a resumable
stream in a shared store: the text is what its log holds)."""

DONE: Final = b"data: [DONE]\n\n"
TEXT_KINDS: Final = ("text", "reasoning")


class Read(NamedTuple):
    """One raw event as recovery reads it."""

    raw: bytes
    name: str | None
    data: bytes
    obj: dict[str, Any] | None
    """The data's JSON object, or None (not JSON, not an object, or ``[DONE]``)."""


def read(raw: bytes) -> Read:
    name, data = name_and_data(raw)
    value = loads(data) if data[:1] == b"{" else None
    return Read(raw, name, data, value if isinstance(value, dict) else None)


def write(obj: dict[str, Any], name: str | None = None) -> bytes:
    """An event holding ``obj`` (compact, as the coalescer's fast readers expect)."""
    return encode(Event(dumps(obj), name))


class Failure(NamedTuple):
    """Why a run's stream cannot go on, and the ending the client gets if recovery gives up."""

    reason: Reason
    ending: bytes | None = None
    """The upstream's own error event, held back while recovery tries; None: the shell's ending."""
    detail: str = ""


def split(body: bytes) -> list[bytes]:
    """Whole raw events (what the framer returns) one by one; comments stay with the event after them."""
    if body.find(b"\r") >= 0:
        return _split_any(body)
    events = body.split(b"\n\n")
    tail = events.pop()
    out = [event + b"\n\n" for event in events]
    if tail:
        out.append(tail)  # not expected from the framer; kept, never dropped
    return out


def _split_any(body: bytes) -> list[bytes]:
    import re  # CR-framed streams are rare: their pattern is built only for them

    out: list[bytes] = []
    start = 0
    for match in re.finditer(rb"(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r(?!\n)|\n)", body):
        out.append(body[start : match.end()])
        start = match.end()
    if start < len(body):
        out.append(body[start:])
    return out


class Matcher:
    """A re-run's text of one kind, held against what the client already has of it.

    ``strip``: the re-run may start over (the body was replayed unchanged). Then its text is compared as it
    arrives: a re-run that repeats the client's text whole is a restart, and exactly that prefix is
    dropped; one that differs at its very first character is a continuation, passed whole; one that
    repeats part of it and then departs is *diverged* (:meth:`feed` returns None): a continuation that
    happens to begin like the answer cannot be told from a restart that sampled differently, and either
    guess would show the client text twice or out of place. Without ``strip`` (the middleware asked for a
    continuation) everything passes.
    """

    __slots__ = ("_had", "_lenient", "_pos", "matching")

    def __init__(self, had: str, strip: bool, *, lenient: bool = False) -> None:
        self._had = had
        self._pos = 0
        self._lenient = lenient
        """Drop only what the re-run repeats, and pass the rest where it departs: for the whitespace a
        prefill had to leave out (Anthropic rejects a final assistant turn that ends with it)."""
        self.matching = strip and bool(had)
        """Still comparing: what came so far is a prefix of the client's text."""

    def feed(self, text: str) -> str | None:
        """The part of ``text`` to pass on ("" while it repeats what the client has); None: diverged."""
        if not self.matching or not text:
            return text
        want = self._had[self._pos :]
        size = min(len(text), len(want))
        if text[:size] == want[:size]:
            self._pos += size
            if self._pos < len(self._had):
                return ""
            self.matching = False  # a restart, caught up: what follows is new to the client
            return text[size:]
        if self._pos == 0 and text[0] != self._had[0]:
            tail = self._had[len(self._had.rstrip()) :]
            if tail and not self._lenient and text[0].isspace():
                # A continuation of a prefill that had to leave the client's trailing whitespace out
                # (Anthropic rejects it): it begins by writing that whitespace again, once is enough.
                self._had, self._lenient = tail, True
                return self.feed(text)
            self.matching = False  # a continuation: none of it is a repeat
            return text
        if self._lenient:
            self.matching = False
            same = next(i for i, (a, b) in enumerate(zip(text, want, strict=False)) if a != b)
            return text[same:]
        return None

    def finish(self) -> str | None:
        """The re-run's text ended: what is held for the client (None: a failed attempt). A Matcher
        holds nothing; an :class:`~...recovery.anchor.Seam` may."""
        return ""

    @property
    def short(self) -> bool:
        """Whether the re-run stopped inside the client's text: it repeated part and ended."""
        return self.matching and self._pos > 0 and not self._lenient


@dataclasses.dataclass(slots=True)
class Usage:
    """One attempt's token counts as its stream reported them (None: not reported), and how many
    characters of output it produced, for an estimate when its counts never arrived."""

    input: int | None = None
    output: int | None = None
    chars: int = 0

    def output_or_estimate(self) -> int:
        """The reported output tokens, else about four characters a token (what tokenizers average in
        English): a failed attempt was still billed for what it produced."""
        return self.output if self.output is not None else estimate_tokens(self.chars)
