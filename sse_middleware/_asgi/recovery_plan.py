"""What a stream's recovery is made from, at its response's start: the body a re-run can replay, the
sans-I/O :class:`~.._core.recovery.Recoverer` its settings ask for, and what recovery may do to the app's
current run (:class:`RunControl`). :class:`.recovery.Recovering` is made from the :class:`Plan`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from .._core import headers
from .._core.errors import logger
from .._core.recovery import Recoverer
from .._settings import StreamingSettings
from .._types import Message, Scope

_UNRECOVERABLE: set[str] = set()  # routes already logged as not recoverable (their body is not held)


class RunControl(Protocol):
    """What recovery may do to the app's current run (the responder's cancel scope of it)."""

    def cancel(self) -> None: ...

    def start_within(self, seconds: float) -> None:
        """Cancel the run unless its response starts within ``seconds``."""

    def started(self) -> None:
        """The run's response started: no deadline of :meth:`start_within` is left."""


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
    run: RunControl


def plan(
    settings: StreamingSettings,
    scope: Scope,
    start: Message,
    body: bytes | None,
    run: RunControl,
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
        prompt=settings.recover_prompt,
        models=settings.recover_models,
    )
    return Plan(recoverer, body, scope, media_of(start.get("headers", ())), run)


def media_of(found: Any) -> bytes:
    for name, value in found:
        if name.lower() == b"content-type":
            return bytes(value).split(b";")[0].strip().lower()
    return b""
