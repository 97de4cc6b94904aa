"""Recovery in the shell: the bodies of every run of the app go through one :class:`Recovering` to the
stream, and after a run that failed the responder asks it what to do (see :mod:`.._core.recovery`).

Made only for a stream whose settings turn ``recover`` on, whose request body the middleware holds
whole: with recovery off nothing here runs, and the per-token path is the stream's own. The stream
stays the client's one stream across the runs: its writer, pipeline, guards, resume log and span carry
on; only the app's run is new, with a fresh copy of the scope, the body replayed from memory, and its
:class:`~.._core.recovery.Recovery` in the scope.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Protocol

import anyio
import anyio.lowlevel

from .._core import errors, headers
from .._core.errors import ErrorInfo, logger
from .._core.lifecycle import Lifecycle, Phase
from .._core.recovery import SCOPE_KEY, Failure, GiveUp, Recoverer, Retry
from .._settings import SCOPE_KEY as OVERRIDES
from .._settings import StreamingSettings
from .._types import Message, Receive, Scope

if TYPE_CHECKING:
    from .._telemetry.recorder import StreamTelemetry

BODY: Final = "http.response.body"
_UNRECOVERABLE: set[str] = set()  # routes already logged as not recoverable (their body is not held)


class Ends(Protocol):
    """What recovery may ask of its stream (a weak proxy of it)."""

    def end(self, info: ErrorInfo | None) -> None: ...

    def error_id(self) -> str: ...


def recoverable_body(scope: Scope, whole: bytes | None) -> bytes | None:
    """The body a re-run can replay: ``whole``, the body the app read (when it read all of it within
    the peek's bound), or b"" for a request without one; None (logged once per route) when the
    middleware does not hold it."""
    if not headers.has_request_body(scope.get("headers", ())):
        return b""
    if whole is not None:
        return whole
    route = scope.get("path", "")
    if route not in _UNRECOVERABLE:
        _UNRECOVERABLE.add(route)
        logger.warning(
            "recover is on for %s, but its request body is not held whole (over 1 MiB, or not read "
            "before the response started): its streams are not recovered",
            route,
        )
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """What a stream's recovery is made from at the response's start: the sans-I/O recoverer, the body to
    replay, the scope as the app left it, and the start's content type (a re-run must repeat it)."""

    recoverer: Recoverer
    body: bytes
    scope: Scope
    media: bytes
    cancel_run: Callable[[], object]


def plan(
    settings: StreamingSettings,
    scope: Scope,
    start: Message,
    body: bytes | None,
    cancel_run: Callable[[], object],
) -> Plan | None:
    """The recovery of a stream that turned out to be SSE, if its settings and its body allow one."""
    if settings.recover == "off" or body is None:
        return None
    recoverer = Recoverer(
        settings.recover,
        settings.recover_attempts,
        settings.recover_backoff,
        body=settings.recover_body,
        dialect=settings.dialect,
        max_event=settings.max_event_bytes,
    )
    return Plan(recoverer, body, scope, _media(start.get("headers", ())), cancel_run)


class Recovering:
    """Made by the stream from its :class:`Plan`; ``wrap`` puts it in front of the stream's body path."""

    __slots__ = (
        "_counted",
        "_ends",
        "_first_exc",
        "_inner",
        "_media",
        "_refused",
        "_running",
        "_snapshot",
        "_telemetry",
        "_writer_clocks",
        "body_bytes",
        "broke",
        "cancel_run",
        "final",
        "life",
        "recoverer",
        "settings",
    )

    def __init__(
        self,
        plan: Plan,
        settings: StreamingSettings,
        life: Lifecycle,
        ends: Ends,
        clocks: Any,
        telemetry: StreamTelemetry | None,
    ) -> None:
        self.recoverer = plan.recoverer
        self.body_bytes = plan.body
        scope, media = plan.scope, plan.media
        self.settings = settings
        self.life = life
        self._ends = ends
        self._writer_clocks = clocks  # the stall clock restarts with each run
        self._telemetry = telemetry
        self._media = media
        # The scope as the app left it at its start, with a copy of its overrides: each re-run gets its
        # own copy of this (the first run's writes to the scope stay its own).
        overrides = scope.get(OVERRIDES)
        self._snapshot = {**scope, OVERRIDES: dict(overrides)} if overrides else dict(scope)
        self._inner: Callable[[Message], Awaitable[None]] = _nowhere
        self.cancel_run = plan.cancel_run
        self.broke: Failure | None = None  # this run's, once seen
        self.final: Message | None = None  # a truncated run's final body: a give-up sends it
        self._first_exc: Exception | None = None
        self._refused: str | None = None
        self._running = True
        self._counted = False

    def wrap(self, inner: Callable[[Message], Awaitable[None]]) -> Callable[[Message], Awaitable[None]]:
        """The stream's body path, with recovery in front of it."""
        self._inner = inner
        return self.body

    # -- the bodies of every run ---------------------------------------------------------------------

    async def body(self, message: Message) -> None:
        if self.broke is not None or self.life.phase is not Phase.STREAMING:
            await anyio.lowlevel.checkpoint()  # the rest of a failed run goes nowhere
            return
        data = message.get("body", b"")
        more = message.get("more_body", False)
        events, failure = self.recoverer.feed(bytes(data)) if data else ([], None)
        if events:
            joined = events[0] if len(events) == 1 else b"".join(events)
            await self._inner(
                message if joined is data and more else {"type": BODY, "body": joined, "more_body": True}
            )
        if failure is not None:
            self.broke = failure
            return
        if not more:
            failure = self.recoverer.end()
            if failure is not None:
                self.broke, self.final = failure, message
                return
            self._outcome("recovered")  # before the last write, which ends the span
            await self._inner({**message, "body": b""} if data else message)

    def stalled(self, now: float) -> bool:
        """The stall deadline passed: the app's current run is ended and recovered; True when that is
        recovery's to handle (also between runs, when no app runs to stall)."""
        self._writer_clocks.last_app = now
        if self._running and self.broke is None:
            self.broke = Failure("stall")
            self.cancel_run()
        return True

    # -- between runs: what the responder asks -------------------------------------------------------

    def decide(self, raised: Exception | None) -> Retry | GiveUp | None:
        """After a run: None when there is nothing to recover (it ended well, or the stream is over),
        else a re-run or giving up."""
        self._running = False
        if self.life.phase is not Phase.STREAMING:
            return None
        failure = self.broke
        if raised is not None and failure is None:
            failure = Failure("exception", None, type(raised).__name__)
        if failure is None and self._refused is None:
            failure = self.recoverer.end()  # the app returned without its final body
            if failure is None:
                return None
        if raised is not None and self._first_exc is None and self.recoverer.first is None:
            self._first_exc = raised
        decision: Retry | GiveUp
        if self._refused is not None or failure is None:
            decision = self.recoverer.refuse(self._refused or "the re-run did not start")
        else:
            decision = self.recoverer.fail(failure, self.body_bytes)
        telemetry = self._telemetry
        if isinstance(decision, GiveUp):
            logger.warning("recovery gave up: %s (first failure: %s)", decision.why, decision.failure.reason)
            self._outcome("gave_up")
        elif telemetry is not None:
            reason = decision.recovery.reason
            telemetry.recovery_attempt(
                decision.recovery.attempt, reason, len(decision.recovery.text), time.monotonic()
            )
        return decision

    def _outcome(self, outcome: str) -> None:
        """How the stream's recovery ended, once, if it ever re-ran the app or gave up."""
        first = self.recoverer.first
        if self._telemetry is not None and first is not None and not self._counted:
            self._counted = True
            self._telemetry.recovery_outcome(outcome, first.reason)

    def scope_for(self, decision: Retry) -> Scope:
        """A fresh copy of the scope for a re-run, holding its :class:`Recovery`."""
        self.broke, self.final, self._refused, self._running = None, None, None, True
        self._writer_clocks.last_app = time.monotonic()
        overrides = self._snapshot.get(OVERRIDES)
        scope = {**self._snapshot, SCOPE_KEY: decision.recovery}
        if overrides:
            scope[OVERRIDES] = dict(overrides)
        return scope

    def receive_for(self, decision: Retry, receive: Receive) -> Receive:
        """The re-run's ``receive``: its body from memory, then the server's (the client's disconnect)."""
        pending = [{"type": "http.request", "body": decision.body, "more_body": False}]

        async def replay() -> Message:
            if pending:
                return pending.pop()
            return await receive()

        return replay

    async def send(self, message: Message) -> None:
        """The re-run's ``send``: its start checked (not sent: the client's response started long ago),
        its bodies spliced onto the stream."""
        kind = message["type"]
        if kind == "http.response.start":
            self._refused = self._refusal(message)
            return
        if kind == BODY and self._refused is None:
            await self.body(message)
            return
        await anyio.lowlevel.checkpoint()

    def _refusal(self, start: Message) -> str | None:
        status = start.get("status", 200)
        media = _media(start.get("headers", ()))
        if status != 200:
            return f"the re-run answered {status}"
        if media != self._media:
            return f"the re-run's content type is {media.decode(errors='replace')!r}"
        return None

    async def give_up(self, decision: GiveUp) -> Exception | None:
        """The first failure's ending, as the stream would have ended without recovery; the exception
        the stream's teardown reports, if that is how it ended."""
        failure = decision.failure
        if failure.reason == "exception" and self._first_exc is not None:
            return self._first_exc
        if failure.reason == "stall":
            self._ends.end(errors.timeout(self._ends.error_id(), self.settings.stall_timeout))
            return None
        self.broke = None
        if failure.ending is not None:
            await self._inner({"type": BODY, "body": failure.ending, "more_body": True})
        final, self.final = self.final, None
        await self._inner(final if final is not None else {"type": BODY, "body": b"", "more_body": False})
        return None


def _media(found: Any) -> bytes:
    for name, value in found:
        if name.lower() == b"content-type":
            return bytes(value).split(b";")[0].strip().lower()
    return b""


async def _nowhere(message: Message) -> None:
    await anyio.lowlevel.checkpoint()


media_of: Final = _media  # a takeover checks its re-run's start the same way
