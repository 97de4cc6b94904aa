"""Recovery in the shell: the bodies of every run of the app go through one :class:`Recovering` to the
stream, and after a run that failed the responder asks it what to do (see :mod:`.._core.recovery`).

Made only for a stream whose settings turn ``recover`` on, whose request body the middleware holds
whole (:mod:`.recovery_plan`): with recovery off nothing here runs, and the per-token path is the
stream's own. The stream stays the client's one stream across the runs: its writer, pipeline, guards,
resume log and span carry on; only the app's run is new, with a fresh copy of the scope, the body
replayed from memory, and its :class:`~.._core.recovery.Recovery` in the scope.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, Protocol

import anyio
import anyio.lowlevel

from .._core import errors
from .._core.deadlines import Clocks
from .._core.errors import ErrorInfo, logger
from .._core.lifecycle import Lifecycle, Phase
from .._core.recovery import SCOPE_KEY, Failure, GiveUp, Retry, Whole
from .._core.recovery.raised import request_fault, retry_after
from .._core.recovery.run import RunState, Stage
from .._settings import SCOPE_KEY as OVERRIDES
from .._settings import StreamingSettings
from .._types import Message, Receive, Scope
from .recovery_plan import Plan as Plan  # re-exported: the stream and its start name it here
from .recovery_plan import media_of

if TYPE_CHECKING:
    from .._telemetry.recorder import StreamTelemetry

BODY: Final = "http.response.body"
_RUNNING: Final = frozenset((Stage.STREAMING, Stage.REFUSED))  # the stages a stall ends (cancels)


class RecoveryStream(Protocol):
    """What recovery may ask of its stream (a weak proxy of it)."""

    def end(self, info: ErrorInfo | None) -> None: ...

    def error_id(self) -> str: ...


class Recovering:
    """Made by the stream from its :class:`Plan`; ``wrap`` puts it in front of the stream's body path."""

    __slots__ = (
        "_counted",
        "_ends",
        "_first_exc",
        "_inner",
        "_media",
        "_run",
        "_snapshot",
        "_telemetry",
        "_writer_clocks",
        "body_bytes",
        "final",
        "life",
        "recoverer",
        "settings",
        "state",
    )

    def __init__(
        self,
        plan: Plan,
        settings: StreamingSettings,
        life: Lifecycle,
        ends: RecoveryStream,
        clocks: Clocks,
        telemetry: StreamTelemetry | None,
    ) -> None:
        self.recoverer = plan.recoverer
        self.body_bytes = plan.body
        scope, media = plan.scope, plan.media
        self.settings = settings
        self.life = life
        self._ends = ends
        self._writer_clocks = clocks  # the stall clock restarts with each run's response start
        self._telemetry = telemetry
        self._media = media
        # The scope as the app left it at its start, with a copy of its overrides: each re-run gets its
        # own copy of this (the first run's writes to the scope stay its own).
        overrides = scope.get(OVERRIDES)
        self._snapshot = {**scope, OVERRIDES: dict(overrides)} if overrides else dict(scope)
        self._inner: Callable[[Message], Awaitable[None]] = _nowhere
        self._run = plan.run
        self.state = RunState()  # the current run's stage (the first run's response has started)
        self.final: Message | None = None  # a truncated run's final body: a give-up sends it
        self._first_exc: Exception | None = None
        self._counted = False

    def wrap(self, inner: Callable[[Message], Awaitable[None]]) -> Callable[[Message], Awaitable[None]]:
        """The stream's body path, with recovery in front of it."""
        self._inner = inner
        return self.body

    # -- the bodies of every run ---------------------------------------------------------------------

    async def body(self, message: Message) -> None:
        if self.state.stage is not Stage.STREAMING or self.life.phase is not Phase.STREAMING:
            await anyio.lowlevel.checkpoint()  # the rest of a failed or refused run goes nowhere
            return
        data = message.get("body", b"")
        more = message.get("more_body", False)
        events, failure = self.recoverer.feed(bytes(data)) if data else ([], None)
        if events:
            joined = events[0] if len(events) == 1 else b"".join(events)
            await self._inner(
                message if joined is data and more else {"type": BODY, "body": joined, "more_body": True}
            )
        elif data:  # held (half an event) or dropped (a restart's repeat): the app is not silent
            self._writer_clocks.last_app = time.monotonic()
        if failure is not None:
            self.state.fail(failure)
            return
        if not more:
            failure = self.recoverer.end()
            if failure is not None:
                self.state.fail(failure)
                self.final = message
                return
            marker = self.recoverer.owed()
            self._outcome("recovered")  # before the last write, which ends the span
            if marker:
                await self._inner({**message, "body": marker})
            else:
                await self._inner({**message, "body": b""} if data else message)
            self.state.end()

    def stalled(self, now: float) -> bool:
        """The stall deadline passed: the app's current run is ended and recovered; True when that is
        recovery's to handle (also between runs, when no app runs to stall)."""
        self._writer_clocks.last_app = now
        if self.state.stage in _RUNNING:
            self.state.fail(Failure("stall"))
            self._run.cancel()
        return True

    # -- between runs: what the responder asks -------------------------------------------------------

    def decide(self, raised: Exception | None) -> Retry | GiveUp | Whole | None:
        """After a run: None when there is nothing to recover (it ended well, or the stream is over),
        else a re-run, giving up, or a clean end (a re-run's answer went out whole)."""
        state = self.state
        if self.life.phase is not Phase.STREAMING:
            state.end()
            return None
        if raised is not None and self._first_exc is None and self.recoverer.first is None:
            self._first_exc = raised
        failure, wait, refusal = state.failure, None, state.refusal
        if failure is None and raised is not None:
            status = request_fault(raised)
            if status is not None and refusal is None:
                refusal = f"the upstream answered {status}: the request is at fault, not retried"
            wait = retry_after(raised)
            failure = Failure("exception", None, type(raised).__name__)
        elif failure is None and refusal is None and state.stage is Stage.WAITING:
            failure = Failure("stall", None, "the re-run's response did not start")
        elif failure is None and refusal is None:
            failure = self.recoverer.end()  # the app returned without its final body
            if failure is None:
                state.end()
                marker = self.recoverer.owed()
                return None if marker is None else self._whole(marker)
        state.fail(failure, refusal)
        decision: Retry | GiveUp | Whole
        if refusal is not None or failure is None:
            decision = self.recoverer.refuse(refusal or "the re-run did not start")
        else:
            decision = self.recoverer.fail(failure, self.body_bytes, wait)
        telemetry = self._telemetry
        if isinstance(decision, GiveUp):
            state.give_up()
            logger.warning("recovery gave up: %s (first failure: %s)", decision.why, decision.failure.reason)
            self._outcome("gave_up")
        elif isinstance(decision, Whole):
            state.end()
            self._outcome("recovered")
        else:
            found = decision.recovery
            logger.debug("recovery: re-run %d in %g s (%s)", found.attempt, decision.delay, found.reason)
            if telemetry is not None:
                telemetry.recovery_attempt(found.attempt, found.reason, len(found.text), time.monotonic())
        return decision

    def _whole(self, marker: bytes) -> Whole:
        self._outcome("recovered")
        return Whole(marker)

    def _outcome(self, outcome: str) -> None:
        """How the stream's recovery ended, once, if it ever re-ran the app or gave up."""
        first = self.recoverer.first
        if self._telemetry is not None and first is not None and not self._counted:
            self._counted = True
            self._telemetry.recovery_outcome(outcome, first.reason)

    def scope_for(self, decision: Retry) -> Scope:
        """A fresh copy of the scope for a re-run, holding its :class:`Recovery`."""
        self.final = None
        self.state.rerun()  # the stall clock waits for its start, as a first run's does
        self._writer_clocks.last_app = time.monotonic()
        budget = self.settings.recover_start_timeout
        if budget > 0:
            self._run.start_within(budget)
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
            self.state.start(self._refusal(message))
            self._run.started()
            self._writer_clocks.last_app = time.monotonic()
            return
        if kind == BODY:
            await self.body(message)  # nowhere unless the run is streaming
            return
        await anyio.lowlevel.checkpoint()

    def _refusal(self, start: Message) -> str | None:
        status = start.get("status", 200)
        media = media_of(start.get("headers", ()))
        if status != 200:
            return f"the re-run answered {status}"
        if media != self._media:
            return f"the re-run's content type is {media.decode(errors='replace')!r}"
        return None

    async def complete(self, decision: Whole) -> None:
        """The clean end of a stream whose re-run's answer went out whole: its end marker, if owed."""
        self.final = None
        await self._inner({"type": BODY, "body": decision.marker, "more_body": False})

    async def give_up(self, decision: GiveUp) -> Exception | None:
        """The first failure's ending, as the stream would have ended without recovery; the exception
        the stream's teardown reports, if that is how it ended."""
        failure = decision.failure
        if failure.reason == "exception" and self._first_exc is not None:
            return self._first_exc
        if failure.reason == "stall":
            self._ends.end(errors.timeout(self._ends.error_id(), self.settings.stall_timeout))
            return None
        if failure.ending is not None:
            await self._inner({"type": BODY, "body": failure.ending, "more_body": True})
        final, self.final = self.final, None
        await self._inner(final if final is not None else {"type": BODY, "body": b"", "more_body": False})
        return None


async def _nowhere(message: Message) -> None:
    await anyio.lowlevel.checkpoint()
