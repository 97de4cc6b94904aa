"""The instruments a middleware makes once and every stream records into (apart from the recorder, which
makes them, so that a stream's record can name them without importing the recorder back)."""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry import metrics, trace


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
