"""A stream whose producer died: its host was killed (an OOM kill, a lost node), so its log has no end
marker and its lease in the store ran out (see :mod:`.._resume.redis_store`). Whoever reads that log
must not end it as if it were whole: a client would take a truncated answer for the answer.

:func:`orphan_ending` is what a resumed response ends with then: the stream's own error event, in its
format (read from the settings, the response's headers or the log's first event with data), so every
client sees a failure (the openai SDK raises ``APIError``, the AI SDK shows its error part).

:func:`take_over` does better when it can: when the stream kept its request (``recover`` on, see
:class:`~.._core.resume.KeptRequest`), the host that reads the orphaned log claims the stream in the
store (:meth:`~.._resume.store.Store.take`: one host wins, the others read on), reads the log whole,
and runs the app again as a continuation: :func:`~sse_middleware.recovery` says ``"takeover"`` and the
text the log holds. Its events go through recovery's own splice (the :class:`~.._core.recovery.Recoverer`
fed the log's events first, as it would have read the first run) and then into the same log, under the
stream's next ids, so every reader of the log, on any host, gets the rest once. Its client is the log:
the re-run hears of no disconnect, as a producer whose client left does not.

A re-run is refused (the log then ends cut: every reader gets the error) when it starts with another
status or content type, or asks for guards or an output check of its own (they would not see it: the
splice writes to the log, not through a stream's pipeline). A middleware with guards takes nothing over.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Final, Protocol

import anyio
import anyio.lowlevel

from .._core.deadlines import FINALIZE_SECONDS
from .._core.dialects import BY_NAME, detect
from .._core.dialects.base import Dialect, Generic
from .._core.dialects.endings import sse_error
from .._core.dialects.registry import hinted
from .._core.errors import INTERNAL, ErrorInfo, logger, new_error_id
from .._core.recovery import SCOPE_KEY, Failure, GiveUp, Recoverer, Whole
from .._core.resume import KeptRequest, Position
from .._exceptions import ConfigError
from .._resume.log import StreamLog
from .._resume.store import Store, StoreError, Writer
from .._settings import SCOPE_KEY as OVERRIDES
from .._settings import StreamingSettings, effective
from .._types import ASGIApp, Message, Scope
from .guards import GUARDS_KEY
from .recovery import BODY
from .recovery_plan import media_of

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

PRODUCER_GONE: Final = "The server producing this stream stopped before it ended."
_FIRST_READS: Final = 4  # batches read looking for the first event with data (comments come before it)
STORE_SECONDS: Final = 2.0  # a store that takes longer to claim a stream counts as down


class Owner(Protocol):
    """What a takeover needs of the middleware's resume side."""

    settings: StreamingSettings
    app: ASGIApp | None

    @property
    def store(self) -> Store: ...


async def dialect_of(
    store: Store, stream: str, settings: StreamingSettings, headers: Iterable[tuple[bytes, bytes]]
) -> Dialect:
    """The stream's format, as its producer read it: the settings' name, the response's header hint,
    or detected from the log's first event with data (generic SSE when the log no longer holds it)."""
    if settings.dialect != "auto":
        return BY_NAME[settings.dialect].named(settings.json_text_field)
    hint = hinted(headers)
    if hint is not None:
        return hint()
    try:
        async with store.reader(stream, 0) as reader:
            for _ in range(_FIRST_READS):
                entries, end = await reader.read(0)
                for raw in entries:
                    found = detect(raw)
                    if found is not None:
                        return found
                if end is not None or not entries:
                    break
    except StoreError:
        pass  # trimmed, or the store failed: the generic error event still says it failed
    return Generic()


async def orphan_ending(
    store: Store, stream: str, settings: StreamingSettings, headers: Iterable[tuple[bytes, bytes]]
) -> bytes:
    """The error event that ends a resumed response whose producer died (or whose log was cut)."""
    info = ErrorInfo(INTERNAL, PRODUCER_GONE, new_error_id(None))
    logger.warning("resumed stream %s: its producer stopped before its end (error id %s)", stream, info.id)
    dialect = await dialect_of(store, stream, settings, headers)
    return dialect.error_event(info) or sse_error(info)


async def take_over(
    owner: Owner, position: Position, request: Scope, headers: Iterable[tuple[bytes, bytes]], work: TaskGroup
) -> bool:
    """The stream ``position`` names was orphaned: whether it has a producer again (this host's re-run,
    started in ``work``, or another host's), or has ended meanwhile; False when it cannot be taken over
    (no app to run, no request kept, the store failing): then its readers end with the error."""
    app, settings, store = owner.app, owner.settings, owner.store
    if app is None or settings.validate_json:  # the output check would not see a re-run's text
        return False
    try:
        with anyio.fail_after(STORE_SECONDS):
            raw = await store.request(position.stream)
            kept = KeptRequest.decode(raw) if raw else None
            if kept is None:
                return False
            taken = await store.take(position.stream, settings.resume_ttl, settings.resume_lease)
    except (StoreError, TimeoutError) as exc:
        store.warn("failed at a takeover", exc)
        return False
    if taken is not None:
        writer, last = taken
        media = media_of(headers)
        work.start_soon(_rerun, owner, app, _Taken(position, kept, request, media), writer, last)
    return True


class _Taken:
    """What a re-run is made from: the stream and the resuming client's position, the kept request, the
    resuming request's scope (its caller's credentials) and the stream's content type."""

    __slots__ = ("kept", "media", "position", "request")

    def __init__(self, position: Position, kept: KeptRequest, request: Scope, media: bytes) -> None:
        self.position, self.kept, self.request, self.media = position, kept, request, media


async def _rerun(owner: Owner, app: ASGIApp, taken: _Taken, writer: Writer, last: int) -> None:
    """Run the app again onto the log after position ``last``, until it ends whole or recovery gives
    up; the log ends complete, or cut (its readers then end with the error)."""
    settings, stream = owner.settings, taken.position.stream
    log = StreamLog(stream, writer, settings.resume_max_bytes).going_on(last)
    complete = False
    try:
        if taken.position.seq > last:
            logger.warning("stream %s: its log lost events a client had; not taken over", stream)
            return
        had = await _read_log(owner.store, stream, last)
        recoverer = Recoverer(
            "continue" if settings.recover == "off" else settings.recover,
            max(1, settings.recover_attempts),
            settings.recover_backoff,
            body=settings.recover_body,
            dialect=settings.dialect,
            max_event=settings.max_event_bytes,
        )
        recoverer.feed(b"".join(had))  # what every client has: the log, read as the first run's
        logger.warning("stream %s: its producer died; taken over after event %d", stream, last)
        complete = await _runs(app, recoverer, taken, log, settings)
    except StoreError as exc:
        owner.store.warn("failed while a stream was taken over", exc)
    finally:
        with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
            await log.close(complete)


async def _read_log(store: Store, stream: str, last: int) -> list[bytes]:
    """Events 1 to ``last`` of the log (raises StoreError if it no longer holds them all)."""
    out: list[bytes] = []
    async with store.reader(stream, 0) as reader:
        while len(out) < last:
            entries, end = await reader.read(STORE_SECONDS)
            if not entries:
                raise StoreError(f"the log gave {len(out)} of its {last} events (end: {end})")
            out.extend(entries)
    return out[:last]


async def _runs(
    app: ASGIApp, recoverer: Recoverer, taken: _Taken, log: StreamLog, settings: StreamingSettings
) -> bool:
    """Re-runs until one ends whole (True) or recovery gives up (False)."""
    failure: Failure | None = Failure("takeover")
    while failure is not None:
        decision = recoverer.fail(failure, taken.kept.body)
        if isinstance(decision, GiveUp):
            logger.warning("a takeover gave up: %s", decision.why)
            return False
        if isinstance(decision, Whole):  # the answer went out whole, its end marker did not
            _owed(log, decision.marker)
            return True
        if decision.recovery.attempt > 1:
            await anyio.sleep(decision.delay)  # the first re-run at once: the stream waited a lease already
        scope = {**taken.kept.scope(taken.request), SCOPE_KEY: decision.recovery}
        scope.pop(OVERRIDES, None)
        run = _Run(recoverer, log, taken.media, scope, settings)
        try:
            await app(scope, run.receive_for(decision.body), run.send)
        except Exception as exc:
            run.broke = run.broke or Failure("exception", None, type(exc).__name__)
        if run.refused is not None:
            logger.warning("a takeover's re-run was refused: %s", run.refused)
            return False
        failure = run.broke if run.broke is not None else (None if run.ended else recoverer.end())
    _owed(log, recoverer.owed())
    return True


def _owed(log: StreamLog, marker: bytes | None) -> None:
    """The end marker a re-run left out, so that the log ends as a whole answer does."""
    if marker:
        log.append(marker)


class _Run:
    """One re-run's ``receive`` and ``send``: its body from memory, its events spliced into the log."""

    __slots__ = ("_log", "_media", "_recoverer", "_scope", "_settings", "broke", "ended", "refused")

    def __init__(
        self, recoverer: Recoverer, log: StreamLog, media: bytes, scope: Scope, settings: StreamingSettings
    ) -> None:
        self._recoverer, self._log, self._media, self._scope = recoverer, log, media, scope
        self._settings = settings
        self.broke: Failure | None = None
        self.refused: str | None = None
        self.ended = False

    def receive_for(self, body: bytes) -> Callable[[], Awaitable[Message]]:
        pending = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> Message:
            if pending:
                return pending.pop()
            await anyio.sleep_forever()  # its client is the log: no disconnect to hear
            raise AssertionError("unreachable")

        return receive

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.refused = self._refusal(message)
        elif kind == BODY and self.refused is None and self.broke is None and not self.ended:
            data = message.get("body", b"")
            events, failure = self._recoverer.feed(bytes(data)) if data else ([], None)
            for event in events:
                self._log.append(event)  # tagged with the stream's next ids, written to the store
            if failure is not None:
                self.broke = failure
            elif not message.get("more_body", False):
                self.ended = True
                self.broke = self._recoverer.end()
        await anyio.lowlevel.checkpoint()

    def _refusal(self, start: Message) -> str | None:
        status = start.get("status", 200)
        if status != 200:
            return f"the re-run answered {status}"
        media = media_of(start.get("headers", ()))
        if media != self._media:
            return f"the re-run's content type is {media.decode(errors='replace')!r}"
        if GUARDS_KEY in (self._scope.get(OVERRIDES) or ()):
            return "the re-run asked for guards, which a takeover's splice would not show its text"
        try:
            settings = effective(self._settings, self._scope)
        except ConfigError as exc:
            return f"the re-run's overrides: {exc}"
        if settings is None or settings.validate_json or settings.recover == "off":
            return "the re-run turned the middleware, or recovery, off, or asked for an output check"
        return None
