"""One client stream's recovery, as a sans-I/O object: the app's bytes in, the client's events out, and
at a failure the decision to re-run (after how long, with what :class:`~.value.Recovery`) or to give up.

The shell feeds every body of every run through :meth:`Recoverer.feed` before its pipeline. On the first
run the events pass unchanged (they are only read); an upstream error event is held back and reported
as the failure. On a re-run each event goes through the splicer first. Whatever happens, the ending the
client gets on giving up is the *first* failure's: a re-run's own failure (a 400 from a fallback that
rejects prefill, say) never hides what went wrong.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ..dialects import BY_NAME, detect
from ..dialects.recovery.base import Mode, Splicer, Transcript
from ..dialects.recovery.common import Failure, Usage, read, split
from ..sse import Framer
from .anchor import PROMPT
from .prefill import Asking
from .raised import RETRY_AFTER_MAX
from .value import Recovery


def transcript_for(dialect: str) -> Transcript | None:
    """A new transcript for a stream of the format named ``dialect``, made by the recovery its dialect
    class names; None for a format without one (its streams are never recovered) or no format at all."""
    found = BY_NAME.get(dialect)
    if found is None or found.recovery is None:
        return None
    return found.recovery(found)


@dataclasses.dataclass(frozen=True, slots=True)
class Retry:
    """Run the app again after ``delay`` seconds, with ``recovery`` in its scope and ``body`` as its
    request body (the same bytes, or the prefill)."""

    delay: float
    recovery: Recovery
    body: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class Whole:
    """A re-run sent the answer's finish reason, then its run stopped short of the format's end marker
    (its body ended, it raised, it stalled): the answer is whole, so the stream ends cleanly with
    ``marker``, that end marker, as its last event."""

    marker: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class GiveUp:
    """End the stream with ``failure``'s ending (the first failure's), for the reason ``why``."""

    failure: Failure
    why: str


class Recoverer:
    """``mode``: ``retry`` or ``continue``; ``body``: ``same`` (the body is replayed unchanged, so a re-run
    may start over: see :class:`~..dialects.recovery.common.Matcher`), ``prefill``, ``anchor`` or
    ``auto`` (how the re-run asks for the continuation, with ``prompt`` and ``models``: see
    :mod:`.prefill`); ``dialect``: the format when the settings name it, else ``auto`` (read from the
    first event with data); ``max_event``: an event larger than this is not held whole, and the stream
    is no longer recoverable."""

    def __init__(
        self,
        mode: Mode,
        attempts: int,
        backoff: float,
        *,
        body: str = "same",
        dialect: str = "auto",
        max_event: int = 1 << 20,
        prompt: str = PROMPT,
        models: Mapping[str, str] | None = None,
    ) -> None:
        self._mode, self._attempts, self._backoff = mode, attempts, backoff
        self._asking = Asking(body, prompt, models) if body != "same" else None
        self._body = b""  # the request's body, for a re-run after a refused one
        self._max_event = max_event
        self._detecting = dialect == "auto"
        self.transcript: Transcript | None = transcript_for(dialect)
        self.splicer: Splicer | None = None
        self.attempt = 0
        self.first: Failure | None = None
        self._framer = Framer()
        self._checking = False  # a re-run's format is still to be compared with the stream's
        self._alien: str | None = None  # the format a re-run streamed instead of the stream's
        self._why_not: str | None = None if self.transcript or self._detecting else f"format {dialect}"

    def feed(self, body: bytes) -> tuple[list[bytes], Failure | None]:
        """Bytes of the app's body -> (whole events for the pipeline, the failure that ends this run).
        After a failure, the rest of the run's body is nobody's: the shell stops feeding it."""
        whole = self._framer.feed(body)
        if self._framer.pending > self._max_event:  # too large to hold: from now on it only streams
            whole += self._framer.take()
            self._why_not = "an event larger than max_event_bytes"
        if not whole:
            return [], None
        if self._why_not is not None:
            return [whole], None
        out: list[bytes] = []
        for raw in split(whole):
            failure = self._event(raw, out)
            if failure is not None:
                return out, failure
        # A first run's events go on as they came: the framer's bytes object itself (often the app's).
        return ([whole] if self.splicer is None else out), None

    def _event(self, raw: bytes, out: list[bytes]) -> Failure | None:
        transcript = self.transcript
        if transcript is None:
            if self._detecting:
                found = detect(raw)
                if found is None:  # a comment or a retry line: the format is still unknown
                    out.append(raw)
                    return None
                self._detecting = False
                self.transcript = transcript = transcript_for(found.name)
                if transcript is None:
                    self._why_not = f"format {found.name}"
            if transcript is None:
                out.append(raw)
                return None
        if self._checking:  # a re-run's first event with data: is it the same format at all?
            found = detect(raw)
            if found is not None:
                self._checking = False
                if found.name != transcript.name:
                    self._alien = found.name
                    return Failure(
                        "diverged", None, f"the re-run streams {found.name}, not {transcript.name}"
                    )
        event = read(raw)
        failure = transcript.error(event)
        if failure is not None:
            return failure
        if self.splicer is None:
            transcript.seen(event)
            out.append(raw)
            return None
        pieces = self.splicer.feed(event)
        if isinstance(pieces, Failure):
            return pieces
        for piece in pieces:
            transcript.seen(event if piece is raw else read(piece))
        out.extend(pieces)
        return None

    def end(self) -> Failure | None:
        """The run's body ended: its failure if it ended short (no end marker, or inside the client's
        text), else None."""
        self._framer.take()  # half an event at the end is discarded, as every client discards it
        if self.transcript is None or self._why_not is not None:
            return None
        if self.splicer is not None:
            short = self.splicer.short()
            if short is not None and not self.transcript.ended:
                return short
        return self.transcript.end()

    def owed(self) -> bytes | None:
        """On a re-run whose answer went out whole (its finish reason) but not its end: the end marker
        its run left out (b"" where the format's finish is its end), which the client gets so that a
        spliced stream ends as a whole one does. None otherwise, and always on a first run, whose
        stream is the app's own."""
        transcript = self.transcript
        if self.splicer is None or transcript is None or not transcript.finished or transcript.ended:
            return None
        transcript.ended = True
        return transcript.end_event

    def fail(self, failure: Failure, body: bytes = b"", wait: float | None = None) -> Retry | GiveUp | Whole:
        """This run failed: re-run (with ``body``, the request's, or the body asking for a continuation),
        or give up with the first failure's ending; or, when a re-run's answer went out whole before its
        run failed, end cleanly. ``wait``: the seconds the failure asked to wait (its ``Retry-After``)."""
        first = self.first = self.first or failure
        self._body = body
        if self.splicer is not None and self._checking and self._asking is not None:
            self._asking.refused()  # the re-run failed before its first event
        transcript = self.transcript
        if transcript is None and self._detecting and self._why_not is None:
            return self._retry(failure, body, wait, None)  # nothing of the answer went out: run it again
        if transcript is None or self._why_not is not None:
            return GiveUp(first, f"not recoverable: {self._why_not or 'no format recovery reads'}")
        marker = self.owed()
        if marker is not None:
            return Whole(marker)
        why = transcript.blocked(self._mode)
        if why is None and self._alien is not None:
            why = f"a re-run streamed another format ({self._alien}), which cannot continue this one"
        if why is not None:
            return GiveUp(first, why)
        return self._retry(failure, body, wait, transcript)

    def _retry(
        self, failure: Failure, body: bytes, wait: float | None, transcript: Transcript | None
    ) -> Retry | GiveUp:
        first = self.first or failure
        if self.attempt >= self._attempts:
            return GiveUp(first, f"{self.attempt} re-run(s) failed, the last: {failure.reason}")
        if wait is not None and wait > RETRY_AFTER_MAX:
            return GiveUp(first, f"the upstream asked to wait {wait:g} s (more than {RETRY_AFTER_MAX:g} s)")
        self.attempt += 1
        delay = max(self._backoff * 2 ** (self.attempt - 1), wait or 0.0)
        self._framer = Framer()
        if transcript is None:  # the format is learned from the re-run, as from a first run
            return Retry(delay, Recovery(self.attempt, failure.reason, "", "", ""), body)
        transcript.failed.append(self.splicer.usage if self.splicer is not None else transcript.usage)
        transcript.usage = Usage()  # what it sees from now on is spliced: each splicer counts its own
        text = transcript.text("text")
        asked = self._asking.ask(body, transcript.name, text) if self._asking is not None else None
        self.splicer = transcript.splicer(asked is None, self.attempt)
        if asked is not None and asked.text is not None:
            self.splicer.matchers["text"] = asked.text
        self._checking = True
        value = Recovery(self.attempt, failure.reason, text, transcript.text("reasoning"), transcript.name)
        return Retry(delay, value, body if asked is None else asked.body)

    def refuse(self, why: str) -> Retry | GiveUp | Whole:
        """A re-run that did not start as a stream of the same kind: give up at once, unless it was a
        prefill (an upstream that refuses one answers 400): then the anchor, if attempts are left."""
        if self.first is not None and self._asking is not None and self._asking.refused():
            return self.fail(self.first, self._body)
        first = self.first = self.first or Failure("exception")
        return GiveUp(first, why)
