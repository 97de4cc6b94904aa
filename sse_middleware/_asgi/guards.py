"""Guards, the I/O side: checks run beside the app, never inside its ``send``.

A stream with guards gets a :class:`GuardRunner`. The app's bodies go into the stream's
:class:`~.._core.guarded.GuardedPipeline`, whose :class:`~.._core.guard.GuardGate` holds text until the
guards approve it; when a check is due, a small per-stream task runs the guards on it (one check in
flight), and once they pass, the text they approved is *released*: the stream's
:class:`~.writer.Writer` writes it. In hold mode the app's ``send`` waits when too much text is held
(back-pressure, so a slow guard cannot make us buffer without bound); in observe mode never, as without
guards: the text leaves at once and what the guards have not seen yet waits for the next check (one
check takes all of it, so what is kept is what the app writes during one check, which ``guard_timeout``
bounds). In both modes the app's final body waits for every part's final check, so that a late trip
still ends the stream in its format's words. The runner ends the stream only through :class:`GuardEnds`, the
narrow interface the stream gives it.

A sync guard runs in the event loop: keep it fast, or make it ``async`` (``anyio.to_thread.run_sync``
for blocking work). An async guard runs under ``anyio.fail_after(guard_timeout)``.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any, Protocol

import anyio

from .._core import errors
from .._core.dialects.endings import CONTENT_FILTER
from .._core.errors import ErrorInfo, logger
from .._core.guard import Check
from .._core.guarded import GuardedPipeline
from .._core.lifecycle import Lifecycle, Phase
from .._exceptions import Blocked, ConfigError
from .._settings import SCOPE_KEY, StreamingSettings
from .._telemetry.recorder import StreamTelemetry
from .._types import Message
from .backend import asyncio_loop, spawn_child
from .writer import Writer, body_bytes

Guard = Callable[[Check], "Awaitable[None] | None"]
GUARDS_KEY = "guards"  # in the scope's overrides: the request's extra guards

__all__ = ["Guard", "GuardRunner", "guard", "validate"]


def validate(guards: Sequence[Any]) -> tuple[Guard, ...]:
    """The middleware's guards, checked at start-up (the modes are checked with the settings)."""
    for fn in guards:
        if not callable(fn):
            raise ConfigError(f"guards must be callables taking a check, got {fn!r}")
    return tuple(guards)


def guard(scope: MutableMapping[str, Any], fn: Guard) -> None:
    """Add a guard for this one request (call from a route or dependency before responding), beside the
    middleware's own. Not a setting: a function is no plain value, and :func:`override` takes those."""
    if not callable(fn):
        raise ConfigError(f"a guard must be a callable taking a check, got {fn!r}")
    scope.setdefault(SCOPE_KEY, {}).setdefault(GUARDS_KEY, []).append(fn)


def request_guards(scope: MutableMapping[str, Any]) -> list[Guard]:
    """The request's extra guards, taken out of its overrides (which hold plain settings only)."""
    overrides = scope.get(SCOPE_KEY)
    if not overrides or GUARDS_KEY not in overrides:
        return []
    found: list[Guard] = overrides.pop(GUARDS_KEY)
    return found


class GuardEnds(Protocol):
    """What the guard runner may ask of its stream (a weak proxy of it: the stream holds the runner)."""

    def end(self, info: ErrorInfo | None) -> None: ...

    def fail(self, exc: Exception) -> None: ...

    def invalid_output(self) -> ErrorInfo: ...

    def error_id(self) -> str: ...


class GuardRunner:
    __slots__ = (
        "_child",
        "_done",
        "_guards",
        "_overflow_said",
        "_scope",
        "_stopped",
        "ends",
        "life",
        "pipe",
        "settings",
        "telemetry",
        "writer",
    )

    def __init__(
        self,
        life: Lifecycle,
        writer: Writer,
        pipe: GuardedPipeline,
        guards: Sequence[Guard],
        settings: StreamingSettings,
        telemetry: StreamTelemetry | None,
        ends: GuardEnds,
    ) -> None:
        self.life = life
        self.writer = writer
        self.pipe = pipe
        self.settings = settings
        self.telemetry = telemetry
        self.ends = ends
        self._guards = tuple(guards)
        self._child: object | None = None
        self._done: anyio.Event | None = None
        self._scope: anyio.CancelScope | None = None
        self._stopped = False
        pipe.overflow_allowed = settings.guard_failure == "allow"
        self._overflow_said = False

    # -- the app's bodies -----------------------------------------------------------------------------

    def wrap(self, inner: Callable[[Message], Awaitable[None]]) -> Callable[[Message], Awaitable[None]]:
        """The stream's body path with the guards in front (a stage, see :mod:`.stages`): the innermost,
        whose gate hands approved text to the writer's own methods, not to ``inner``."""
        return self.body

    async def body(self, message: Message) -> None:
        body = message.get("body", b"")
        if type(body) is not bytes:
            body = body_bytes(body)
        life, pipe = self.life, self.pipe
        final = not message.get("more_body", False)
        await self.writer.fed(body)
        if pipe.fault:  # the output check ruled the stream out: it ends, with what the guards approved
            self.ends.end(self.ends.invalid_output())
            return
        if pipe.overflowed and not self._overflow_said:
            self._overflowed()
            if life.phase is not Phase.STREAMING:
                return
        if final:
            await self._end_of_body()
            return
        self.kick()
        # Back-pressure, in hold mode only: the check in flight frees room. Observe mode lets the text
        # go at once, so the app never waits for a check; what the guards have not seen yet is held for
        # the next check (one check in flight takes all of it), and only the end waits (_end_of_body).
        while pipe.gate.hold and pipe.gate.full and self._child is not None and life.phase is Phase.STREAMING:
            await self.join()
            self.kick()
        self.writer.wake_by(pipe.deadline())

    async def _end_of_body(self) -> None:
        """Every part's final check, before the stream's end goes out (in the app's task: it is done)."""
        self.pipe.end_of_body()
        if await self._final_checks():
            await self.writer.end_of_body(self.pipe.close)

    async def settle(self) -> None:
        """The app raised: the text it produced before still gets its checks, and what passes goes out
        before the stream's ending, as at the end of its body (hold mode: observe mode let it out
        already). Without this, text the guards had not yet seen was lost with the failure, and a whole
        answer whose app failed in its cleanup lost its tail. The caller bounds it."""
        pipe = self.pipe
        if pipe.gate.hold:
            pipe.end_of_body(failed=True)
            if await self._final_checks():
                await self._write_released()

    async def _final_checks(self) -> bool:
        """Every part's final check, with the check task's own first; whether the stream is still live
        (False: a check tripped and the stream ends from our side, the app cancelled)."""
        life, pipe = self.life, self.pipe
        await self.join()
        while life.phase is Phase.STREAMING:
            check = pipe.gate.next_check()
            if check is None:
                break
            if not await self._run_guards(check):
                return False
        return life.phase is Phase.STREAMING

    # -- the checks, beside the app -------------------------------------------------------------------

    def kick(self) -> None:
        """Start the check task when a check is due and none runs."""
        if self._child is None and not self._stopped and not self.pipe.gate.idle:
            self._done = anyio.Event()
            self._child = spawn_child(self._run, "sse_middleware guard", asyncio_loop())

    async def _run(self) -> None:
        life, pipe = self.life, self.pipe
        try:
            with anyio.CancelScope() as self._scope:
                while not self._stopped and life.phase is Phase.STREAMING:
                    check = pipe.gate.next_check()
                    if check is None or not await self._run_guards(check):
                        break
                    await self._write_released()
        except Exception as exc:  # a bug of ours must never take the server down (a trio system task would)
            ends = self.ends
            ends.end(errors.report(exc, detail=False, error_id=ends.error_id(), client_gone=False))
        finally:
            self._scope = None
            self._child = None
            if self._done is not None:
                self._done.set()

    async def _write_released(self) -> None:
        """What the guards just approved leaves the gate, to the client."""
        try:
            await self.writer.released(self.pipe.release)
        except Exception as exc:  # the server refused our write: the stream failed
            self.ends.fail(exc)
        self.writer.wake_by(self.pipe.deadline())

    async def _run_guards(self, check: Check) -> bool:
        """Run every guard on ``check``; whether the stream goes on."""
        ends, gate, settings, telemetry = self.ends, self.pipe.gate, self.settings, self.telemetry
        started = time.monotonic()
        try:
            for fn in self._guards:
                result = fn(check)
                if inspect.isawaitable(result):
                    with anyio.fail_after(settings.guard_timeout):
                        await result
        except Blocked as exc:
            self._record(started)
            if telemetry is not None:
                telemetry.guard_blocked(exc.code or CONTENT_FILTER)
            gate.failed()
            ends.end(ErrorInfo(CONTENT_FILTER, exc.message, ends.error_id(), exc.code))
            return False
        except Exception as exc:
            self._record(started)
            error_id = ends.error_id()
            if settings.guard_failure == "allow":
                logger.warning("a guard failed; the text goes on (error id %s)", error_id, exc_info=exc)
                if telemetry is not None:
                    telemetry.guard_fault()
                gate.skipped(check)
                return True
            gate.failed()
            if telemetry is not None:
                telemetry.guard_blocked("guard_failure")
            ends.end(errors.report(exc, detail=settings.error_detail, error_id=error_id, client_gone=False))
            return False
        self._record(started)
        gate.passed(check)
        return True

    def _overflowed(self) -> None:
        """An event grew past ``max_event_bytes``: the guards cannot see it whole. Said once; a fault,
        handled by ``guard_failure`` (the pipeline already let it through, or dropped everything)."""
        self._overflow_said = True
        error_id = self.ends.error_id()
        limit = self.settings.max_event_bytes
        if self.pipe.overflow_allowed:
            logger.warning(
                "an event past max_event_bytes=%d went out unchecked by the guards (error id %s)",
                limit,
                error_id,
            )
            if self.telemetry is not None:
                self.telemetry.guard_fault()
            return
        logger.warning(
            "stream ended: an event past max_event_bytes=%d cannot be checked by the guards (error id %s)",
            limit,
            error_id,
        )
        if self.telemetry is not None:
            self.telemetry.guard_blocked("guard_failure")
        self.ends.end(errors.describe(OverflowError(), detail=False, error_id=error_id))  # the generic error

    def _record(self, started: float) -> None:
        if self.telemetry is not None:
            self.telemetry.guard_check(time.monotonic() - started)

    # -- teardown ------------------------------------------------------------------------------------

    async def join(self) -> None:
        if self._done is not None and self._child is not None:
            await self._done.wait()

    def stop(self) -> None:
        self._stopped = True
        if self._scope is not None:
            self._scope.cancel()
