"""Telemetry of resumes: a span per resumed response, *linked* to the original stream's span (a different
request, often on another host, so a link rather than a parent), and a counter of resume requests by
outcome. Our own names, in the ``sse_middleware.`` namespace of :mod:`.semconv` (the conventions define
nothing for resumes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from opentelemetry import context, metrics, trace
from opentelemetry.trace import Link, Span, SpanContext, TraceFlags
from opentelemetry.util.types import AttributeValue

from . import semconv as sc
from .parent import parent_context

METRIC_RESUMES: Final = "sse_middleware.resumes"
"""Counter of requests that carried one of our ``Last-Event-ID`` values, by outcome."""
RESUME_OUTCOME: Final = "sse_middleware.resume.outcome"
RESUME_POSITION: Final = "sse_middleware.resume.position"  # the client's position when it came back
RESUME_EVENTS: Final = "sse_middleware.resume.events"  # events the resumed response delivered
RESUME_COMPLETE: Final = "sse_middleware.resume.complete"  # it reached the original's end marker
RESUME_UNAVAILABLE: Final = "sse_middleware.resume.unavailable"
"""Set on an *original* stream's span when its log could not be opened (store down): no resume for it."""

# Outcomes.
RESUMED: Final = "resumed"  # replayed and followed
DELIVERED: Final = "delivered"  # the client already had the whole ended stream: 204, no reconnect
UNKNOWN: Final = "unknown"  # no such log (expired, never ours, trimmed past, cut): the app answers
REFUSED: Final = "refused"  # another caller: the app answers, as to a new request
UNAVAILABLE: Final = "unavailable"  # the store failed: the app answers


def traceparent(ctx: SpanContext | None) -> str:
    """A span context as a W3C ``traceparent`` value, the form a store keeps; "" when there is none."""
    if ctx is None or not ctx.is_valid:
        return ""
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def link_to(value: str) -> Link | None:
    parts = value.split("-")
    if len(parts) != 4:
        return None
    try:
        ctx = SpanContext(int(parts[1], 16), int(parts[2], 16), True, TraceFlags(int(parts[3], 16)))
    except ValueError:
        return None
    return Link(ctx) if ctx.is_valid else None


class ResumeTelemetry:
    """Per middleware. The tracer and the counter are taken at the first resume request, not when the
    middleware is built: most apps never see one, and a global provider may be set in between."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self._providers = (tracer_provider, meter_provider)
        self._tracer: trace.Tracer | None = None
        self._resumes: metrics.Counter | None = None

    @property
    def tracer(self) -> trace.Tracer:
        if self._tracer is None:
            self._tracer = trace.get_tracer("sse_middleware", None, self._providers[0])
        return self._tracer

    @property
    def resumes(self) -> metrics.Counter:
        if self._resumes is None:
            meter = metrics.get_meter("sse_middleware", "", self._providers[1])
            self._resumes = meter.create_counter(
                METRIC_RESUMES, "{request}", "Requests that asked to resume a stream, by outcome."
            )
        return self._resumes

    def count(self, outcome: str) -> None:
        self.resumes.add(1, {RESUME_OUTCOME: outcome})

    def start(self, scope: Mapping[str, Any], link: str, position: int) -> Span:
        """The resumed response's span: a child of the current span if any (a tracing middleware outside
        us), else a server span continuing the request's W3C context; linked to the original."""
        ctx, kind = parent_context(scope, context.get_current())
        attributes: dict[str, AttributeValue] = {
            sc.HTTP_REQUEST_METHOD: scope.get("method", "GET"),
            sc.URL_PATH: scope.get("path", ""),
            RESUME_POSITION: position,
        }
        original = link_to(link)
        return self.tracer.start_span(
            "stream resume", ctx, kind, attributes, links=[original] if original else None
        )
