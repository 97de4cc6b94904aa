"""Where a span of ours hangs in the trace: under the span current when the request reached us, or, with
none, under the W3C context its headers carry (then we are the server span)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.trace import SpanKind

# The global propagator last asked, and the header names it reads as ASGI spells them. Its ``fields``
# make new sets on every call (a composite's, a union of its parts'): dearer than the extraction they
# would spare, so they are read once per propagator set as the global one.
_names: tuple[TextMapPropagator | None, frozenset[bytes]] = (None, frozenset())


def parent_context(scope: Mapping[str, Any], ctx: Context) -> tuple[Context, SpanKind]:
    """The context to start our span in, and its kind: INTERNAL under the span current in ``ctx`` (e.g.
    the one opentelemetry-instrumentation-asgi opened outside us), else SERVER, continuing the context
    extracted from the request headers (repeated ones, such as ``tracestate``, kept apart). A request
    with none of the headers the global propagator reads (most, untraced) is not extracted from."""
    if trace.get_current_span(ctx).get_span_context().is_valid:
        return ctx, SpanKind.INTERNAL
    headers = scope.get("headers") or ()
    names = _read_by(propagate.get_global_textmap())
    for key, _ in headers:
        if key in names:
            break
    else:
        return ctx, SpanKind.SERVER
    carrier: dict[str, list[str]] = {}
    for key, value in headers:
        carrier.setdefault(key.decode("latin-1"), []).append(value.decode("latin-1"))
    return propagate.extract(carrier, ctx), SpanKind.SERVER


def _read_by(propagator: TextMapPropagator) -> frozenset[bytes]:
    """The header names ``propagator`` reads: each field as it spells it, and in lower case (ASGI's)."""
    global _names
    known, names = _names
    if known is not propagator:
        fields = propagator.fields
        spellings = {*fields, *(field.lower() for field in fields)}
        names = frozenset(name.encode("latin-1", "replace") for name in spellings)
        _names = (propagator, names)
    return names
