"""Guards, the I/O side: checks run beside the app, never inside its ``send``.

A stream with guards gets a :class:`GuardRunner`. The app's bodies go into the stream's
:class:`~.._core.guarded.GuardedPipeline`; when a check is due, a small per-stream task runs the guards on
it (one check in flight), and once they pass, the text they approved goes out under the send gate. The
app's ``send`` waits only when too much text is held (back-pressure, so a slow guard cannot make us
buffer without bound) and at its final body, whose end waits for every part's final check.

A sync guard runs in the event loop: keep it fast, or make it ``async`` (``anyio.to_thread.run_sync``
for blocking work). An async guard runs under ``anyio.fail_after(guard_timeout)``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from .._core import errors
from .._core.dialects.endings import CONTENT_FILTER
from .._core.errors import ErrorInfo, logger
from .._core.guard import Check
from .._core.guarded import GuardedPipeline
from .._core.lifecycle import Phase
from .._exceptions import Blocked, ConfigError
from .._settings import SCOPE_KEY
from .._types import Message
from .watcher import spawn_child

if TYPE_CHECKING:
    from .stream import Stream

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


class GuardRunner:
    __slots__ = (
        "_child",
        "_done",
        "_guards",
        "_overflow_said",
        "_scope",
        "_stopped",
        "blocked",
        "pipe",
        "stream",
    )

    def __init__(self, stream: Stream, pipe: GuardedPipeline, guards: Sequence[Guard]) -> None:
        self.stream = stream
        self.pipe = pipe
        self._guards = tuple(guards)
        self._child: object | None = None
        self._done: anyio.Event | None = None
        self._scope: anyio.CancelScope | None = None
        self._stopped = False
        self.blocked: str | None = None  # why, once tripped
        pipe.overflow_allowed = stream.settings.guard_failure == "allow"
        self._overflow_said = False

    # -- the app's bodies -----------------------------------------------------------------------------

    async def body(self, message: Message, body: bytes) -> None:
        stream, pipe = self.stream, self.pipe
        final = not message.get("more_body", False)
        await stream.gate.take()
        try:
            now = stream.clocks.last_app = time.monotonic()
            out = pipe.feed(body, now) if body else []
            if out:
                await stream.deliver(b"".join(out), now)
        finally:
            stream.gate.release()
        if pipe.fault:  # the output check ruled the stream out: it ends, with what the guards approved
            stream.end(stream.invalid_output())
            return
        if pipe.overflowed and not self._overflow_said:
            self._overflowed()
            if stream.life.phase is not Phase.STREAMING:
                return
        if final:
            await self._end_of_body()
            return
        self.kick()
        while pipe.gate.full and self._child is not None and stream.life.phase is Phase.STREAMING:
            await self.join()  # back-pressure: the check in flight frees room
            self.kick()
        deadline = pipe.deadline()
        if deadline is not None:
            stream.watcher.want(deadline)

    async def _end_of_body(self) -> None:
        """Every part's final check, before the stream's end goes out (in the app's task: it is done)."""
        stream, pipe = self.stream, self.pipe
        pipe.end_of_body()
        await self.join()
        while stream.life.phase is Phase.STREAMING:
            check = pipe.gate.next_check()
            if check is None:
                break
            if not await self._check(check):
                return  # tripped: the stream ends from our side (the app is cancelled)
        if stream.life.phase is not Phase.STREAMING:
            return
        await stream.gate.take()
        try:
            await stream.final_body(b"".join(pipe.close()))
        finally:
            stream.gate.release()

    # -- the checks, beside the app -------------------------------------------------------------------

    def kick(self) -> None:
        """Start the check task when a check is due and none runs."""
        if self._child is None and not self._stopped and not self.pipe.gate.idle:
            self._done = anyio.Event()
            self._child = spawn_child(self._run, "sse_middleware guard", asyncio._get_running_loop())

    async def _run(self) -> None:
        stream, pipe = self.stream, self.pipe
        try:
            with anyio.CancelScope() as self._scope:
                while not self._stopped and stream.life.phase is Phase.STREAMING:
                    check = pipe.gate.next_check()
                    if check is None or not await self._check(check):
                        break
                    await self._release()
        except Exception as exc:  # a bug of ours must never take the server down (a trio system task would)
            stream.end(errors.report(exc, detail=False, error_id=stream.error_id(), client_gone=False))
        finally:
            self._scope = None
            self._child = None
            if self._done is not None:
                self._done.set()

    async def _release(self) -> None:
        stream = self.stream
        await stream.gate.take()
        try:
            if stream.life.phase is Phase.STREAMING:
                now = time.monotonic()
                frames = self.pipe.release(now)
                if frames:
                    try:
                        await stream.deliver(b"".join(frames), now)
                    except Exception as exc:  # the server refused our write: the stream failed
                        stream.fail(exc)
        finally:
            stream.gate.release()
        deadline = self.pipe.deadline()
        if deadline is not None:
            stream.watcher.want(deadline)

    async def _check(self, check: Check) -> bool:
        """Run every guard on ``check``; whether the stream goes on."""
        stream, gate = self.stream, self.pipe.gate
        settings = stream.settings
        started = time.monotonic()
        try:
            for fn in self._guards:
                result = fn(check)
                if inspect.isawaitable(result):
                    with anyio.fail_after(settings.guard_timeout):
                        await result
        except Blocked as exc:
            self._record(started)
            self.blocked = exc.code or CONTENT_FILTER
            if stream.telemetry is not None:
                stream.telemetry.guard_blocked(self.blocked)
            gate.failed()
            stream.end(ErrorInfo(CONTENT_FILTER, exc.message, stream.error_id(), exc.code))
            return False
        except Exception as exc:
            self._record(started)
            error_id = stream.error_id()
            if settings.guard_failure == "allow":
                logger.warning("a guard failed; the text goes on (error id %s)", error_id, exc_info=exc)
                if stream.telemetry is not None:
                    stream.telemetry.guard_fault()
                gate.skipped(check)
                return True
            gate.failed()
            self.blocked = "guard_failure"
            if stream.telemetry is not None:
                stream.telemetry.guard_blocked(self.blocked)
            stream.end(errors.report(exc, detail=settings.error_detail, error_id=error_id, client_gone=False))
            return False
        self._record(started)
        gate.passed(check)
        return True

    def _overflowed(self) -> None:
        """An event grew past ``max_event_bytes``: the guards cannot see it whole. Said once; a fault,
        handled by ``guard_failure`` (the pipeline already let it through, or dropped everything)."""
        self._overflow_said = True
        stream = self.stream
        error_id = stream.error_id()
        limit = stream.settings.max_event_bytes
        if self.pipe.overflow_allowed:
            logger.warning(
                "an event past max_event_bytes=%d went out unchecked by the guards (error id %s)",
                limit,
                error_id,
            )
            if stream.telemetry is not None:
                stream.telemetry.guard_fault()
            return
        logger.warning(
            "stream ended: an event past max_event_bytes=%d cannot be checked by the guards (error id %s)",
            limit,
            error_id,
        )
        self.blocked = "guard_failure"
        if stream.telemetry is not None:
            stream.telemetry.guard_blocked(self.blocked)
        stream.end(errors.describe(OverflowError(), detail=False, error_id=error_id))  # the generic error

    def _record(self, started: float) -> None:
        telemetry = self.stream.telemetry
        if telemetry is not None:
            telemetry.guard_check(time.monotonic() - started)

    # -- teardown ------------------------------------------------------------------------------------

    async def join(self) -> None:
        if self._done is not None and self._child is not None:
            await self._done.wait()

    def stop(self) -> None:
        self._stopped = True
        if self._scope is not None:
            self._scope.cancel()
