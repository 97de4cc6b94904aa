"""Sans-I/O: the pipeline of a guarded stream. Every event is decomposed (no fast lane, merged or not),
goes through the :class:`~.guard.GuardGate`, and what it lets out goes on to the coalescer as usual, so
merging, the leading edge and the bounded delay keep working after release.

Streams without guards never see this class: their pipeline is the plain one, unchanged.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from .config import CoreConfig
from .dialects import Delta, Dialect, RouteRelay
from .dialects.base import Generic
from .dialects.endings import CONTENT_FILTER, Ending, ending_for
from .errors import ErrorInfo
from .guard import GuardGate
from .observer import StreamObserver
from .output_check import OutputCheck
from .pipeline import Pipeline
from .sse import Framer, split_events
from .wire import TEXT, Part, name_and_data


class GuardedPipeline(Pipeline):
    """``hold``: guard mode ``hold`` (else ``observe``). ``scope``: shown to guards."""

    def __init__(
        self,
        kind: str,
        config: CoreConfig,
        observer: StreamObserver | None,
        *,
        hold: bool,
        scope: Mapping[str, Any],
        headers: Iterable[tuple[bytes, bytes]] = (),
        relay: RouteRelay | None = None,
        check: OutputCheck | None = None,
    ) -> None:
        super().__init__(kind, config, observer, headers=headers, relay=relay, check=check)
        self.gate = GuardGate(hold=hold, max_bytes=config.coalesce_max_bytes, dialect="", scope=scope)
        self._ending: Ending | None = None
        self._now = 0.0  # the last clock reading fed (close() is given none)
        self.overflowed = False  # an event grew past max_event_bytes (see _too_large)
        self.overflow_allowed = False  # guard_failure="allow": such an event streams through unchecked

    def _read(self, body: bytes, now: float) -> list[bytes]:
        self._now = now
        if self.fault:
            return []
        framer = self.framer
        if framer is None:
            self._push_bytes(body)
            return self.release(now)
        blob = framer.feed(body)
        if self.mid_event or framer.pending > self._max_event:
            return self._too_large(framer, blob, now)
        if not blob:
            return []
        return self._feed_events(split_events(blob), now)

    def _too_large(self, framer: Framer, blob: bytes, now: float) -> list[bytes]:
        """An event past ``max_event_bytes``: it cannot be held whole to be checked (memory stays bounded),
        and unchecked text never leaves on its own. So it is a fault of the check: with
        ``guard_failure="allow"`` it streams through as it arrives, unchecked, in its place behind what
        the guards are still checking; else nothing more leaves and the shell ends the stream (it sees
        :attr:`overflowed`)."""
        self.overflowed = True
        if not self.overflow_allowed:
            framer.take()
            self.gate.failed()
            return []
        events = split_events(blob) if blob else []
        if self.mid_event:  # the large event goes on: its end is the blob's first event, if it came
            tail = events.pop(0) if events else framer.take()
            self.gate.unchecked(tail)
            self.mid_event = not blob
        out = self._feed_events(events, now) if events else []
        if not self.mid_event and framer.pending > self._max_event:  # the next one is too large too
            self.gate.unchecked(framer.take())
            self.mid_event = True
        return out + self.release(now)

    def _feed_events(self, events: list[bytes], now: float) -> list[bytes]:
        dialect = self.dialect
        if dialect.detecting:
            dialect = self._detect(events, b"".join(events))
            if dialect.detecting:
                for raw in events:
                    self.gate.event(raw)
                return self.release(now)
        ending = self.ending()
        gate = self.gate
        for raw in events:
            ending.see(raw)
            delta = dialect.delta(raw) if dialect.merges else None
            if delta is not None and delta.text:
                part = dialect.part(delta.key)
                key = dialect.part_key(delta.key)
                delta = self._checked(delta, part, key)
                if delta.text:
                    gate.text(delta, part, key)
                if self.fault:
                    break
                continue
            dialect.see(raw)
            if isinstance(dialect, Generic):  # a format whose text is not read (a relay being proven too)
                data = name_and_data(raw)[1]
                if data:  # each event with data is checked; a comment or a retry is structural
                    gate.data(raw, data.decode("utf-8", "replace"))
                    continue
            else:
                pieces = self.carried(dialect, raw)
                if pieces is None:
                    break  # the output check ruled the event out: it does not go out
                if pieces:
                    gate.carrier(raw, pieces)
                    continue
            gate.event(raw)
        return self.release(now)

    def _reads_nothing(self, dialect: Dialect) -> bool:
        return False  # every event goes through the gate: none may take the plain pipeline's opaque lane

    def _push_bytes(self, body: bytes) -> None:
        plain = self._plain
        if plain is not None:
            try:
                text = plain.text(body)
            except UnicodeDecodeError:  # not UTF-8 after all: checked as data from now on
                self._plain = None
            else:
                if text:
                    delta = self._checked(Delta(None, plain.envelope, text), TEXT, None)
                    if delta.text:
                        self.gate.text(delta, TEXT, None)
                return
        self.gate.data(body, body.decode("utf-8", "replace"))

    def _checked(self, delta: Delta, part: Part, key: Hashable) -> Delta:
        """The delta as the output check lets it through: cut before a faulty character (then
        :attr:`fault` is set). The guards see only text the check passed."""
        check = self.check
        cut = check.feed(part, key, delta.text) if check is not None else None
        if cut is None:
            return delta
        self.fault = True
        return delta._replace(text=delta.text[:cut])

    def ending(self) -> Ending:
        ending = self._ending
        if ending is None:
            ending = self._ending = ending_for(self.dialect)
            self.gate.dialect = self.dialect.name
        return ending

    def release(self, now: float) -> list[bytes]:
        """Frames for what the gate lets out now (deltas through the coalescer, when it merges)."""
        self._now = max(self._now, now)
        items = self.gate.release()
        if not items:
            return []
        out: list[bytes] = []
        dialect, coalescer, observer = self.dialect, self.coalescer, self.observer
        for item in items:
            if isinstance(item, Delta):
                if observer is not None:
                    observer.chunk(now, len(item.text) or True)  # an empty text is still output
                if coalescer is None:
                    out.append(dialect.build(item.envelope, item.text))
                else:
                    pieces = coalescer.feed(item.key, item.envelope, item.text, now)
                    if pieces:
                        out.extend(self._frames(pieces))
            else:
                out.extend(self.flush())
                out.append(item)
                if self.framer is None:
                    if observer is not None:
                        observer.chunk(now, True)
                else:
                    self._observe(dialect, item, now)
        return out

    def end_of_body(self, *, failed: bool = False) -> None:
        """The app's body ended (``failed``: the app raised): what is left gets its final checks before
        :meth:`close`. An unterminated last event goes on as it was sent, unless the app failed: then it
        is dropped, as :meth:`error_frame` drops it (its lines would swallow the ending's)."""
        if self.framer is not None and self.framer.pending:
            held = self.framer.take()
            if not failed:
                self.gate.event(held)
        self.gate.close()

    def close(self) -> list[bytes]:
        """Everything approved goes out; what was never approved does not."""
        out = self.release(self._now)
        out.extend(self.flush())
        return out

    def error_frame(self, info: ErrorInfo) -> bytes | None:
        self.gate.failed()
        if self.mid_event:  # half an event is on the wire: its lines would swallow ours; cut instead
            return None
        if self.framer is not None:
            self.framer.take()
        if info.type == CONTENT_FILTER:
            return self.ending().frame(info, self.gate.keys())
        return self.dialect.error_event(info)
