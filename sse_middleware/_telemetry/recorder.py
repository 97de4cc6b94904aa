"""One span and a few histograms per *stream*, through ``opentelemetry-api`` only: the instruments,
and the span each stream opens. What a stream records is :mod:`.stream`; names follow the GenAI
semantic conventions (:mod:`.semconv`); how the gaps are kept and summarised is :mod:`.gaps`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final

from opentelemetry import context, metrics, propagate, trace
from opentelemetry.trace import SpanKind
from opentelemetry.util.types import AttributeValue

from . import semconv as sc
from .annotate import SCOPE_KEY as _NOTES
from .request_model import BodyPeek
from .stream import StreamTelemetry

__all__ = ["StreamTelemetry", "Telemetry"]

try:
    _VERSION = version("sse_middleware")
except PackageNotFoundError:  # a source tree, not installed
    _VERSION = ""


# The API's stand-ins when no SDK is installed (the proxies until a global provider is set).
_UNSET: Final = frozenset(
    {"ProxyTracerProvider", "NoOpTracerProvider", "_ProxyMeterProvider", "NoOpMeterProvider"}
)


class Telemetry:
    """Made once per middleware: the tracer and instruments, and :meth:`start` for each stream.

    A provider of ``None`` means the global one: the API hands out proxies that resolve whenever it is
    set, so ``opentelemetry-instrument`` works even if it sets it after this object exists.

    ``gap_sample_every``: the SDK's ``Histogram.record`` costs ~10 us, more than our whole hot path, so
    one observation per gap dominates the cost. N > 1 records every Nth gap from a random offset per
    stream: the distribution stays unbiased, but the histogram's count is then ~1/N of the gaps.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        *,
        slo_ttft: float = 0.0,
        slo_tpot: float = 0.0,
        gap_sample_every: int = 1,
    ) -> None:
        self.tracer = trace.get_tracer("sse_middleware", _VERSION or None, tracer_provider)
        meter = metrics.get_meter("sse_middleware", _VERSION, meter_provider)

        def hist(name: str, description: str, buckets: Sequence[float]) -> metrics.Histogram:
            return meter.create_histogram(name, "s", description, explicit_bucket_boundaries_advisory=buckets)

        self.ttft = hist(sc.METRIC_TTFT, "Time to first content chunk, successful streams.", sc.TTFT_BUCKETS)
        self.tpot = hist(
            sc.METRIC_TPOT, "Time per output token after the first, successful streams.", sc.TPOT_BUCKETS
        )
        self.duration = hist(sc.METRIC_DURATION, "Request arrival to end of stream.", sc.DURATION_BUCKETS)
        self.inter_chunk = hist(
            sc.METRIC_INTER_CHUNK, "Gaps between consecutive content chunks.", sc.INTER_CHUNK_BUCKETS
        )
        self.slo_violations = meter.create_counter(
            sc.METRIC_SLO_VIOLATIONS, "{stream}", "Streams that missed a TTFT or TPOT objective."
        )
        self.slo_ttft, self.slo_tpot = slo_ttft, slo_tpot
        self.gap_sample_every = max(1, gap_sample_every)
        self._providers = (tracer_provider, meter_provider)

    def _configured(self) -> bool:
        """Whether anything would receive a span or a measurement. Asked per stream, not once: a global
        provider may be set after this object exists (opentelemetry-instrument, tests)."""
        tracer_provider, meter_provider = self._providers
        tp = trace.get_tracer_provider() if tracer_provider is None else tracer_provider
        mp = metrics.get_meter_provider() if meter_provider is None else meter_provider
        return type(tp).__name__ not in _UNSET or type(mp).__name__ not in _UNSET

    def start(
        self,
        scope: Mapping[str, Any],
        *,
        start_mono: float,
        start_ns: int,
        body: BodyPeek | None = None,
        mark_parent: bool = True,
    ) -> StreamTelemetry | None:
        """Open the stream's span, dated from request arrival (``start_ns``); None when OpenTelemetry is
        not set up at all (no SDK behind either provider), so an app without it pays nothing per token.

        A child (INTERNAL) of the current span, e.g. the one opentelemetry-instrumentation-asgi opened
        outside us; else we *are* the server span and continue the W3C context in the request headers.
        ``body``: what the app read of its request body, for ``gen_ai.request.model`` (looked at only
        here, once OpenTelemetry is known to be set up); :func:`~.annotate.annotate` overrides it.
        ``mark_parent``: if the stream fails, mark the span we are a child of too (the HTTP server span
        of opentelemetry-instrumentation-asgi, which would otherwise stay UNSET with its 200 status).
        """
        if not self._configured():
            return None
        route = getattr(scope.get("route"), "path", None)
        route = route if isinstance(route, str) and route else None
        attrs: dict[str, AttributeValue] = {
            sc.HTTP_REQUEST_METHOD: scope.get("method", "GET"),
            sc.URL_PATH: scope.get("path", ""),
            sc.GEN_AI_REQUEST_STREAM: True,
        }
        if route:
            attrs[sc.HTTP_ROUTE] = route
        notes = scope.get(_NOTES) or {}
        model = notes.get("request_model") or (body.model() if body is not None else None)
        if model:
            attrs[sc.GEN_AI_REQUEST_MODEL] = model
        ctx = context.get_current()
        kind = SpanKind.INTERNAL
        current = trace.get_current_span(ctx)
        if not current.get_span_context().is_valid:
            kind = SpanKind.SERVER
            carrier: dict[str, list[str]] = {}  # repeated headers (tracestate, baggage) kept apart
            for key, value in scope.get("headers") or ():
                carrier.setdefault(key.decode("latin-1"), []).append(value.decode("latin-1"))
            ctx = propagate.extract(carrier, ctx)
        span = self.tracer.start_span(
            f"stream {route}" if route else "stream", ctx, kind, attrs, start_time=start_ns
        )
        # The span we are a child of, to mark as failed if we fail (one that records: not a remote one).
        mark = kind is SpanKind.INTERNAL and mark_parent and current.is_recording()
        return StreamTelemetry(
            self, span, scope, route, model or "", current if mark else None, start_mono, start_ns
        )
