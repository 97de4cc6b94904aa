"""One span and a few histograms per *stream*, through ``opentelemetry-api`` only: the instruments, made
once per middleware, and the recorder each stream gets. What a stream records is :mod:`.stream`; names
follow the GenAI semantic conventions (:mod:`.semconv`); how the gaps are kept is :mod:`.gaps`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final

from opentelemetry import context, metrics, trace

from . import semconv as sc
from .annotate import SCOPE_KEY as _NOTES
from .instruments import Instruments
from .request_model import BodyPeek
from .stream import StreamTelemetry

__all__ = ["Instruments", "StreamTelemetry", "Telemetry"]

try:
    _VERSION = version("sse_middleware")
except PackageNotFoundError:  # a source tree, not installed
    _VERSION = ""


# The API's stand-ins when no SDK is installed (the proxies until a global provider is set).
_UNSET: Final = frozenset(
    {"ProxyTracerProvider", "NoOpTracerProvider", "_ProxyMeterProvider", "NoOpMeterProvider"}
)


class Telemetry:
    """Made once per middleware; :meth:`start` for each stream.

    Nothing is asked of OpenTelemetry until a stream starts: the first stream that finds an SDK behind
    either provider makes the tracer and the instruments, once for the middleware's life. Before that,
    each stream asks again (cheaply), because a global provider may be set after this object exists
    (``opentelemetry-instrument``, an app's own set-up); once set, the API never lets it change. A
    provider of ``None`` means the global one; with none set by then, the tracer is the API's proxy,
    which follows the global provider whenever it is set.

    ``gap_sample_every``: the per-gap histogram records every Nth gap from a random phase per stream,
    since one SDK ``Histogram.record`` costs more than our whole hot path (see the README).
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
        self._providers = (tracer_provider, meter_provider)
        self._slo = (slo_ttft, slo_tpot)
        self._every = max(1, gap_sample_every)
        self._instruments: Instruments | None = None
        self._never = False  # both providers given and neither has an SDK: no need to ask again

    def instruments(self) -> Instruments | None:
        """The tracer and instruments, made at the first call that finds OpenTelemetry set up."""
        if self._instruments is None and not self._never:
            tracer_provider, meter_provider = self._providers
            tp = trace.get_tracer_provider() if tracer_provider is None else tracer_provider
            mp = metrics.get_meter_provider() if meter_provider is None else meter_provider
            if type(tp).__name__ not in _UNSET or type(mp).__name__ not in _UNSET:
                self._instruments = _make(tracer_provider, meter_provider, self._slo, self._every)
            else:
                self._never = tracer_provider is not None and meter_provider is not None
        return self._instruments

    def start(
        self,
        scope: Mapping[str, Any],
        *,
        start_mono: float,
        start_ns: int,
        body: BodyPeek | None = None,
        mark_parent: bool = True,
    ) -> StreamTelemetry | None:
        """A recorder for a stream whose request arrived at ``start_mono`` / ``start_ns``; None when
        OpenTelemetry is not set up at all (no SDK behind either provider), so an app without it pays
        nothing per token.

        Per stream this only takes the current context: the span is made when the stream ends (dated
        from the request's arrival), or earlier if something asks for its trace id or its context.
        ``body``: what the app read of its request body, for ``gen_ai.request.model``, looked at here
        so the shell can let it go; :func:`~.annotate.annotate` overrides it. ``mark_parent``: if the
        stream fails, mark the span we are a child of too (the HTTP server span of
        opentelemetry-instrumentation-asgi, which would otherwise stay UNSET with its 200 status).
        """
        instruments = self._instruments or self.instruments()
        if instruments is None:
            return None
        notes = scope.get(_NOTES)
        model = notes.get("request_model") if notes else None
        if not model and body is not None:
            model = body.model()
        return StreamTelemetry(
            instruments, scope, context.get_current(), mark_parent, model or "", start_mono, start_ns
        )


def _make(
    tracer_provider: trace.TracerProvider | None,
    meter_provider: metrics.MeterProvider | None,
    slo: tuple[float, float],
    every: int,
) -> Instruments:
    tracer = trace.get_tracer("sse_middleware", _VERSION or None, tracer_provider)
    meter = metrics.get_meter("sse_middleware", _VERSION, meter_provider)

    def hist(name: str, description: str, buckets: Sequence[float]) -> metrics.Histogram:
        return meter.create_histogram(name, "s", description, explicit_bucket_boundaries_advisory=buckets)

    return Instruments(
        tracer=tracer,
        ttft=hist(sc.METRIC_TTFT, "Time to first content chunk, successful streams.", sc.TTFT_BUCKETS),
        tpot=hist(
            sc.METRIC_TPOT, "Time per output token after the first, successful streams.", sc.TPOT_BUCKETS
        ),
        duration=hist(sc.METRIC_DURATION, "Request arrival to end of stream.", sc.DURATION_BUCKETS),
        inter_chunk=hist(
            sc.METRIC_INTER_CHUNK, "Gaps between consecutive content chunks.", sc.INTER_CHUNK_BUCKETS
        ),
        slo_violations=meter.create_counter(
            sc.METRIC_SLO_VIOLATIONS, "{stream}", "Streams that missed a TTFT or TPOT objective."
        ),
        guard_time=hist(sc.METRIC_GUARD_TIME, "One check by a stream's guards.", sc.INTER_CHUNK_BUCKETS),
        guard_blocked=meter.create_counter(
            sc.METRIC_GUARD_BLOCKED, "{stream}", "Streams a guard ended (blocked, or a guard's fault)."
        ),
        recoveries=meter.create_counter(
            sc.METRIC_RECOVERIES,
            "{stream}",
            "Streams whose app was re-run mid-answer, by first failure and outcome.",
        ),
        slo_ttft=slo[0],
        slo_tpot=slo[1],
        gap_sample_every=every,
    )
