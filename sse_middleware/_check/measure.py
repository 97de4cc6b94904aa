"""The numbers of a check, read from its :class:`~.recorder.Timeline`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from .recorder import CONTENT, END, ERROR, EVENT, HEARTBEAT, Timeline


@dataclass(frozen=True, slots=True)
class Measures:
    ttfb_s: float  # the response head
    first_byte_s: float | None  # the first byte of the body
    ttft_s: float | None  # the first event with content
    total_s: float
    events: int  # events (or lines), heartbeats apart
    content_events: int
    heartbeats: int
    frames: int  # reads that brought bytes: with chunked transfer, at most one chunk each
    wire_bytes: int
    body_bytes: int
    gaps_p50_s: float | None  # between consecutive content events
    gaps_p95_s: float | None
    gaps_max_s: float | None
    events_per_s: float | None  # over the time from the first to the last content event
    frames_per_s: float | None
    silence_s: float  # the longest stretch with no byte, from the response head to the end
    silence_from: float
    encoding: str | None  # the Content-Encoding (None: identity)
    split_reads: int  # compressed reads that did not end at an event's (or a line's) end


def units(tl: Timeline) -> list[float]:
    """Arrival times of the events that carry output; of all events when none was recognized as such."""
    return tl.times(CONTENT) or tl.times(CONTENT, EVENT, END, ERROR)


def measure(tl: Timeline) -> Measures:
    unit_times = units(tl)
    gaps = sorted(b - a for a, b in pairwise(unit_times))
    read_times = [t for t, _ in tl.reads]
    marks = [tl.headers_at, *read_times, tl.end_at]
    silence, start = max(((b - a, a) for a, b in pairwise(marks)), default=(0.0, tl.headers_at))
    content = tl.times(CONTENT)
    return Measures(
        ttfb_s=tl.headers_at,
        first_byte_s=read_times[0] if read_times else None,
        ttft_s=content[0] if content else None,
        total_s=tl.end_at,
        events=len(tl.arrivals) - len(tl.times(HEARTBEAT)),
        content_events=len(content),
        heartbeats=len(tl.times(HEARTBEAT)),
        frames=len(tl.reads),
        wire_bytes=sum(size for _, size in tl.reads),
        body_bytes=tl.body_bytes,
        gaps_p50_s=percentile(gaps, 0.50),
        gaps_p95_s=percentile(gaps, 0.95),
        gaps_max_s=gaps[-1] if gaps else None,
        events_per_s=rate(unit_times),
        frames_per_s=rate(read_times),
        silence_s=silence,
        silence_from=start,
        encoding=tl.encoding,
        split_reads=tl.split_reads,
    )


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile of sorted values."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def rate(times: Sequence[float]) -> float | None:
    if len(times) < 2 or times[-1] <= times[0]:
        return None
    return (len(times) - 1) / (times[-1] - times[0])
