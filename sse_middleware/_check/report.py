"""The check's output: a short human report with a timeline of arrivals, or one JSON object."""

from __future__ import annotations

import math
import textwrap
from typing import Any, Final

from .diagnose import Diagnosis, Finding
from .measure import Measures, units
from .recorder import CONTENT, END, ERROR, HEARTBEAT, Timeline

HEADERS: Final = (
    "Content-Type",
    "Cache-Control",
    "X-Accel-Buffering",
    "Content-Encoding",
    "Content-Length",
    "Transfer-Encoding",
)
_HEADER_ROWS: Final = (HEADERS[:3], HEADERS[3:])
BARS: Final = " ▁▂▃▄▅▆▇█"
ASCII_BARS: Final = " .:-=+*#@"
WIDTH: Final = 60


def as_json(
    url: str,
    method: str,
    tl: Timeline,
    m: Measures | None,
    d: Diagnosis | None,
    exit_code: int,
    reason: str = "",
) -> dict[str, Any]:
    """One object; the measurements are null when there was no stream to measure (exit 2)."""
    out: dict[str, Any] = {
        "url": url,
        "method": method,
        "exit_code": exit_code,
        "stream": d is not None,
        "error": reason or None,
        "status": tl.status or None,
        "http_version": tl.http_version or None,
        "headers": {name: tl.header(name.lower()) for name in HEADERS},
        "buffered": bool(d and d.buffered),
        "problems": [f.title for f in d.problems] if d else [reason],
        "warnings": [f.title for f in d.warnings] if d else [],
        "findings": [_finding(f) for f in d.findings] if d else [],
    }
    fields = Measures.__dataclass_fields__
    out.update({name: (_round(getattr(m, name)) if m else None) for name in fields})
    out["dialect"] = tl.dialect or None
    out["end_marker_expected"] = tl.protocol
    out["ending"] = tl.ending if d else None
    out["reads"] = [[_round(t), size] for t, size in tl.reads]
    out["arrivals"] = [[_round(a.at), a.kind] for a in tl.arrivals]
    return out


def _finding(f: Finding) -> dict[str, Any]:
    return {"code": f.code, "problem": f.problem, "title": f.title, "cause": f.cause, "fix": f.fix}


def _round(value: float | int | None) -> float | int | None:
    return round(value, 4) if isinstance(value, float) else value


def no_stream(url: str, method: str, tl: Timeline, reason: str) -> str:
    head = f"{method} {url}"
    if tl.status:
        head += f" -> HTTP/{tl.http_version} {tl.status}, {tl.header('content-type') or 'no Content-Type'}"
    return f"{head}\n\nNO STREAM: {reason}\n\nresult: no stream (exit 2)\n"


def human(
    url: str, method: str, tl: Timeline, m: Measures, d: Diagnosis, exit_code: int, *, ascii: bool = False
) -> str:
    lines = [
        f"{method} {url} -> HTTP/{tl.http_version} {tl.status}",
        *("  " + "   ".join(f"{n}: {tl.header(n.lower()) or '-'}" for n in names) for names in _HEADER_ROWS),
        "",
        f"  headers {_s(m.ttfb_s)}   first byte {_s(m.first_byte_s)}   first content (TTFT) {_s(m.ttft_s)}"
        f"   total {_s(m.total_s)}" + {"end": "", "cut": " (cut)", "timeout": " (still open)"}[tl.ending],
        f"  {m.events} events ({m.content_events} with content, {m.heartbeats} heartbeats) in {m.frames} "
        f"frame(s); {m.wire_bytes} bytes on the wire"
        + (f", {m.body_bytes} decoded" if m.body_bytes != m.wire_bytes else "")
        + (f"; {m.encoding}: " + _whole(m) if m.encoding else ""),
        f"  gaps between events: p50 {_s(m.gaps_p50_s)}, p95 {_s(m.gaps_p95_s)}, max {_s(m.gaps_max_s)}; "
        f"{_rate(m.events_per_s)} events/s, {_rate(m.frames_per_s)} frames/s; "
        f"longest silence {_s(m.silence_s)}",
        "",
        *timeline(tl, ascii=ascii),
        "",
    ]
    for title, items, mark in (("PROBLEMS", d.problems, "x"), ("WARNINGS", d.warnings, "!")):
        if items:
            lines.append(title)
            for f in items:
                lines += _wrap(f"{mark} {f.title}", "  ", "    ")
                lines += _wrap(f"cause: {f.cause}", "    ", "      ")
                lines += _wrap(f"fix: {f.fix}", "    ", "      ")
            lines.append("")
    verdict = {0: "healthy: it streamed", 1: f"{len(d.problems)} problem(s) found"}[exit_code]
    lines.append(f"result: {verdict} (exit {exit_code})")
    return "\n".join(lines) + "\n"


def timeline(tl: Timeline, *, ascii: bool = False) -> list[str]:
    """A sparkline of output arrivals over the whole response, and a line marking the moments that matter."""
    end = max(tl.end_at, 1e-3)
    step = end / WIDTH
    times = units(tl)
    counts = [0] * WIDTH
    for t in times:
        counts[min(int(t / step), WIDTH - 1)] += 1
    bars = ASCII_BARS if ascii else BARS
    top = max(counts, default=0) or 1
    spark = "".join(bars[math.ceil(c / top * (len(bars) - 1))] for c in counts)
    marks = [" "] * WIDTH
    found = [(t, "h") for t in tl.times(HEARTBEAT)]
    found += [(t, "E") for t in tl.times(END)] + [(t, "!") for t in tl.times(ERROR)]
    content = tl.times(CONTENT)
    if content:
        found.append((content[0], "T"))
    if tl.ending != "end":
        found.append((tl.end_at, "x" if tl.ending == "cut" else ">"))
    for t, mark in [*found, (tl.headers_at, "H")]:  # later marks win a shared column: headers matter most
        marks[min(int(t / step), WIDTH - 1)] = mark
    return [
        f"  arrivals from 0 to {end:.2f} s, one column per {_s(step)}, height = events with content "
        f"(tallest: {max(counts, default=0)}):",
        f"  |{spark}|",
        f"   {''.join(marks).rstrip()}",
        "   H headers, T first content, h heartbeat, E end marker, ! error event, x cut, > still open",
    ]


def _whole(m: Measures) -> str:
    if not m.split_reads:
        return "every read decoded to whole events (compressed frames arrive as written)"
    return f"{m.split_reads} of {m.frames} reads stopped inside an event"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _wrap(text: str, first: str, rest: str) -> list[str]:
    return textwrap.wrap(text, 104, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False)
