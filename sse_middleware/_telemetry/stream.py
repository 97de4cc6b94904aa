"""One stream's observations: cheap while it runs, turned into one span and a few metrics at its end.

``chunk()`` and ``frame()`` run once per token, so they only bump counters and append a float. The span
itself is made when the stream ends, dated from the request's arrival (``start_time``), with every
attribute in one call: an open stream holds no SDK span, only the context it started in. What needs the
span before then (a failing stream's error id is its trace id; a resumable stream's log links to it)
makes it on the spot (:meth:`StreamTelemetry.span_context`).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanContext, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from .._core.errors import error_type_name
from .._core.tokens import estimate_tokens
from . import semconv as sc
from .annotate import SCOPE_KEY as _NOTES
from .facts import StreamFacts
from .gaps import FOLD_AT as _FOLD_AT
from .gaps import GapStats
from .parent import parent_context

if TYPE_CHECKING:
    from .instruments import Instruments

_CHUNKS: Final = sc._NS + "chunks_in"
_FRAMES: Final = sc._NS + "frames_out"
_HEARTBEATS: Final = sc._NS + "heartbeats"
_BYTES: Final = sc._NS + "bytes_out"
_LEFT: Final = sc._NS + "client_disconnected"
_COUNT_SOURCE: Final = sc._NS + "token_count_source"
_GAP_P50: Final = sc._NS + "inter_chunk.p50"
_GAP_P95: Final = sc._NS + "inter_chunk.p95"
_GAP_MAX: Final = sc._NS + "inter_chunk.max"
_TPOT: Final = sc._NS + "time_per_output_token"


class StreamTelemetry(StreamFacts):
    """Observations of one stream: cheap while it runs, turned into a span and metrics once at the end."""

    __slots__ = (
        "_bytes",
        "_chars",
        "_chunks",
        "_ctx",
        "_ended",
        "_first",
        "_frames",
        "_gap_stats",
        "_gaps",
        "_heartbeats",
        "_last",
        "_mark_parent",
        "_request_model",
        "_scope",
        "_span",
        "_start_mono",
        "_start_ns",
    )

    def __init__(
        self,
        owner: Instruments,
        scope: Mapping[str, Any],
        ctx: Context,
        mark_parent: bool,
        request_model: str,
        start_mono: float,
        start_ns: int,
    ):
        StreamFacts.__init__(self, owner)
        self._scope, self._ctx, self._mark_parent = scope, ctx, mark_parent
        self._request_model = request_model
        self._start_mono, self._start_ns = start_mono, start_ns
        self._span: Span | None = None
        self._chunks = self._frames = self._bytes = self._heartbeats = 0
        self._chars = 0  # output characters where the pipeline read them (unread: see end())
        self._first: float | None = None
        self._last: float | None = None
        self._gaps = array("d")  # chunk() appends here itself: no method call per token
        self._gap_stats: GapStats | None = None  # made when the gaps are folded, or at the end
        self._ended = False

    def chunk(self, now: float, content: int) -> None:
        """HOT PATH, once per app event. ``content``: it carries output text (TTFT, gaps, token count),
        as its length in characters where the pipeline read the text, else True (see StreamObserver)."""
        self._chunks += 1
        if content:
            if content is not True:  # a length; True (not read) is left to the count of events
                self._chars += content
            last = self._last
            if last is None:
                self._first = now
            else:
                gaps = self._gaps
                gaps.append(now - last)
                if len(gaps) == _FOLD_AT:
                    self._fold()
            self._last = now

    def _fold(self) -> None:
        """A long stream's block of :data:`~.gaps.FOLD_AT` gaps into its :class:`~.gaps.GapStats`."""
        if self._gap_stats is None:
            self._gap_stats = GapStats(sc.INTER_CHUNK_BUCKETS, self._gaps)
        self._gap_stats.fold()

    def frame(self, nbytes: int) -> None:
        """HOT PATH: one frame written to the client."""
        self._frames += 1
        self._bytes += nbytes

    def recovery_attempt(self, attempt: int, reason: str, had: int, now: float) -> None:
        """A re-run of the app after a failure (``reason``), the client having ``had`` characters: an
        event on the span (made now, so that the event keeps its time)."""
        attributes: dict[str, AttributeValue] = {"attempt": attempt, "reason": reason, "characters": had}
        self._open(self._route(), None).add_event(sc.RECOVERY_EVENT, attributes, timestamp=self._ns(now))
        self.note(sc.RECOVERY_ATTEMPTS, attempt)

    def heartbeat(self) -> None:
        """A keep-alive comment went out. Counted apart from frames (report it to frame() for bytes)."""
        self._heartbeats += 1

    @property
    def trace_id(self) -> str | None:
        """32 hex digits: an error id a client can quote and support can find; None without tracing.
        Asked when a stream fails, so it makes the span then if it does not exist yet."""
        ctx = self.span_context()
        return format(ctx.trace_id, "032x") if ctx.is_valid else None

    def span_context(self) -> SpanContext:
        """The stream span's context, making the span now if needed (it then holds the SDK's memory of
        an open span until the stream ends): for what must name the span before its end."""
        return self._open(self._route(), None).get_span_context()

    def end(
        self,
        now: float,
        *,
        error_type: str | None = None,
        exception: BaseException | None = None,
        client_disconnected: bool = False,
    ) -> None:
        """Make (or finish) the span and record the metrics, exactly once (later calls do nothing).

        An error (``error_type``, or one derived from ``exception``) sets status ERROR, on the parent
        span too unless ``mark_parent`` is off. TTFT and TPOT are defined for successful responses, so
        a stream that failed or lost its client is kept out of both (not labelled: neither metric has
        ``error.type`` in the conventions); the request duration keeps it, with ``error.type`` on a
        failure. A client that left is no error: the status stays unset and an attribute says so.
        """
        if self._ended:
            return
        self._ended = True
        t, first, last, start = self._instruments, self._first, self._last, self._start_mono
        gaps = self._gap_stats
        if gaps is None and self._gaps:
            gaps = self._gap_stats = GapStats(sc.INTER_CHUNK_BUCKETS, self._gaps)
        if error_type is None:
            error_type = error_type_name(exception) if exception is not None else self._app_error
        elapsed = now - start
        notes = self._scope.get(_NOTES)
        if notes:
            self._request_model = notes.get("request_model") or self._request_model
        route = self._route()
        m_attrs = self._metric_attrs(route)
        attrs = self._span_attrs(m_attrs, client_disconnected)
        n_gaps = len(gaps) if gaps is not None else 0
        out_tokens = self._out_tokens
        tokens = out_tokens if out_tokens is not None else n_gaps + (first is not None)
        attrs[_COUNT_SOURCE] = "usage" if out_tokens is not None else "chunks"
        ttft = tpot = p95 = None
        if gaps is not None:
            p50, p95, gap_max = gaps.summary()
            attrs[_GAP_P50] = p50
            attrs[_GAP_P95] = p95
            attrs[_GAP_MAX] = gap_max
        if first is not None and last is not None:  # both or neither
            ttft = attrs[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = first - start
            if n_gaps and tokens > 1:
                tpot = attrs[_TPOT] = (last - first) / (tokens - 1)
        verdicts: list[tuple[str, bool]] = []
        if t.slo_ttft > 0 or t.slo_tpot > 0:
            verdicts = t.verdicts(ttft, p95, elapsed, error_type is not None or client_disconnected)
        for kind, met in verdicts:
            attrs[f"{sc._NS}slo.{kind}_met"] = met
        if error_type is not None:
            attrs[sc.ERROR_TYPE] = error_type
        if self._extra is not None or self._guard is not None:
            self._noted_attrs(attrs)
        if out_tokens is None and (client_disconnected or self._blocked is not None):
            # Cut short before the upstream's usage came (a send timeout ends as a disconnect): what
            # the client got, as a marked estimate; no input estimate (see docs/observability.md).
            # At least one token per content event (``tokens``, here): ``_chars`` has nothing of a text
            # that went by unread, and a delta is rarely under a token.
            attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = max(estimate_tokens(self._chars), tokens)
            attrs[sc.USAGE_ESTIMATED] = True
        if notes and "attributes" in notes:
            attrs.update(notes["attributes"])  # the app's, last: it knows better than we do

        span = self._open(route, attrs)
        ns0 = self._start_ns
        end_ns = ns0 + round(elapsed * 1e9)
        if first is not None:
            span.add_event(sc.FIRST_TOKEN_EVENT, timestamp=ns0 + round((first - start) * 1e9))
        if error_type is not None:
            span.set_status(Status(StatusCode.ERROR, error_type))
            if exception is not None:
                span.record_exception(exception, timestamp=end_ns)
            self._mark_the_parent(error_type)

        left = client_disconnected
        t.record(
            m_attrs, trace.set_span_in_context(span), elapsed, ttft, tpot, error_type, left, gaps, verdicts
        )
        span.end(end_time=end_ns)

    def _open(self, route: str | None, attrs: dict[str, AttributeValue] | None) -> Span:
        """The span: made now with ``attrs`` (or only the request's, when made before the end), in the
        context the stream started in (see :mod:`.parent`); or, if it exists, given ``attrs`` and its
        final name."""
        operation = self._operation
        name = f"{operation} {self._model}".rstrip() if operation else None  # the GenAI name
        span = self._span
        if span is not None:
            if attrs is not None and span.is_recording():
                if name:
                    span.update_name(name)
                span.set_attributes(attrs)
            return span
        ctx, kind = parent_context(self._scope, self._ctx)
        if attrs is None:
            attrs = self._span_attrs(self._metric_attrs(route), None)
        name = name or (f"stream {route}" if route else "stream")
        tracer = self._instruments.tracer
        span = self._span = tracer.start_span(name, ctx, kind, attrs, start_time=self._start_ns)
        return span

    def _mark_the_parent(self, error_type: str) -> None:
        """Failed in the trace list too: the span we are a child of, if it records (not a remote one)."""
        parent = trace.get_current_span(self._ctx)
        if self._mark_parent and parent.get_span_context().is_valid and parent.is_recording():
            parent.set_attribute(sc.ERROR_TYPE, error_type)
            parent.set_status(Status(StatusCode.ERROR, error_type))

    def _route(self) -> str | None:
        route = getattr(self._scope.get("route"), "path", None)
        return route if isinstance(route, str) and route else None

    def _span_attrs(self, m_attrs: dict[str, str], left: bool | None) -> dict[str, AttributeValue]:
        """The request's attributes and the metric attributes, then (unless the stream has not ended:
        ``left``, whether the client disconnected, None) the high-cardinality facts and the counters."""
        scope = self._scope
        if left is None:
            return {
                sc.HTTP_REQUEST_METHOD: scope.get("method", "GET"),
                sc.URL_PATH: scope.get("path", ""),
                sc.GEN_AI_REQUEST_STREAM: True,
                **m_attrs,
            }
        attrs: dict[str, AttributeValue] = {
            sc.HTTP_REQUEST_METHOD: scope.get("method", "GET"),
            sc.URL_PATH: scope.get("path", ""),
            sc.GEN_AI_REQUEST_STREAM: True,
            **m_attrs,
            _CHUNKS: self._chunks,
            _FRAMES: self._frames,
            _HEARTBEATS: self._heartbeats,
            _BYTES: self._bytes,
            _LEFT: left,
        }
        self._seen_attrs(attrs)
        return attrs

    def _metric_attrs(self, route: str | None) -> dict[str, str]:
        """Low-cardinality attributes only: a path or a response id on a metric would explode series."""
        attrs = {}
        if self._operation:
            attrs[sc.GEN_AI_OPERATION_NAME] = self._operation
        if self._provider:
            attrs[sc.GEN_AI_PROVIDER_NAME] = self._provider
        if self._request_model:
            attrs[sc.GEN_AI_REQUEST_MODEL] = self._request_model
        if self._model:
            attrs[sc.GEN_AI_RESPONSE_MODEL] = self._model
        if route:
            attrs[sc.HTTP_ROUTE] = route
        return attrs

    def _ns(self, mono: float) -> int:
        """A monotonic reading as epoch ns on the span's clock (anchored at request arrival)."""
        return self._start_ns + round((mono - self._start_mono) * 1e9)
