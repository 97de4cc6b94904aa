"""Where a span of ours hangs in the trace: under the span current when the request reached us, or, with
none, under the W3C context its headers carry (then we are the server span)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import SpanKind

_Headers = Iterable[tuple[bytes, bytes]]


class _HeaderGetter(Getter[_Headers]):
    """The request's ASGI headers as a propagator's carrier, read where they are: a propagator asks for
    two or three names, so a scan of the list for each beats building a dict of every header."""

    def get(self, carrier: _Headers, key: str) -> list[str] | None:
        try:
            name = key.encode("latin-1")
        except UnicodeEncodeError:  # no header is named so
            return None
        found = None
        for k, value in carrier:  # a loop, not a comprehension: most names are not there at all
            if k == name:
                if found is None:
                    found = [value.decode("latin-1")]
                else:
                    found.append(value.decode("latin-1"))  # repeated ones (tracestate) kept apart
        return found

    def keys(self, carrier: _Headers) -> list[str]:
        return list(dict.fromkeys(k.decode("latin-1") for k, _ in carrier))


_GETTER: Final = _HeaderGetter()


def parent_context(scope: Mapping[str, Any], ctx: Context) -> tuple[Context, SpanKind]:
    """The context to start our span in, and its kind: INTERNAL under the span current in ``ctx`` (e.g.
    the one opentelemetry-instrumentation-asgi opened outside us), else SERVER, continuing the context
    extracted from the request headers (repeated ones, such as ``tracestate``, kept apart)."""
    if ctx and trace.get_current_span(ctx).get_span_context().is_valid:  # an empty one holds no span
        return ctx, SpanKind.INTERNAL
    return propagate.extract(scope.get("headers") or (), ctx, _GETTER), SpanKind.SERVER
