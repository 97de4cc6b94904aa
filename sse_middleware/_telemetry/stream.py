"""One stream's observations: cheap while it runs, turned into a span and metrics once, at its end.

``chunk()`` and ``frame()`` run once per token, so they only bump counters and append a float; all SDK
work (attributes, events, histogram records) happens once, in ``end()``, after the last byte went out.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanContext, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from .._core.errors import error_type_name
from . import semconv as sc
from .annotate import SCOPE_KEY as _NOTES
from .gaps import FOLD_AT as _FOLD_AT
from .gaps import GapStats

if TYPE_CHECKING:
    from .recorder import Telemetry


class StreamTelemetry:
    """Observations of one stream: cheap while it runs, turned into a span and metrics once at the end."""

    __slots__ = (
        "_bytes",
        "_chunks",
        "_ended",
        "_finish",
        "_first",
        "_frames",
        "_gap_stats",
        "_gaps",
        "_heartbeats",
        "_in_tokens",
        "_last",
        "_model",
        "_operation",
        "_out_tokens",
        "_parent",
        "_phase",
        "_provider",
        "_request_model",
        "_response_id",
        "_route",
        "_scope",
        "_span",
        "_start_mono",
        "_start_ns",
        "_t",
        "trace_id",
    )

    def __init__(
        self,
        owner: Telemetry,
        span: Span,
        scope: Mapping[str, Any],
        route: str | None,
        request_model: str,
        parent: Span | None,
        start_mono: float,
        start_ns: int,
    ):
        ctx = span.get_span_context()
        self.trace_id = format(ctx.trace_id, "032x") if ctx.is_valid else None
        """32 hex digits: an error id a client can quote and support can find; None without tracing."""
        self._t, self._span, self._scope, self._parent = owner, span, scope, parent
        self._route, self._request_model = route, request_model
        self._start_mono, self._start_ns = start_mono, start_ns
        self._chunks = self._frames = self._bytes = self._heartbeats = 0
        self._first: float | None = None
        self._last: float | None = None
        self._gap_stats = GapStats(sc.INTER_CHUNK_BUCKETS)
        self._gaps = self._gap_stats.raw  # chunk() appends here: a method call would add ~15% to it
        every = owner.gap_sample_every
        self._phase = random.randrange(every) if every > 1 else 0  # index of the first gap to record
        self._operation = self._provider = self._model = self._response_id = ""
        self._finish: list[str] = []
        self._in_tokens: int | None = None
        self._out_tokens: int | None = None
        self._ended = False

    @property
    def span_context(self) -> SpanContext:
        """This stream's span, for links from the spans of its resumed responses."""
        return self._span.get_span_context()

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
                    self._gap_stats.fold()
            self._last = now

    def frame(self, nbytes: int) -> None:
        """HOT PATH: one frame written to the client."""
        self._frames += 1
        self._bytes += nbytes

    def heartbeat(self) -> None:
        """A keep-alive comment went out. Counted apart from frames (report it to frame() for bytes)."""
        self._heartbeats += 1

    def response(
        self,
        *,
        model: str | None = None,
        response_id: str | None = None,
        finish_reason: str | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
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
        self,
        now: float,
        *,
        error_type: str | None = None,
        exception: BaseException | None = None,
        client_disconnected: bool = False,
    ) -> None:
        """Close the span and record the metrics, exactly once (later calls do nothing).

        An error (``error_type``, or one derived from ``exception``) sets status ERROR, on the parent
        span too unless ``mark_parent`` is off. TTFT and TPOT are defined for successful responses, so
        a stream that failed or lost its client is kept out of both (not labelled: neither metric has
        ``error.type`` in the conventions); the request duration keeps it, with ``error.type`` on a
        failure. A client that left is no error: the status stays unset and an attribute says so.
        """
        if self._ended:
            return
        self._ended = True
        t, span, first, last = self._t, self._span, self._first, self._last
        if error_type is None and exception is not None:
            error_type = error_type_name(exception)
        elapsed = now - self._start_mono
        notes = self._scope.get(_NOTES) or {}
        self._request_model = notes.get("request_model") or self._request_model
        m_attrs = self._metric_attrs()
        ctx = trace.set_span_in_context(span)  # exemplars then point at this stream's span
        attrs = self._span_attrs(m_attrs, client_disconnected)
        n_gaps = len(self._gap_stats)
        tokens = self._out_tokens if self._out_tokens is not None else n_gaps + (first is not None)
        attrs[sc._NS + "token_count_source"] = "usage" if self._out_tokens is not None else "chunks"
        ttft = tpot = p95 = None
        if n_gaps:
            p50, p95, gap_max = self._gap_stats.summary()
            attrs |= {
                sc._NS + "inter_chunk.p50": p50,
                sc._NS + "inter_chunk.p95": p95,
                sc._NS + "inter_chunk.max": gap_max,
            }
        if first is not None and last is not None:
            ttft = attrs[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = first - self._start_mono
            span.add_event(sc.FIRST_TOKEN_EVENT, timestamp=self._ns(first))
            if n_gaps and tokens > 1:
                tpot = attrs[sc._NS + "time_per_output_token"] = (last - first) / (tokens - 1)

        if error_type is None and not client_disconnected:
            if ttft is not None:
                t.ttft.record(ttft, m_attrs, ctx)
            if tpot is not None:
                t.tpot.record(tpot, m_attrs, ctx)
        d_attrs = m_attrs if error_type is None else {**m_attrs, sc.ERROR_TYPE: error_type}
        t.duration.record(elapsed, d_attrs, ctx)
        # One observation per gap, or every Nth from a random phase (see ``gap_sample_every``).
        record = t.inter_chunk.record
        for gap in self._gap_stats.sample(t.gap_sample_every, self._phase):
            record(gap, m_attrs)  # no exemplar per gap: it would add ~2 us to each ~10 us SDK record

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
            attrs[sc.ERROR_TYPE] = error_type
            span.set_status(Status(StatusCode.ERROR, error_type))
            if exception is not None:
                span.record_exception(exception, timestamp=end_ns)
            if self._parent is not None and self._parent.is_recording():  # failed in the trace list too
                self._parent.set_attribute(sc.ERROR_TYPE, error_type)
                self._parent.set_status(Status(StatusCode.ERROR, error_type))
        span.set_attributes(attrs)
        if "attributes" in notes:
            span.set_attributes(notes["attributes"])  # the app's, last: it knows better than we do
        span.end(end_time=end_ns)

    def _span_attrs(self, m_attrs: dict[str, str], client_disconnected: bool) -> dict[str, AttributeValue]:
        """The metric attributes (http.route is already on the span, with the same value), plus the
        high-cardinality facts and this stream's counters."""
        attrs: dict[str, AttributeValue] = {
            sc._NS + "chunks_in": self._chunks,
            sc._NS + "frames_out": self._frames,
            sc._NS + "heartbeats": self._heartbeats,
            sc._NS + "bytes_out": self._bytes,
            sc._NS + "client_disconnected": client_disconnected,
            **m_attrs,
        }
        seen: tuple[tuple[str, AttributeValue | None], ...] = (
            (sc.GEN_AI_RESPONSE_ID, self._response_id),
            (sc.GEN_AI_RESPONSE_FINISH_REASONS, self._finish),
            (sc.GEN_AI_USAGE_INPUT_TOKENS, self._in_tokens),
            (sc.GEN_AI_USAGE_OUTPUT_TOKENS, self._out_tokens),
        )
        attrs.update((k, v) for k, v in seen if v is not None and v != "" and v != [])
        return attrs

    def _metric_attrs(self) -> dict[str, str]:
        """Low-cardinality attributes only: a path or a response id on a metric would explode series."""
        return {
            k: v
            for k, v in (
                (sc.GEN_AI_OPERATION_NAME, self._operation),
                (sc.GEN_AI_PROVIDER_NAME, self._provider),
                (sc.GEN_AI_REQUEST_MODEL, self._request_model),
                (sc.GEN_AI_RESPONSE_MODEL, self._model),
                (sc.HTTP_ROUTE, self._route),
            )
            if v
        }

    def _slo(self, attrs: dict[str, AttributeValue], m_attrs: dict[str, str], kind: str, met: bool) -> None:
        attrs[f"{sc._NS}slo.{kind}_met"] = met
        if not met:
            self._t.slo_violations.add(1, {**m_attrs, sc.SLO_KIND: kind})

    def _ns(self, mono: float) -> int:
        """A monotonic reading as epoch ns on the span's clock (anchored at request arrival)."""
        return self._start_ns + round((mono - self._start_mono) * 1e9)
