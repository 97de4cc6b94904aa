"""The gaps between one stream's content chunks: kept in bounded memory, summarised once at its end.

A stream's gaps feed two things at its end: the span's p50/p95/max, and one histogram observation per
gap. Holding every gap as a float would grow without bound on a long stream, and recording each
observation while the stream runs would cost more than the rest of the hot path. So the gaps are
appended raw, and past :data:`FOLD_AT` they are *folded*. The histogram only keeps per-bucket counts and
sums, and a sparse sorted sample is enough for nearest-rank percentiles. Pure: no OpenTelemetry here,
the caller passes the histogram's bucket bounds and records what :meth:`GapStats.sample` yields.
"""

from __future__ import annotations

import math
import random
from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Final

__all__ = ["FOLD_AT", "GapStats"]

FOLD_AT: Final = 4096  # gaps held raw per stream (32 KiB of doubles) before a long stream is folded
_STEP: Final = 64  # a folded block keeps every 64th of its sorted gaps, each standing for 64


class GapStats:
    """One stream's gaps. The hot path appends to :attr:`raw` itself (no method call per token) and
    calls :meth:`fold` when it holds :data:`FOLD_AT` gaps. ``bounds`` are the upper bounds of the
    histogram's buckets (the last one unbounded), so folding keeps exactly what the histogram would."""

    __slots__ = ("_bounds", "_digest", "_fold_n", "_fold_sum", "_folded", "_max", "raw")

    def __init__(self, bounds: Sequence[float], raw: array[float] | None = None) -> None:
        self._bounds = bounds
        self.raw = array("d") if raw is None else raw  # doubles, not float objects: 8 bytes a gap
        self._digest: list[float] = []
        self._fold_n, self._fold_sum = array("q"), array("d")  # per bucket, once the stream has folded
        self._folded = 0
        self._max = 0.0

    def __len__(self) -> int:
        """All gaps seen, raw and folded."""
        return self._folded + len(self.raw)

    def fold(self) -> None:
        """Fold the raw block into per-bucket (count, sum), plus every _STEP-th sorted value for the
        percentiles. Recording the block here instead would stall the stream for ~4096 SDK calls.
        Shorter streams (nearly all) never fold."""
        block = sorted(self.raw)
        upper = (*self._bounds, math.inf)
        if not self._fold_n:
            self._fold_n.extend([0] * len(upper))
            self._fold_sum.extend([0.0] * len(upper))
        lo = 0
        for i, bound in enumerate(upper):
            hi = bisect_right(block, bound, lo)
            self._fold_n[i] += hi - lo
            self._fold_sum[i] += sum(block[lo:hi])
            lo = hi
        self._digest.extend(block[_STEP // 2 :: _STEP])
        self._max = max(self._max, block[-1])
        self._folded += len(block)
        del self.raw[:]

    def summary(self) -> tuple[float, float, float]:
        """(p50, p95, max) of a non-empty set of gaps, by nearest rank: each is a gap that really
        happened."""
        raw = sorted(self.raw)
        if not self._digest:
            return raw[_rank(0.5, len(raw))], raw[_rank(0.95, len(raw))], raw[-1]
        points = sorted([(g, _STEP) for g in self._digest] + [(g, 1) for g in raw])
        total = len(self)
        return (
            _weighted(points, 0.5 * total),
            _weighted(points, 0.95 * total),
            max(self._max, raw[-1] if raw else 0.0),
        )

    def sample(self, every: int, phase: int) -> Iterator[float]:
        """The observations to record: every ``every``-th gap from index ``phase``. A folded gap is
        given as its bucket's mean: same bucket, same count and sum, which is all a histogram keeps
        anyway. Its count is rounded at random, so the sampling stays unbiased."""
        folded = (
            total / n
            for n, total in zip(self._fold_n, self._fold_sum, strict=True)
            for _ in range(n // every + (random.random() * every < n % every))
        )
        return chain(self.raw[phase::every], folded)  # raw gaps iterated in C: no frame per gap


def _rank(q: float, n: int) -> int:
    return max(math.ceil(q * n - 1e-9) - 1, 0)


def _weighted(points: list[tuple[float, int]], target: float) -> float:
    seen = 0
    for value, weight in points:
        seen += weight
        if seen >= target - 1e-9:
            return value
    return points[-1][0]
