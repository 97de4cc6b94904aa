"""The two halves of one format's recovery: what the client has (:class:`Transcript`), and how a re-run
is made to continue it (:class:`Splicer`); and the shape of the format's request, for a re-run that asks
for a continuation.

A :class:`Transcript` reads every event on its way to the client (the first run's, then the spliced
re-runs'), so at any failure it knows the text of each part the client has, whether a tool call began
reaching it (then nothing is continued: providers do not continue arguments), the ids the client knows
the answer by, and which part is still open. A :class:`Splicer` is made for one re-run from that state.
A format's dialect class names its transcript class (``Dialect.recovery``), which is made for each stream
with that dialect class (:class:`Format`: its name and its end marker).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Protocol

from .common import TEXT_KINDS, Failure, Matcher, Read, Usage
from .request import Prefilled

Mode = Literal["retry", "continue"]

# Error types that say the request itself is at fault (or a filter did its job): a re-run would fail
# the same way, so they end the stream as they do without recovery.
REQUEST_FAULTS = frozenset(
    (
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "content_filter",
        "invalid_output",
        "blocked",
    )
)


class Format(Protocol):
    """What a transcript asks of its format's dialect class (a class, not a reader)."""

    @property
    def name(self) -> str: ...

    @property
    def end_marker(self) -> str | None: ...

    def is_end(self, raw: bytes) -> bool: ...


class Transcript:
    """What the client has of one stream; one subclass per format, named by its dialect class, which it is
    made with (``dialect``: the format's name, and its end marker: a body ending without one is
    truncated)."""

    end_event: ClassVar[bytes] = b""
    """The end marker as an event, for a re-run whose answer went out whole without it; b"" where the
    format's finish is its end marker."""
    turns: ClassVar[str | None] = None
    """The request body's field that holds the conversation (``messages``; the Responses API's ``input``):
    where an anchored re-run adds the client's text as an assistant turn and its one user turn. None: the
    format's requests are never rewritten for an anchored re-run."""
    text_part: ClassVar[str] = "text"
    """The type of a text part in an assistant turn's list of parts (the Responses API's ``output_text``)."""

    @classmethod
    def prefilled(cls, request: dict[str, Any], text: str) -> Prefilled | None:
        """The request, ``request`` (a JSON object), rewritten to have its upstream continue ``text`` (not
        empty) as its own assistant prefill; None: the format's requests take no prefill, or this one
        cannot."""
        return None

    def __init__(self, dialect: Format) -> None:
        self.dialect = dialect
        self._had: dict[str, list[str]] = {kind: [] for kind in TEXT_KINDS}
        self.tool = False  # a tool call (its head or arguments) reached the client
        self.content = False  # something beyond the preamble reached the client
        self.finished = False  # a finish reason reached the client: the answer is whole
        self.ended = False  # the end marker reached the client
        self.usage = Usage()  # the first attempt's (re-runs keep theirs on their splicer)
        self.failed: list[Usage] = []  # each failed attempt's, in order

    def error(self, event: Read) -> Failure | None:
        """The failure an upstream error event reports, when it is one recovery may act on."""
        return None

    @property
    def name(self) -> str:
        return self.dialect.name

    def seen(self, event: Read) -> None:
        """An event on its way to the client."""
        if self.dialect.is_end(event.raw):
            self.ended = True
        self.see(event)

    def see(self, event: Read) -> None:
        """What the format reads of an event on its way to the client."""

    def ends(self) -> None:
        """An error event that is no trigger went out: the stream ended as it does without recovery."""
        self.finished = self.ended = True

    def end(self) -> Failure | None:
        """The body ended: truncated unless the end marker went out, or the finish reason did (the answer
        is whole, and a stream without its marker ends as it does without recovery)."""
        if self.ended or self.finished:
            return None
        return Failure("truncated", None, f"no {self.dialect.end_marker}")

    def add(self, kind: str, text: str) -> None:
        if text:
            self._had[kind].append(text)
            self.usage.chars += len(text)
            self.content = True

    def text(self, kind: str) -> str:
        return "".join(self._had[kind])

    def blocked(self, mode: Mode) -> str | None:
        """Why the stream cannot be recovered in ``mode`` now; None when it can."""
        if self.finished:
            return "the answer was whole (its finish reason went out)"
        if self.ended:  # a relay's [DONE] without a finish reason: nothing can follow it
            return "the stream had ended (its end marker went out)"
        if self.tool:
            return "a tool call had begun reaching the client, and providers do not continue arguments"
        if mode == "retry" and self.content:
            return "text had reached the client (recover='continue' continues it)"
        return None

    def splicer(self, strip: bool, attempt: int) -> Splicer:
        raise NotImplementedError


class Splicer:
    """One re-run's events made into the continuation of what the client has."""

    def __init__(self, had: Transcript, strip: bool) -> None:
        self.matchers = {kind: Matcher(had.text(kind), strip) for kind in TEXT_KINDS}
        self.usage = Usage()  # this attempt's own counts
        self._earlier = list(had.failed)

    def feed(self, event: Read) -> list[bytes] | Failure:
        """What of ``event`` goes on to the client (often nothing, or the event rewritten)."""
        raise NotImplementedError

    def text(self, kind: str, text: str) -> str | None:
        """The part of a delta's text that is new to the client; None: the re-run diverged."""
        self.usage.chars += len(text)
        return self.matchers[kind].feed(text)

    def short(self) -> Failure | None:
        """A re-run that finished while still repeating what the client has: it has less than the
        client, so nothing of it can continue the answer."""
        if any(matcher.short for matcher in self.matchers.values()):
            return Failure("diverged", None, "the re-run ended inside the text the client has")
        return None

    def earlier(self, final_input: int | None) -> tuple[int, int]:
        """(input, output) tokens of the failed attempts, to add to this one's usage."""
        inputs = sum(u.input if u.input is not None else (final_input or 0) for u in self._earlier)
        return inputs, sum(u.output_or_estimate() for u in self._earlier)

    def summed(self, usage: dict[str, Any], input_key: str, output_key: str) -> dict[str, Any]:
        """A usage object (its input and output counts under these keys, and ``total_tokens``) with the
        failed attempts' tokens added: what the client is billed for. Unchanged when either count is
        missing."""
        own_in, own_out = usage.get(input_key), usage.get(output_key)
        self.usage.input, self.usage.output = own_in, own_out
        if not isinstance(own_in, int) or not isinstance(own_out, int):
            return usage
        inputs, outputs = self.earlier(own_in)
        total = {**usage, input_key: own_in + inputs, output_key: own_out + outputs}
        total["total_tokens"] = total[input_key] + total[output_key]
        return total
