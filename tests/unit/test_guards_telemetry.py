"""Guards in telemetry, with the in-memory OpenTelemetry SDK: the span says how many checks ran, their
time, whether and why the stream was blocked (``finish_reasons`` gets ``content_filter``); the guard-time
histogram and the blocked counter. A blocked stream is no server error (status unset); a guard's fault
that fails closed is one."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from sse_middleware import Blocked, Check, StreamingMiddleware, StreamingSettings

from ..support.harness import serve
from ..support.otel import Otel
from .test_guards import App, _blocker

pytestmark = pytest.mark.anyio


async def _span(otel: Otel, guards: list[Any], **settings: Any) -> dict[str, Any]:
    """The attributes (and status) of the span of one guarded stream of App."""
    await serve(
        StreamingMiddleware(
            App(),
            StreamingSettings(**settings),
            guards=guards,
            tracer_provider=otel.tp,
            meter_provider=otel.mp,
        )
    )
    (span,) = otel.ours()
    otel.exporter.clear()
    return {"status": span.status.status_code, **(span.attributes or {})}


async def test_a_passing_guard_counts_its_checks_and_time(otel: Otel) -> None:
    control = await _span(otel, [])
    assert "sse_middleware.guard.checks" not in control  # no guards, no guard attributes
    seen: list[Check] = []
    attrs = await _span(otel, [_blocker("nothing", seen)])
    assert attrs["sse_middleware.guard.checks"] == len(seen) > 0
    assert attrs["sse_middleware.guard.seconds"] >= 0 and attrs["sse_middleware.guard.faults"] == 0
    assert attrs["sse_middleware.guard.blocked"] is False and "sse_middleware.guard.reason" not in attrs
    assert "content_filter" not in attrs.get("gen_ai.response.finish_reasons", ())
    (histogram,) = otel.points("sse_middleware.guard.duration")
    assert histogram.count == len(seen)
    assert otel.points("sse_middleware.guard.blocked") == []


async def test_a_blocked_stream_says_why_and_is_no_error(otel: Otel) -> None:
    attrs = await _span(otel, [_blocker("secret")])
    assert attrs["sse_middleware.guard.blocked"] is True
    assert attrs["sse_middleware.guard.reason"] == "word"  # the guard's code
    assert "content_filter" in attrs["gen_ai.response.finish_reasons"]
    # A content filter doing its job is not a failure of the server: no error status, no error.type.
    assert attrs["status"] is StatusCode.UNSET and "error.type" not in attrs
    (blocked,) = otel.points("sse_middleware.guard.blocked")
    assert blocked.value == 1 and blocked.attributes["sse_middleware.guard.reason"] == "word"
    (duration,) = otel.points("gen_ai.server.request.duration")
    assert "error.type" not in duration.attributes


async def test_a_guard_fault_that_fails_closed_is_an_error(otel: Otel) -> None:
    def broken(check: Check) -> None:
        raise ValueError("internal")

    attrs = await _span(otel, [broken])
    assert attrs["status"] is StatusCode.ERROR and attrs["error.type"]
    assert attrs["sse_middleware.guard.reason"] == "guard_failure"
    assert "content_filter" not in attrs.get("gen_ai.response.finish_reasons", ())
    (blocked,) = otel.points("sse_middleware.guard.blocked")
    assert blocked.attributes["sse_middleware.guard.reason"] == "guard_failure"


async def test_an_allowed_fault_is_counted_and_the_text_goes_on(otel: Otel) -> None:
    calls: list[int] = []

    def flaky(check: Check) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("once")

    attrs = await _span(otel, [flaky], guard_failure="allow")
    assert attrs["sse_middleware.guard.faults"] == 1 and attrs["sse_middleware.guard.blocked"] is False
    assert attrs["status"] is StatusCode.UNSET


async def test_a_blocked_code_free_guard_reports_content_filter(otel: Otel) -> None:
    def blocks(check: Check) -> None:
        if "secret" in check.new:
            raise Blocked("No.")

    attrs = await _span(otel, [blocks])
    assert attrs["sse_middleware.guard.reason"] == "content_filter"
