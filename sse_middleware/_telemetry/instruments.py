"""The instruments a middleware makes once and every stream records into (apart from the recorder, which
makes them, so that a stream's record can name them without importing the recorder back)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from opentelemetry import metrics, trace
from opentelemetry.context import Context

from . import semconv as sc

if TYPE_CHECKING:
    from .gaps import GapStats

_NO_SPAN: Final = trace.set_span_in_context(trace.INVALID_SPAN)  # not empty: the SDK takes {} as "current"


@dataclass(frozen=True, slots=True)
class Instruments:
    """Per middleware, made once: the tracer, the instruments, and the options every stream uses."""

    tracer: trace.Tracer
    ttft: metrics.Histogram
    tpot: metrics.Histogram
    duration: metrics.Histogram
    inter_chunk: metrics.Histogram
    slo_violations: metrics.Counter
    guard_time: metrics.Histogram
    guard_blocked: metrics.Counter
    recoveries: metrics.Counter
    slo_ttft: float
    slo_tpot: float
    gap_sample_every: int

    def verdicts(
        self, ttft: float | None, p95: float | None, elapsed: float, failed_or_left: bool
    ) -> list[tuple[str, bool]]:
        """(objective, met) for each objective set that a stream can be judged on. SLOs judge the wait
        the user *felt*, so a stream that failed or lost its client after the TTFT objective had passed
        with nothing shown missed it too."""
        judged = []
        if self.slo_ttft > 0:
            if ttft is not None:
                judged.append(("ttft", ttft <= self.slo_ttft))
            elif failed_or_left and elapsed > self.slo_ttft:
                judged.append(("ttft", False))
        if self.slo_tpot > 0 and p95 is not None:
            judged.append(("tpot", p95 <= self.slo_tpot))
        return judged

    def record(
        self,
        attrs: dict[str, str],
        ctx: Context,
        elapsed: float,
        ttft: float | None,
        tpot: float | None,
        error_type: str | None,
        left: bool,
        gaps: GapStats | None,
        verdicts: list[tuple[str, bool]],
    ) -> None:
        """One ended stream's metrics, with its metric ``attrs``; ``ctx`` holds its span (exemplars
        point at it). ``left``: the client disconnected. See :meth:`.StreamTelemetry.end`."""
        if error_type is None:
            if not left:
                if ttft is not None:
                    self.ttft.record(ttft, attrs, ctx)
                if tpot is not None:
                    self.tpot.record(tpot, attrs, ctx)
            self.duration.record(elapsed, attrs, ctx)
        else:
            self.duration.record(elapsed, {**attrs, sc.ERROR_TYPE: error_type}, ctx)
        if gaps is not None:
            # One observation per gap, or every Nth from a random phase (see ``gap_sample_every``).
            # No span in their context: else the SDK samples an exemplar on each record, pointing at
            # whatever span is current here (the HTTP server span under an instrumentation), which no
            # gap needs.
            every, record = self.gap_sample_every, self.inter_chunk.record
            phase = int(random.random() * every)  # the index of the first gap to record
            for gap in gaps.sample(every, phase):
                record(gap, attrs, _NO_SPAN)
        for kind, met in verdicts:
            if not met:
                self.slo_violations.add(1, {**attrs, sc.SLO_KIND: kind})
