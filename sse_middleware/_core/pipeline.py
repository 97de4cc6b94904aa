"""Sans-I/O: one stream's bytes in, frames out. Framing, dialect, coalescing and telemetry bookkeeping.

No awaits and no clock of its own: the responder passes ``now`` and sends what comes back. Whole events
are forwarded as the app's own bytes objects whenever nothing is merged. A partial event is held until
its blank line arrives (clients cannot use half an event, and holding it keeps heartbeats and error
events from landing inside it) unless it grows past ``max_event_bytes``: then it streams through as it
arrives, and nothing is injected until it ends.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from typing import Any

from . import headers as kinds
from .coalesce import Coalescer
from .config import CoreConfig
from .dialects import Delta, Dialect, PlainText, RouteRelay, detect, initial
from .dialects.base import Spliced
from .errors import ErrorInfo
from .observer import StreamObserver
from .output_check import OutputCheck
from .sse import Framer, has_id_line, split_events
from .wire import TEXT, Envelope, Part


class Pipeline:
    """``headers``: the response's headers (a format may be named there). ``relay``: the route's entry in
    the middleware's :class:`~.dialects.RelayMemory`, so that a route proven to stream a JSON relay
    merges from its next stream's first event; without it such relays merge only when named.
    ``check``: the JSON the request declared, held against each part's text (see :mod:`.output_check`);
    after a fault, :attr:`fault` is set and nothing more is taken from the app."""

    def __init__(
        self,
        kind: str,
        config: CoreConfig,
        observer: StreamObserver | None,
        *,
        headers: Iterable[tuple[bytes, bytes]] = (),
        relay: RouteRelay | None = None,
        check: OutputCheck | None = None,
    ) -> None:
        self.kind = kind
        self.config = config
        self.observer = observer
        self._max_event = config.max_event_bytes
        self._relay = relay if config.coalesce else None  # nothing to learn for when nothing merges
        self.framer = Framer() if kind == kinds.SSE else None
        self.dialect: Dialect = initial(kind, config, headers)
        self._plain = self.dialect if isinstance(self.dialect, PlainText) else None
        self.coalescer: Coalescer[Any, Envelope] | None = None
        if config.coalesce and self.dialect.merges:
            self.coalescer = Coalescer(config.coalesce_max_delay, config.coalesce_max_bytes)
        self.check = check
        self.fault = False  # the output check ruled the stream out: it ends after what was returned
        self.mid_event = False  # the wire is inside an event (a huge one forwarded in pieces)
        self._first: bytes | None = None  # the start of the first events: see ids
        # While the next event may take feed()'s fast lane: the dialect that reads it, and the coalescer
        # (None: a pass-through stream whose telemetry would find the last event's answers again).
        self._lane: tuple[Spliced, Coalescer[Any, Envelope] | None] | None = None
        # Whether the format reads nothing in an event (generic SSE): whole events then pass through
        # feed() without being split, read or asked about.
        self._opaque = False  # set by the first events (see _framed) or by detection
        if observer is not None and not self.dialect.detecting:
            observer.dialect(self.dialect.provider, self.dialect.operation)

    @property
    def ids(self) -> bool:
        """Whether the stream's events set ids: a heartbeat then drops its blank line (see
        :func:`.sse.comment`). Told by the first events, looked at only when asked (a heartbeat): an
        app that names its events does so from the first, and a search of every event would cost about
        what a token's whole trip does."""
        first = self._first
        return first is not None and has_id_line(first)

    def feed(self, body: bytes, now: float) -> list[bytes]:
        """App bytes -> frames to send now."""
        lane = self._lane
        if lane is not None:
            # The last event merged and nothing is held: an event in the same envelope merges at once,
            # without the framer (it would hand the body back as it is) or a search for events in it.
            spliced, merging = lane
            text = spliced.same_text(body)
            if text is not None:
                if merging is None:  # pass-through: True, as the full path says, which reads no text
                    if self.observer is not None:
                        self.observer.chunk(now, True)
                    return [body]
                if self.observer is not None:
                    self.observer.chunk(now, len(text))  # as _merge() does; same_text() is never empty
                pieces = merging.push(spliced.envelope, text, now)
                if not pieces:
                    return []
                if len(pieces) == 1 and pieces[0][1] is text:
                    return [body]  # sent as it came (a slow stream): the app's own bytes, not a rebuild
                return self._frames(pieces)
            self._lane = None
        elif self._opaque:
            framer = self.framer
            if framer is not None:
                blob = framer.feed(body)
                if blob is body and blob and not self.mid_event:  # whole events, nothing held: as they came
                    observer = self.observer
                    if observer is not None:  # as _observe() says of each event it reads nothing in
                        if blob.count(b"\n\n") > 1:  # maybe several: split_events() tells (CR-framed: one)
                            for _ in split_events(blob)[1:]:
                                observer.chunk(now, True)
                        observer.chunk(now, True)
                    return [body]
                return self._framed(framer, blob, now)
        out = self._read(body, now)
        self.dialect.forget()  # its last parse served this body's events: an idle stream keeps none
        return out

    def _read(self, body: bytes, now: float) -> list[bytes]:
        """:meth:`feed` off the fast lane: frame the body, read its events, merge or forward them."""
        framer = self.framer
        if framer is None:  # text/plain or NDJSON
            return self._feed_bytes(body, now)
        return self._framed(framer, framer.feed(body), now)

    def _framed(self, framer: Framer, blob: bytes, now: float) -> list[bytes]:
        """:meth:`_read` once the framer has given the whole events so far (``blob``)."""
        if self._first is None and blob:  # the first events: see ids; the opaque lane from the next
            self._first = blob[:512]
            self._opaque = self._reads_nothing(self.dialect)
        if self.mid_event or framer.pending > self._max_event:
            # Too large to hold (or already half on the wire): forward as it arrives, merge nothing.
            rest = framer.take()
            self.mid_event = bool(rest)
            out = self.flush()
            out.append(blob + rest)
            if self.observer is not None:
                self.observer.chunk(now, True)
            return out
        if not blob:
            return []
        events = split_events(blob)  # one split for every reader: the dialect's parse is kept by identity
        dialect = self.dialect
        if dialect.detecting:
            dialect = self._detect(events, blob)
            if dialect.detecting:
                return [blob]
        coalescer = self.coalescer
        if self.check is not None:
            return self._feed_checked(dialect, coalescer, events, now)
        if coalescer is None:
            if self.observer is not None:  # each event on its own: content may follow message_start in a send
                for raw in events:
                    self._observe(dialect, raw, now)
                if len(events) == 1 and not framer.pending and isinstance(dialect, Spliced):
                    self._pass_lane(dialect, blob)
            return [blob]
        out = []
        merged = False
        for raw in events:
            delta = dialect.delta(raw)
            merged = delta is not None and bool(delta.text)
            if delta is not None and merged:
                out.extend(self._merge(coalescer, delta, now))
            else:  # an empty delta still goes out: it may carry what starts a tool call
                out.extend(self.flush())
                out.append(raw)
                self._observe(dialect, raw, now)
        if merged and not framer.pending and isinstance(dialect, Spliced):
            self._lane = (dialect, coalescer)  # the framer's context is the envelope's end: skip it
        return out

    def _feed_bytes(self, body: bytes, now: float) -> list[bytes]:
        coalescer, plain = self.coalescer, self._plain
        if self.fault:
            return []
        if coalescer is None or plain is None:  # NDJSON, or text/plain that turned out not to be UTF-8
            if self.observer is not None:
                self.observer.chunk(now, True)
            return [body]
        try:
            text = plain.text(body)
        except UnicodeDecodeError:  # not UTF-8 after all: never alter it, forward it as it comes
            out = self.flush()
            self.coalescer = None
            out.append(body)
            return out
        if self.observer is not None:
            self.observer.chunk(now, True)
        if self.check is not None and text:
            cut = self.check.feed(TEXT, None, text)
            if cut is not None:
                self.fault = True
                text = text[:cut]
        # One merge key (None) for the whole stream: its text goes to the coalescer without a key.
        pieces = coalescer.push(plain.envelope, text, now) if text else None
        return self._frames(pieces) if pieces else []

    def _feed_checked(
        self, dialect: Dialect, coalescer: Coalescer[Any, Envelope] | None, events: list[bytes], now: float
    ) -> list[bytes]:
        """:meth:`feed`'s events with the output check: each delta's text is checked before it merges
        (or, not merging, before its event goes out as it came); at a fault, only the text before the
        faulty character is kept, and nothing after it. No fast lane: every delta is read."""
        out: list[bytes] = []
        check = self.check
        if self.fault or check is None:
            return out
        for raw in events:
            delta = dialect.delta(raw)
            if delta is None or not delta.text:
                dialect.see(raw)  # a tool call's name, for its arguments' schema
                if self.carried(dialect, raw) is None:
                    break  # its text ruled the stream out: the event cannot be cut, so it stays
                out.extend(self.flush())
                out.append(raw)
                self._observe(dialect, raw, now)
                continue
            cut = check.feed(dialect.part(delta.key), dialect.part_key(delta.key), delta.text)
            if cut is not None:
                self.fault = True
                delta = delta._replace(text=delta.text[:cut])
            if coalescer is not None:
                if delta.text:
                    out.extend(self._merge(coalescer, delta, now))
            elif cut is None:
                out.append(raw)  # checked and unchanged: the app's own bytes
                self._observe(dialect, raw, now)
            elif delta.text:
                out.append(dialect.build(delta.envelope, delta.text))
            if self.fault:
                break
        return out

    def carried(self, dialect: Dialect, raw: bytes) -> list[tuple[Hashable, Part, str]] | None:
        """The text ``raw``, an event that is no delta, carries ((part key, part, text) per piece), fed
        to the output check if there is one; None when the check ruled it out (then :attr:`fault`)."""
        pieces = [(dialect.part_key(key), dialect.part(key), text) for key, text in dialect.texts(raw)]
        check = self.check
        if check is not None:
            for key, part, text in pieces:
                if check.feed(part, key, text) is not None:
                    self.fault = True
                    return None
        return pieces

    def _detect(self, events: list[bytes], blob: bytes) -> Dialect:
        """The dialect, from the first of ``events`` (``blob``, split) with data; still undetected if none
        has any."""
        for raw in events:
            found = detect(raw, self._relay)
            if found is not None:
                break
        else:
            return self.dialect
        self.dialect = found
        if not found.merges:
            self.coalescer = None
        self._opaque = self._reads_nothing(found)
        if self.observer is not None:
            self.observer.dialect(found.provider, found.operation)
            self._record_info(found, blob)
        return found

    def _reads_nothing(self, dialect: Dialect) -> bool:
        """Whether ``dialect`` merges nothing and says the same of every event (content, no info), on a
        stream whose events are not checked: :meth:`feed` need not split its bodies."""
        kind = type(dialect)
        return (
            not dialect.merges
            and self.check is None
            and kind.content is Dialect.content
            and kind.wants_info is Dialect.wants_info
        )

    def _observe(self, dialect: Dialect, raw: bytes, now: float) -> None:
        observer = self.observer
        if observer is not None:
            observer.chunk(now, dialect.content(raw))
            if dialect.wants_info(raw):
                self._record_info(dialect, raw)

    def _pass_lane(self, dialect: Spliced, event: bytes) -> None:
        """Pass-through telemetry: after an event with a delta in it, the events that differ from it only
        in their text take the fast lane. A delta is content, and never in an event with info to parse
        (a dialect's read declines those: merging them would lose it), so the answers are the same."""
        found = dialect.learn(event)  # not delta(): a relay's must not learn or forget its route here
        if found is not None and found.text:
            self._lane = (dialect, None)

    def _record_info(self, dialect: Dialect, raw: bytes) -> None:
        """Model, id, finish reason and usage, when this event carries them."""
        info = dialect.info(raw)
        if info and self.observer is not None:
            self.observer.response(**info)

    def _merge(self, coalescer: Coalescer[Any, Envelope], delta: Delta, now: float) -> list[bytes]:
        key, envelope, text = delta
        if self.observer is not None:
            self.observer.chunk(now, len(text))  # only non-empty texts are merged
        pieces = coalescer.feed(key, envelope, text, now)
        return self._frames(pieces) if pieces else []

    def _frames(self, pieces: list[tuple[Envelope, str]]) -> list[bytes]:
        """Merged pieces as wire frames, each in its first event's envelope."""
        build = self.dialect.build
        if len(pieces) == 1:  # the usual flush
            envelope, piece = pieces[0]
            return [build(envelope, piece)]
        return [build(env, piece) for env, piece in pieces]

    def deadline(self) -> float:
        """When merged text must go out (inf: none waits)."""
        coalescer = self.coalescer
        return coalescer.due if coalescer is not None else math.inf

    def tick(self, now: float) -> list[bytes]:
        coalescer = self.coalescer
        if coalescer is None:
            return []
        pieces = coalescer.tick(now)
        return self._frames(pieces) if pieces else []

    def flush(self) -> list[bytes]:
        """Everything merged so far, before something that cannot merge, or at the end."""
        coalescer = self.coalescer
        if coalescer is None:
            return []
        out = self._frames(coalescer.flush()) if coalescer.due != math.inf else []  # before every other event
        if self._plain is not None:  # a UTF-8 sequence a text/plain stream never finished, as it came
            held = self._plain.flush()
            if held:
                out.append(held)
        return out

    def close(self) -> list[bytes]:
        """The app's body ended: everything held goes out, an unterminated last event as it was sent."""
        out = self.flush()
        if self.framer is not None and self.framer.pending:
            out.append(self.framer.take())
        return out

    def answered(self, last: bytes) -> bool:
        """Whether ``last``, the last frame the client has, ends with the stream's own end: its end marker,
        or the error event the app sent itself. An ending then adds no event: the client has a finished
        stream or the app's own error, and a second ending would contradict it (an AG-UI client takes a
        ``RUN_ERROR`` after ``RUN_FINISHED`` as the run's failure; the Anthropic SDK raises on an error
        event after ``message_stop``)."""
        if self.framer is None or self.mid_event or not last:
            return False
        event = split_events(last)[-1]
        dialect = type(self.dialect)
        return dialect.is_end(event) or dialect.reported_error(event) is not None

    def error_frame(self, info: ErrorInfo) -> bytes | None:
        """The error event in this stream's dialect; None when the format has no in-band channel.

        A partial event the app never finished is dropped first: its client would discard it anyway,
        and it must not swallow the error event's lines.
        """
        if self.mid_event:
            return None
        if self.framer is not None:
            self.framer.take()
        return self.dialect.error_event(info)
