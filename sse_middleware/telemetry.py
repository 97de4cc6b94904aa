"""One span and a few histograms per *stream*, through ``opentelemetry-api`` only.

``chunk()`` and ``frame()`` run once per token, so they only bump counters and append a float; all SDK
work (attributes, events, histogram records) happens once, in ``end()``, after the last byte went out.
Names follow the GenAI semantic conventions (*Development* status). We keep our own constants rather
than import the incubating ones, several already renamed upstream: a rename is a one-line change here,
never an ImportError on a user's machine.
"""

from __future__ import annotations

import math
import random
from array import array
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final

from opentelemetry import context, metrics, propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

# GenAI attributes (open-telemetry/semantic-conventions-genai, docs/registry/attributes/gen-ai.md).
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
# Stable general attributes (local too: opentelemetry-semantic-conventions is no runtime dependency).
ERROR_TYPE: Final = "error.type"
HTTP_REQUEST_METHOD: Final = "http.request.method"
HTTP_ROUTE: Final = "http.route"
URL_PATH: Final = "url.path"

# GenAI server metrics with the bucket boundaries the conventions say they SHOULD use
# (semantic-conventions-genai, docs/gen-ai/gen-ai-metrics.md, "Generative AI model server metrics").
METRIC_TTFT: Final = "gen_ai.server.time_to_first_token"
METRIC_TPOT: Final = "gen_ai.server.time_per_output_token"
METRIC_DURATION: Final = "gen_ai.server.request.duration"
TTFT_BUCKETS: Final = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
)
TPOT_BUCKETS: Final = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)
# Ours. One observation per gap (vLLM style), so a p95 over gaps is real, not a mean of means. Buckets:
# the TPOT ones plus vLLM's tail (its INTER_TOKEN_LATENCY_BUCKETS), since one gap can be a tool call.
METRIC_INTER_CHUNK: Final = "sse_middleware.inter_chunk.duration"
INTER_CHUNK_BUCKETS: Final = (*TPOT_BUCKETS, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
METRIC_SLO_VIOLATIONS: Final = "sse_middleware.slo.violations"
SLO_KIND: Final = "kind"

_NS: Final = "sse_middleware."
FIRST_TOKEN_EVENT: Final = _NS + "first_token"  # our namespace: the conventions define no such event

_FOLD_AT: Final = 4096  # gaps held raw per stream (32 KiB of doubles) before a long stream is folded
_STEP: Final = 64  # a folded block keeps every 64th of its sorted gaps, each standing for 64
_UPPER: Final = (*INTER_CHUNK_BUCKETS, math.inf)  # upper bounds (inclusive) of the histogram's buckets

try:
    _VERSION = version("sse_middleware")
except PackageNotFoundError:  # a source tree, not installed
    _VERSION = ""


class Telemetry:
    """Made once per middleware: the tracer and instruments, and :meth:`start` for each stream.

    A provider of ``None`` means the global one: the API hands out proxies that resolve whenever it is
    set, so ``opentelemetry-instrument`` works even if it sets it after this object exists.

    ``gap_sample_every``: the SDK's ``Histogram.record`` costs ~10 us, more than our whole hot path, so
    one observation per gap dominates the cost. N > 1 records every Nth gap from a random offset per
    stream: the distribution stays unbiased, but the histogram's count is then ~1/N of the gaps.
    """

    def __init__(
        self, tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None, *,
        slo_ttft: float = 0.0, slo_tpot: float = 0.0, gap_sample_every: int = 1,
    ) -> None:
        self.tracer = trace.get_tracer("sse_middleware", _VERSION or None, tracer_provider)
        meter = metrics.get_meter("sse_middleware", _VERSION, meter_provider)

        def hist(name: str, description: str, buckets: Sequence[float]) -> metrics.Histogram:
            return meter.create_histogram(name, "s", description, explicit_bucket_boundaries_advisory=buckets)

        self.ttft = hist(METRIC_TTFT, "Time to first content chunk, successful streams.", TTFT_BUCKETS)
        self.tpot = hist(METRIC_TPOT, "Time per output token after the first, successful streams.",
                         TPOT_BUCKETS)
        self.duration = hist(METRIC_DURATION, "Request arrival to end of stream.", DURATION_BUCKETS)
        self.inter_chunk = hist(METRIC_INTER_CHUNK, "Gaps between consecutive content chunks.",
                                INTER_CHUNK_BUCKETS)
        self.slo_violations = meter.create_counter(
            METRIC_SLO_VIOLATIONS, "{stream}", "Streams that missed a TTFT or TPOT objective.")
        self.slo_ttft, self.slo_tpot = slo_ttft, slo_tpot
        self.gap_sample_every = max(1, gap_sample_every)

    def start(
        self, scope: Mapping[str, Any], *, start_mono: float, start_ns: int,
        parent: context.Context | None = None,
    ) -> StreamTelemetry:
        """Open the stream's span, dated from request arrival (``start_ns``).

        A child (INTERNAL) of the span current in ``parent`` (default: the calling context), e.g. the
        one opentelemetry-instrumentation-asgi opened outside us; else we *are* the server span and
        continue the W3C context in the request headers. Pass ``parent`` (captured at request arrival)
        if the app may make its own span current before it starts the response.
        """
        route = getattr(scope.get("route"), "path", None)
        route = route if isinstance(route, str) and route else None
        attrs: dict[str, AttributeValue] = {
            HTTP_REQUEST_METHOD: scope.get("method", "GET"), URL_PATH: scope.get("path", ""),
            GEN_AI_REQUEST_STREAM: True,
        }
        if route:
            attrs[HTTP_ROUTE] = route
        ctx = context.get_current() if parent is None else parent
        kind = SpanKind.INTERNAL
        if not trace.get_current_span(ctx).get_span_context().is_valid:
            kind = SpanKind.SERVER
            carrier: dict[str, list[str]] = {}  # repeated headers (tracestate, baggage) kept apart
            for key, value in scope.get("headers") or ():
                carrier.setdefault(key.decode("latin-1"), []).append(value.decode("latin-1"))
            ctx = propagate.extract(carrier, ctx)
        span = self.tracer.start_span(f"stream {route}" if route else "stream", ctx, kind, attrs,
                                      start_time=start_ns)
        return StreamTelemetry(self, span, route, start_mono, start_ns)


class StreamTelemetry:
    """Observations of one stream: cheap while it runs, turned into a span and metrics once at the end."""

    __slots__ = (
        "_bytes", "_chunks", "_digest", "_ended", "_finish", "_first", "_fold_n", "_fold_sum", "_folded",
        "_frames", "_gap_max", "_gaps", "_heartbeats", "_in_tokens", "_last", "_model", "_operation",
        "_out_tokens", "_phase", "_provider", "_response_id", "_route", "_span", "_start_mono", "_start_ns",
        "_t", "trace_id",
    )

    def __init__(self, owner: Telemetry, span: Span, route: str | None, start_mono: float, start_ns: int):
        ctx = span.get_span_context()
        self.trace_id = format(ctx.trace_id, "032x") if ctx.is_valid else None
        """32 hex digits: an error id a client can quote and support can find; None without tracing."""
        self._t, self._span, self._route = owner, span, route
        self._start_mono, self._start_ns = start_mono, start_ns
        self._chunks = self._frames = self._bytes = self._heartbeats = self._folded = 0
        self._first: float | None = None
        self._last: float | None = None
        self._gaps = array("d")  # doubles, not float objects: 8 bytes a gap
        self._digest: list[float] = []
        self._fold_n, self._fold_sum = array("q"), array("d")  # per bucket, once a stream has folded
        self._gap_max = 0.0
        every = owner.gap_sample_every
        self._phase = random.randrange(every) if every > 1 else 0  # index of the first gap to record
        self._operation = self._provider = self._model = self._response_id = ""
        self._finish: list[str] = []
        self._in_tokens: int | None = None
        self._out_tokens: int | None = None
        self._ended = False

    def dialect(self, provider: str, operation: str) -> None:
        """What the stream speaks, e.g. ("openai", "chat"): gen_ai.provider.name and .operation.name."""
        self._provider, self._operation = provider, operation

    def chunk(self, now: float, content: bool) -> None:
        """HOT PATH, once per app event. ``content``: it carries output text (TTFT, gaps, token count)."""
        self._chunks += 1
        if content:
            last = self._last
            if last is None:
                self._first = now
            else:
                gaps = self._gaps
                gaps.append(now - last)
                if len(gaps) == _FOLD_AT:
                    self._fold()
            self._last = now

    def frame(self, nbytes: int) -> None:
        """HOT PATH: one frame written to the client."""
        self._frames += 1
        self._bytes += nbytes

    def heartbeat(self) -> None:
        """A keep-alive comment went out. Counted apart from frames (report it to frame() for bytes)."""
        self._heartbeats += 1

    def response(
        self, *, model: str | None = None, response_id: str | None = None, finish_reason: str | None = None,
        input_tokens: int | None = None, output_tokens: int | None = None,
    ) -> None:
        """Facts seen in the stream. Later values win (Anthropic's final usage comes last); finish
        reasons accumulate, each distinct one once, in order (one per choice when OpenAI's n > 1)."""
        self._model = model or self._model
        self._response_id = response_id or self._response_id
        if finish_reason and finish_reason not in self._finish:
            self._finish.append(finish_reason)
        self._in_tokens = self._in_tokens if input_tokens is None else input_tokens
        self._out_tokens = self._out_tokens if output_tokens is None else output_tokens

    def end(
        self, now: float, *, error_type: str | None = None, exception: BaseException | None = None,
        client_disconnected: bool = False,
    ) -> None:
        """Close the span and record the metrics, exactly once (later calls do nothing).

        An error (``error_type``, or one derived from ``exception``) sets status ERROR and keeps the
        stream out of TTFT/TPOT, which the conventions define for successful responses. A client that
        left is no error: the status stays unset and an attribute says so.
        """
        if self._ended:
            return
        self._ended = True
        t, span, first, last = self._t, self._span, self._first, self._last
        if error_type is None and exception is not None:
            error_type = _type_name(exception)
        elapsed = now - self._start_mono
        m_attrs = self._metric_attrs()
        ctx = trace.set_span_in_context(span)  # exemplars then point at this stream's span
        attrs = self._span_attrs(client_disconnected)
        n_gaps = self._folded + len(self._gaps)
        tokens = self._out_tokens if self._out_tokens is not None else n_gaps + (first is not None)
        attrs[_NS + "token_count_source"] = "usage" if self._out_tokens is not None else "chunks"
        ttft = tpot = p95 = None
        if n_gaps:
            p50, p95, gap_max = self._gap_stats()
            attrs |= {_NS + "inter_chunk.p50": p50, _NS + "inter_chunk.p95": p95,
                      _NS + "inter_chunk.max": gap_max}
        if first is not None and last is not None:
            ttft = attrs[GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = first - self._start_mono
            span.add_event(FIRST_TOKEN_EVENT, timestamp=self._ns(first))
            if n_gaps and tokens > 1:
                tpot = attrs[_NS + "time_per_output_token"] = (last - first) / (tokens - 1)

        if error_type is None:
            if ttft is not None:
                t.ttft.record(ttft, m_attrs, ctx)
            if tpot is not None:
                t.tpot.record(tpot, m_attrs, ctx)
        d_attrs = m_attrs if error_type is None else {**m_attrs, ERROR_TYPE: error_type}
        t.duration.record(elapsed, d_attrs, ctx)
        self._record_gaps(m_attrs, ctx)

        # SLOs judge the wait the user *felt*, so a stream that failed or lost its client after the
        # TTFT objective had passed with nothing shown missed it too.
        if t.slo_ttft > 0:
            if ttft is not None:
                self._slo(attrs, m_attrs, "ttft", ttft <= t.slo_ttft)
            elif (error_type is not None or client_disconnected) and elapsed > t.slo_ttft:
                self._slo(attrs, m_attrs, "ttft", False)
        if t.slo_tpot > 0 and p95 is not None:
            self._slo(attrs, m_attrs, "tpot", p95 <= t.slo_tpot)

        if self._operation:  # the GenAI span name, "{operation} {model}"
            span.update_name(f"{self._operation} {self._model}".rstrip())
        end_ns = self._ns(now)
        if error_type is not None:
            attrs[ERROR_TYPE] = error_type
            span.set_status(Status(StatusCode.ERROR, error_type))
            if exception is not None:
                span.record_exception(exception, timestamp=end_ns)
        span.set_attributes(attrs)
        span.end(end_time=end_ns)

    def _span_attrs(self, client_disconnected: bool) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {
            _NS + "chunks_in": self._chunks, _NS + "frames_out": self._frames,
            _NS + "heartbeats": self._heartbeats, _NS + "bytes_out": self._bytes,
            _NS + "client_disconnected": client_disconnected,
        }
        seen: tuple[tuple[str, AttributeValue | None], ...] = (
            (GEN_AI_OPERATION_NAME, self._operation), (GEN_AI_PROVIDER_NAME, self._provider),
            (GEN_AI_RESPONSE_MODEL, self._model), (GEN_AI_RESPONSE_ID, self._response_id),
            (GEN_AI_RESPONSE_FINISH_REASONS, self._finish), (GEN_AI_USAGE_INPUT_TOKENS, self._in_tokens),
            (GEN_AI_USAGE_OUTPUT_TOKENS, self._out_tokens))
        attrs.update((k, v) for k, v in seen if v is not None and v != "" and v != [])
        return attrs

    def _metric_attrs(self) -> dict[str, str]:
        """Low-cardinality attributes only: a path or a response id on a metric would explode series."""
        return {k: v for k, v in (
            (GEN_AI_OPERATION_NAME, self._operation), (GEN_AI_PROVIDER_NAME, self._provider),
            (GEN_AI_RESPONSE_MODEL, self._model), (HTTP_ROUTE, self._route)) if v}

    def _slo(self, attrs: dict[str, AttributeValue], m_attrs: dict[str, str], kind: str, met: bool) -> None:
        attrs[f"{_NS}slo.{kind}_met"] = met
        if not met:
            self._t.slo_violations.add(1, {**m_attrs, SLO_KIND: kind})

    def _ns(self, mono: float) -> int:
        """A monotonic reading as epoch ns on the span's clock (anchored at request arrival)."""
        return self._start_ns + round((mono - self._start_mono) * 1e9)

    def _record_gaps(self, attrs: dict[str, str], ctx: context.Context) -> None:
        """One observation per gap (every Nth, see ``gap_sample_every``). A folded gap is recorded as
        its bucket's mean: same bucket, same count and sum, which is all a histogram keeps anyway."""
        every, record = self._t.gap_sample_every, self._t.inter_chunk.record
        for gap in self._gaps[self._phase :: every]:
            record(gap, attrs, ctx)
        for n, total in zip(self._fold_n, self._fold_sum, strict=True):
            for _ in range(n // every + (random.random() * every < n % every)):  # unbiased sampling
                record(total / n, attrs, ctx)

    def _fold(self) -> None:
        """Bound memory on very long streams, without a pause: fold this block of gaps into per-bucket
        (count, sum), plus every _STEP-th sorted value for the percentiles. Recording it here instead
        would stall the stream for ~4096 SDK calls. Shorter streams (nearly all) never fold."""
        block = sorted(self._gaps)
        if not self._fold_n:
            self._fold_n.extend([0] * len(_UPPER))
            self._fold_sum.extend([0.0] * len(_UPPER))
        lo = 0
        for i, upper in enumerate(_UPPER):
            hi = bisect_right(block, upper, lo)
            self._fold_n[i] += hi - lo
            self._fold_sum[i] += sum(block[lo:hi])
            lo = hi
        self._digest.extend(block[_STEP // 2 :: _STEP])
        self._gap_max = max(self._gap_max, block[-1])
        self._folded += len(block)
        del self._gaps[:]

    def _gap_stats(self) -> tuple[float, float, float]:
        """(p50, p95, max) of the gaps, by nearest rank: each is a gap that really happened."""
        raw = sorted(self._gaps)
        if not self._digest:
            return raw[_rank(0.5, len(raw))], raw[_rank(0.95, len(raw))], raw[-1]
        points = sorted([(g, _STEP) for g in self._digest] + [(g, 1) for g in raw])
        total = self._folded + len(raw)
        return (_weighted(points, 0.5 * total), _weighted(points, 0.95 * total),
                max(self._gap_max, raw[-1] if raw else 0.0))


def _rank(q: float, n: int) -> int:
    return max(math.ceil(q * n - 1e-9) - 1, 0)


def _weighted(points: list[tuple[float, int]], target: float) -> float:
    seen = 0
    for value, weight in points:
        seen += weight
        if seen >= target - 1e-9:
            return value
    return points[-1][0]


def _type_name(exc: BaseException) -> str:
    """error.type for an exception: its fully qualified class name, as the conventions suggest."""
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
