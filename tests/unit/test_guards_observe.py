"""Observe mode lets a whole stream through as without guards, however slow the guard: the checks run
beside the text and never hold the app's ``send`` (hold mode's back-pressure is hold mode's alone). Only
the stream's end waits, for the last checks, so that a late trip still ends it in its format's words.

The guard here holds every check until the client has received the whole text: it can only return if
nothing waits for it. Killing mutation: the back-pressure loop in ``GuardRunner.body`` applied in observe
mode too (drop ``pipe.gate.hold and``): after 4 x ``coalesce_max_bytes`` of unchecked text the app's send
waits for the check in flight, which waits for text that never comes, until ``guard_timeout`` trips it.
The control is hold mode under the same guard: no text reaches the client before a check passes.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from sse_middleware import StreamingMiddleware, StreamingSettings
from sse_middleware._core.guard import Check

from ..support.harness import Wire, scope
from .test_guards import App, _text

pytestmark = pytest.mark.anyio

TOKENS = [f"word{i} " for i in range(200)]  # 1.4 KB: over 20 x the back-pressure limit below
EVERYTHING = "".join(TOKENS)


async def serve_until_delivered(mode: str, guard_timeout: float) -> tuple[Wire, list[Check]]:
    wire = Wire()
    delivered = anyio.Event()
    checks: list[Check] = []
    real_send = wire.send

    async def send(message: Any) -> None:
        await real_send(message)
        if not delivered.is_set() and EVERYTHING in _text(wire):
            delivered.set()

    async def slow(check: Check) -> None:  # each check waits for the client to hold the whole text
        checks.append(check)
        await delivered.wait()

    settings = StreamingSettings(
        telemetry=False, guard_mode=mode, coalesce_max_bytes=64, guard_timeout=guard_timeout
    )
    middleware = StreamingMiddleware(App(TOKENS, gap=0), settings, guards=[slow])
    with anyio.fail_after(30):
        await middleware(scope(), wire.receive, send)
    return wire, checks


async def test_observe_lets_a_whole_stream_through_under_a_slow_guard(anyio_backend: str) -> None:
    wire, checks = await serve_until_delivered("observe", guard_timeout=10)
    assert _text(wire) == EVERYTHING
    assert wire.events()[-1].data == "[DONE]" and b'"error"' not in wire.data  # ended as the app ended it
    assert "".join(c.new for c in checks) == EVERYTHING  # and the guard saw all of it


async def test_control_hold_mode_holds_the_text_for_the_same_guard(anyio_backend: str) -> None:
    wire, checks = await serve_until_delivered("hold", guard_timeout=0.5)
    assert _text(wire) == "" and b'"error"' in wire.data  # the first check timed out: a guard fault
    assert len(checks) == 1
