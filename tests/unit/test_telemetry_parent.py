"""The span's parent: a request with none of the headers the global propagator reads is not extracted from,
and a configured propagator's own header (whatever its name) still is. The real SDK throughout; the global
propagator is set for one test and restored after it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import (
    CarrierT,
    Getter,
    Setter,
    TextMapPropagator,
    default_getter,
    default_setter,
)
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from ..support.otel import Otel
from .test_telemetry import NS0, T0, TRACEPARENT, scope

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
SPAN_ID = 0x00F067AA0BA902B7


class TokenPropagator(TextMapPropagator):
    """A house propagator: the caller's trace id and span id in one header of its own, ``X-Trace-Token``
    (spelled as its ``fields`` name it: mixed case, where ASGI's header names are lower case)."""

    def __init__(self) -> None:
        self.carriers: list[Any] = []

    def extract(
        self, carrier: CarrierT, context: Context | None = None, getter: Getter[CarrierT] = default_getter
    ) -> Context:
        self.carriers.append(carrier)
        found = getter.get(carrier, "x-trace-token")
        if not found:
            return context if context is not None else Context()
        trace_id, span_id = (int(part, 16) for part in found[0].split(":"))
        parent = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
        return trace.set_span_in_context(NonRecordingSpan(parent), context)

    def inject(
        self, carrier: CarrierT, context: Context | None = None, setter: Setter[CarrierT] = default_setter
    ) -> None:
        raise NotImplementedError

    @property
    def fields(self) -> set[str]:
        return {"X-Trace-Token"}


@pytest.fixture
def house() -> Iterator[TokenPropagator]:
    """TokenPropagator as the global propagator, for one test."""
    before = propagate.get_global_textmap()
    propagator = TokenPropagator()
    propagate.set_global_textmap(propagator)
    try:
        yield propagator
    finally:
        propagate.set_global_textmap(before)


def one_span(otel: Otel, headers: list[tuple[bytes, bytes]]) -> Any:
    otel.tel().start(scope(headers=headers), start_mono=T0, start_ns=NS0).end(T0 + 1)
    *_, span = otel.spans()
    return span


def test_a_configured_propagators_own_header_is_extracted(otel: Otel) -> None:
    """A header the default propagator does not know continues the trace once its propagator is set;
    a stream before that, under the default one, does not blind the check to the new propagator."""
    token = f"{TRACE_ID:032x}:{SPAN_ID:016x}".encode()
    assert one_span(otel, [(b"x-trace-token", token)]).parent is None  # W3C's propagator ignores it
    before = propagate.get_global_textmap()
    propagator = TokenPropagator()
    propagate.set_global_textmap(propagator)
    try:
        span = one_span(otel, [(b"host", b"x"), (b"x-trace-token", token)])
    finally:
        propagate.set_global_textmap(before)
    assert [carrier["x-trace-token"] for carrier in propagator.carriers] == [[token.decode()]]
    assert span.kind is SpanKind.SERVER
    assert span.parent is not None and span.parent.is_remote
    assert span.context.trace_id == TRACE_ID and span.parent.span_id == SPAN_ID


def test_a_request_with_none_of_its_headers_is_not_extracted(otel: Otel, house: TokenPropagator) -> None:
    span = one_span(otel, [(b"host", b"x"), (b"traceparent", TRACEPARENT.encode())])
    assert house.carriers == []  # traceparent is not this propagator's
    assert span.kind is SpanKind.SERVER and span.parent is None
