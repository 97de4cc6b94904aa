"""The resume side: a request with one of our ``Last-Event-ID`` values, answered without reaching the app.

:class:`Resumption` is made once per middleware. Its :meth:`~Resumption.answer` runs before the app for
every HTTP request and costs one scan of the request headers unless a ``Last-Event-ID`` is there. When
it names a stream the store knows, for the same caller, and the client is not behind the log's window,
the response replays the events after the client's position and follows the live log until its end
marker: each event once, in order, with the anti-buffering headers, a heartbeat comment after
``heartbeat_interval`` seconds of silence. Everything else (no such stream, expired, another caller, a
store that fails) goes to the app as a normal request, ``Last-Event-ID`` and all.

A client that already has every event of an ended stream gets ``204 No Content``: the WHATWG answer that
makes ``EventSource`` stop reconnecting (a 200 that ends at once would have it reconnect forever).

:meth:`~Resumption.open` is the producer's entry point (see :mod:`.._resume.log`).
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio

from .._core.deadlines import FINALIZE_SECONDS
from .._core.errors import logger
from .._core.headers import stream_headers
from .._core.resume import (
    Caller,
    Position,
    bind,
    default_caller,
    identity,
    keep_request,
    last_event_id,
    new_stream,
    parse_store_url,
)
from .._core.resume import same_caller as _same_caller
from .._core.sse import comment
from .._resume.log import StreamLog
from .._resume.store import Found, Store, StoreError, StreamInfo, open_store
from .._settings import StreamingSettings
from .._telemetry.annotate import annotate
from .._telemetry.resume import (
    DELIVERED,
    REFUSED,
    RESUME_COMPLETE,
    RESUME_EVENTS,
    RESUME_UNAVAILABLE,
    RESUMED,
    UNAVAILABLE,
    UNKNOWN,
    ResumeTelemetry,
    traceparent,
)
from .._types import ASGIApp, Message, Receive, Scope, Send
from .takeover import orphan_ending, take_over

if TYPE_CHECKING:
    from anyio.abc import TaskGroup
    from opentelemetry.trace import SpanContext

_TAKEOVERS: Final = 3  # a stream whose takers keep dying ends with its error after this many
STORE_SECONDS: Final = 1.0  # a store that takes longer to open a log counts as down
FIND_SECONDS: Final = 5.0
"""The same for a resume's look-up: a resume already waits for its answer, and falling back to the app
means a new answer after the half the client has; a storm of resumes after a host died (every client
of that host at once) must not read as a store that is down."""
REST_SECONDS: Final = 5.0  # after a failure, streams skip the store this long (no added wait per request)
_DROPPED: Final = frozenset(
    (b"set-cookie", b"date", b"server", b"content-length", b"transfer-encoding", b"connection")
)


class Resumption:
    """Per middleware: the store, the caller binding and the telemetry of resumable streams."""

    def __init__(
        self,
        settings: StreamingSettings,
        *,
        caller: Caller | None = None,
        tracer_provider: Any = None,
        meter_provider: Any = None,
    ) -> None:
        self.settings = settings
        self.caller: Caller = caller or default_caller
        self.telemetry = ResumeTelemetry(tracer_provider, meter_provider) if settings.telemetry else None
        self._rest_until = -math.inf
        self._following: weakref.WeakSet[_Follow] = weakref.WeakSet()
        self.stopping = False
        self.app: ASGIApp | None = None  # the app a takeover runs again (set by the middleware; None: none)
        # Whether a request may name a log this middleware can find (read it; set here and by open()):
        # resume on, or a store other processes write to, or a stream that opened a log (resume on per
        # request). Else no request's headers need a look: a memory store holds only this one's logs.
        self.answers = settings.resume or parse_store_url(settings.resume_store).kind != "memory"
        # Opened now when it may be used, not at the first stream: a redis store's first use imports
        # redis-py, which would block the loop and spend the first stream's STORE_SECONDS (so that
        # stream, and the next REST_SECONDS of them, ran without resume).
        self._store: Store | None = open_store(settings.resume_store) if self.answers else None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = open_store(self.settings.resume_store)
        return self._store

    # -- the producer's side ------------------------------------------------------------------------

    async def open(
        self,
        scope: Scope,
        settings: StreamingSettings,
        headers: Sequence[tuple[bytes, bytes]] = (),
        span: SpanContext | None = None,
        body: bytes | None = None,
    ) -> StreamLog | None:
        """A log for a stream starting now, or None (resume off for it, or the store down: logged once).

        ``settings``: the response's effective settings. ``headers``: the response's, kept for the resumed
        responses (``Set-Cookie``, ``Date``, ``Server`` and framing headers are not). ``span``: the
        stream span's ``SpanContext``, for the resumed spans' links. ``body``: the request's body when
        the stream is recoverable: the request is kept with the log, for a host that takes it over.
        """
        if not settings.resume:
            return None
        self.answers = True
        if time.monotonic() < self._rest_until:
            self._unavailable(scope)
            return None
        stream = new_stream()
        info = StreamInfo(
            bind(stream, identity(self.caller, scope)),
            traceparent(span),
            tuple((name, value) for name, value in headers if name.lower() not in _DROPPED),
        )
        try:
            with anyio.fail_after(STORE_SECONDS):
                kept = keep_request(scope, body).encode() if body is not None else b""
                writer = await self.store.create(
                    stream, info, settings.resume_ttl, settings.resume_lease, kept
                )
        except (StoreError, TimeoutError) as exc:
            self._rest("unavailable at stream start", exc)
            self._unavailable(scope)
            return None
        return StreamLog(stream, writer, settings.resume_max_bytes)

    def _unavailable(self, scope: Scope) -> None:
        """Say on the stream's span that it runs without resume: the log lines say it only once."""
        if self.telemetry is not None:
            annotate(scope, {RESUME_UNAVAILABLE: True})

    def identity(self, scope: Scope) -> bytes:
        """Who the caller of a request is, as streams are bound to it."""
        return identity(self.caller, scope)

    async def follow(
        self, scope: Scope, receive: Receive, send: Send, position: Position, found: Found
    ) -> None:
        """Replay ``found`` after ``at``, then follow it live until its end (the AI SDK's resume)."""
        follow = _Follow(self, position, found, send)
        self._following.add(follow)
        await follow.run(scope, receive)

    @property
    def rest_until(self) -> float:
        """Until when streams skip the store after a failure (monotonic seconds)."""
        return self._rest_until

    def rest(self, what: str, exc: BaseException) -> None:
        self._rest(what, exc)

    def _rest(self, what: str, exc: BaseException) -> None:
        self._rest_until = time.monotonic() + REST_SECONDS
        self.store.warn(what, exc)

    # -- the resume side ----------------------------------------------------------------------------

    def wanted(self, scope: Scope) -> Position | None:
        """The position a request resumes from, if it is one to answer from the log (no await: asked of
        every request, and nearly none is)."""
        position = last_event_id(scope.get("headers") or ())
        return None if position is None or scope.get("method") == "HEAD" else position

    async def answer(self, scope: Scope, receive: Receive, send: Send, position: Position) -> bool:
        """Answer a resume request from ``position`` (see :meth:`wanted`); False when the app should
        answer instead (nothing was sent)."""
        outcome, found = await self._look_up(scope, position)
        if self.telemetry is not None:
            self.telemetry.count(outcome)
        if found is None:
            return False
        if outcome == DELIVERED:
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return True
        follow = _Follow(self, position, found, send)
        self._following.add(follow)
        await follow.run(scope, receive)
        return True

    async def _look_up(self, scope: Scope, position: Position) -> tuple[str, Found | None]:
        if time.monotonic() < self._rest_until:
            return UNAVAILABLE, None
        try:
            with anyio.fail_after(FIND_SECONDS):
                found = await self.store.find(position.stream)
        except (StoreError, TimeoutError) as exc:
            self._rest("unavailable for a resume", exc)
            return UNAVAILABLE, None
        if found is None:
            return UNKNOWN, None
        if not _same_caller(position.stream, identity(self.caller, scope), found.info.caller):
            return REFUSED, None
        if position.seq < found.first - 1:
            return UNKNOWN, None  # events it lacks are no longer kept: a gap is worse than a new answer
        if found.end and position.seq >= found.last:
            return DELIVERED, found  # nothing left to send: tell EventSource to stop
        return RESUMED, found  # a cut log's resume ends with the format's error: never a short success

    def drain(self) -> None:
        """The server is stopping: end every resumed response now (their clients reconnect elsewhere)."""
        self.stopping = True
        for follow in list(self._following):
            follow.stop()

    async def aclose(self) -> None:
        if self._store is not None:
            await self._store.aclose()


class _Follow:
    """One resumed response: replay, then follow the live log until its end."""

    def __init__(self, owner: Resumption, position: Position, found: Found, send: Send) -> None:
        self._owner = owner
        self._position = position
        self._found = found
        self._send = send
        self._scope = anyio.CancelScope()
        self._work: TaskGroup | None = None  # where a takeover's re-run runs: it outlives the client
        self._request: Scope = {}
        self._tries = 0
        self.gone = False
        self.events = 0
        self.complete: bool | None = None

    def stop(self) -> None:
        self._scope.cancel()

    async def run(self, scope: Scope, receive: Receive) -> None:
        owner = self._owner
        span = None
        if owner.telemetry is not None:
            span = owner.telemetry.start(scope, self._found.info.link, self._position.seq)
        headers = list(self._found.info.headers) or [(b"content-type", b"text/event-stream; charset=utf-8")]
        self._request = scope
        try:
            async with anyio.create_task_group() as self._work:
                await self._respond(receive, headers)
        finally:
            if span is not None:
                span.set_attribute(RESUME_EVENTS, self.events)
                span.set_attribute(RESUME_COMPLETE, bool(self.complete))
                span.end()

    async def _respond(self, receive: Receive, headers: list[tuple[bytes, bytes]]) -> None:
        owner = self._owner
        start = {"type": "http.response.start", "status": 200, "headers": stream_headers(headers)}
        await self._write(start)
        with self._scope:
            if owner.stopping:
                self._scope.cancel()
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(self._watch, receive)
                await self._pump()
                if self.complete is False:  # cut, or its producer died: not a clean end
                    await self._body(
                        await orphan_ending(owner.store, self._position.stream, owner.settings, headers)
                    )
                task_group.cancel_scope.cancel()
        with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
            await self._write({"type": "http.response.body", "body": b"", "more_body": False})

    async def _pump(self) -> None:
        settings = self._owner.settings
        beat = settings.heartbeat_interval or math.inf
        store = self._owner.store
        try:
            async with store.reader(self._position.stream, self._position.seq) as reader:
                last_write = time.monotonic()
                while not self.gone:
                    entries, end = await reader.read(max(0.0, last_write + beat - time.monotonic()))
                    if entries:
                        await self._body(entries[0] if len(entries) == 1 else b"".join(entries))
                        self.events += len(entries)
                        last_write = time.monotonic()
                    elif time.monotonic() - last_write >= beat:
                        # A resumed client has an event id (its Last-Event-ID): no blank line.
                        await self._body(comment(settings.heartbeat_comment, blank_line=False))
                        last_write = time.monotonic()
                    if end is False and reader.orphaned and await self._take_over():
                        reader.orphaned = False  # a producer again (this host's or another's): read on
                        continue
                    if end is not None:
                        self.complete = end
                        return
        except StoreError as exc:
            store.warn("failed while a resumed response followed it", exc)
            logger.debug("resumed response ended early: %s", exc)

    async def _take_over(self) -> bool:
        """Its producer died: take the stream over (see :mod:`.takeover`), at most a few times."""
        if self._work is None or self._tries >= _TAKEOVERS:
            return False
        self._tries += 1
        return await take_over(
            self._owner, self._position, self._request, self._found.info.headers, self._work
        )

    async def _body(self, data: bytes) -> None:
        await self._write({"type": "http.response.body", "body": data, "more_body": True})

    async def _write(self, message: Message) -> None:
        if self.gone:
            return
        try:
            await self._send(message)
        except OSError:  # how ASGI >= 2.4 servers say the client left
            self._client_gone()

    async def _watch(self, receive: Receive) -> None:
        """We own ``receive`` here (the app never runs): its only news for us is the client leaving."""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self._client_gone()
                return

    def _client_gone(self) -> None:
        self.gone = True
        self._scope.cancel()
