"""Where a span of ours hangs in the trace: under the span current when the request reached us, or, with
none, under the W3C context its headers carry (then we are the server span)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind


def parent_context(scope: Mapping[str, Any], ctx: Context) -> tuple[Context, SpanKind]:
    """The context to start our span in, and its kind: INTERNAL under the span current in ``ctx`` (e.g.
    the one opentelemetry-instrumentation-asgi opened outside us), else SERVER, continuing the context
    extracted from the request headers (repeated ones, such as ``tracestate``, kept apart)."""
    if trace.get_current_span(ctx).get_span_context().is_valid:
        return ctx, SpanKind.INTERNAL
    carrier: dict[str, list[str]] = {}
    for key, value in scope.get("headers") or ():
        carrier.setdefault(key.decode("latin-1"), []).append(value.decode("latin-1"))
    return propagate.extract(carrier, ctx), SpanKind.SERVER
