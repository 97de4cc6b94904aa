"""The problems a check can name, each in plain words with its likely cause and fix: pure rules over a
:class:`~.recorder.Timeline`.

**Buffering**, precisely. A *unit* is an event that carries output (a line, for text/plain and NDJSON).
A *burst* is a run of at least :data:`BURST_MIN` units, each within :data:`BURST_JOIN_S` of the one
before, that came faster than :data:`BURST_RATE` units a second on average. A server writes tokens as a
model makes them, far slower than that; a proxy releasing a held buffer delivers many events in one go.
A stream is *buffered* when at least :data:`BUFFERED_SHARE` of its units came in bursts and its last
unit came :data:`MATTERS_AFTER_S` or more after the request: below that, a held stream and a fast short
one look the same, and holding it costs the reader under a second anyway.

The rule looks at how the output arrived, not at when the first byte came: a long prefill (a reasoning
model, a tool call) delays the first byte of a healthy stream just as much. A late first byte only
raises a warning when there are too few units to judge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .measure import Measures, units
from .protocol import END_MARKERS
from .recorder import END, ERROR, Timeline

BURST_MIN: Final = 3
BURST_JOIN_S: Final = 0.005
BURST_RATE: Final = 2000.0
BUFFERED_SHARE: Final = 0.8
MATTERS_AFTER_S: Final = 1.0
SILENCE_LIMIT_S: Final = 20.0  # idle timeouts on the way are commonly 30 to 120 s
_ANTI_BUFFERING_FIX: Final = (
    "Send `X-Accel-Buffering: no` and `Cache-Control: no-cache, no-transform` with every stream "
    "(StreamingMiddleware adds both)"
)


@dataclass(frozen=True, slots=True)
class Finding:
    code: str  # stable, for scripts: buffered, compressed, headers, ...
    problem: bool  # a problem (exit 1) or a warning
    title: str
    cause: str
    fix: str


@dataclass(frozen=True, slots=True)
class Diagnosis:
    buffered: bool
    findings: list[Finding]

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.problem]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if not f.problem]


def bursts(times: list[float]) -> list[tuple[float, int]]:
    """(arrival time, units) of each burst among sorted unit arrival times."""
    out: list[tuple[float, int]] = []
    start = 0
    for i in range(1, len(times) + 1):
        if i == len(times) or times[i] - times[i - 1] > BURST_JOIN_S:
            count, span = i - start, times[i - 1] - times[start]
            if count >= BURST_MIN and count - 1 >= BURST_RATE * span:
                out.append((times[start], count))
            start = i
    return out


def diagnose(tl: Timeline, m: Measures) -> Diagnosis:
    times = units(tl)
    found = bursts(times)
    in_bursts = sum(count for _, count in found)
    buffered = bool(times) and in_bursts >= BUFFERED_SHARE * len(times) and times[-1] >= MATTERS_AFTER_S
    findings = [
        f
        for f in (
            _buffered(tl, found, len(times)) if buffered else _too_few(tl, m, times),
            _cut(tl, m),
            _unfinished(tl),
            _error_event(tl),
            _no_end(tl),
            _no_events(tl, m),
            _content_length(tl),
            _compressed(tl, m, buffered),
            _headers(tl, buffered),
            None if buffered else _silence(m),
            _timeout(tl),
        )
        if f is not None
    ]
    return Diagnosis(buffered, sorted(findings, key=lambda f: not f.problem))


def _buffered(tl: Timeline, found: list[tuple[float, int]], total: int) -> Finding:
    held = sum(count for _, count in found)
    if len(found) == 1:
        how = f"in one burst at {found[0][0]:.2f} s"
    else:
        how = f"in {len(found)} bursts (at " + ", ".join(f"{t:.2f}" for t, _ in found[:5]) + " s)"
    headers_held = tl.headers_at >= found[0][0] - BURST_JOIN_S
    title = f"Buffered: {held} of {total} events arrived {how}" + (
        ", together with the response headers" if headers_held else ""
    )
    title += f"; the reader saw no output until {found[0][0]:.2f} s."
    if tl.header("content-encoding"):
        cause = (
            f"The stream was compressed ({tl.header('content-encoding')}) on its way, and compressors "
            "hold output until their buffer fills or the stream ends: nginx with `gzip on` and "
            "text/event-stream in gzip_types is the classic case."
        )
    else:
        cause = (
            "A proxy, load balancer or CDN between the app and you holds the response (nginx "
            "proxy_buffering, a buffering ingress or CDN), or the app wrote everything at once: check the "
            "app directly, bypassing the proxies, to tell which."
        )
    if headers_held:
        cause += " Even the response headers were held, which points at a proxy rather than the app."
    fix = (
        f"{_ANTI_BUFFERING_FIX}; nginx honours `X-Accel-Buffering: no` even with gzip on. Or exclude "
        "text/event-stream from compression (nginx: drop it from gzip_types) and turn buffering off for "
        "this route at the proxy or CDN (nginx: proxy_buffering off)."
    )
    return Finding("buffered", True, title, cause, fix)


def _too_few(tl: Timeline, m: Measures, times: list[float]) -> Finding | None:
    """The other face of buffering, 'the first byte came only when the stream was nearly done', judged
    only when there are too few units for the burst rule: alone it cannot tell a held stream from a
    short answer after a long wait."""
    if not 0 < len(times) < BURST_MIN or times[-1] < MATTERS_AFTER_S or m.first_byte_s is None:
        return None
    if m.first_byte_s < 0.9 * m.total_s:
        return None
    return Finding(
        "maybe_buffered",
        False,
        f"Only {len(times)} event(s) with output, and the first byte came at {m.first_byte_s:.2f} s of "
        f"{m.total_s:.2f} s: too few to tell a held stream from a short answer after a long wait.",
        "Either a proxy held the stream, or the server had little to say after a long think.",
        "Check with a request whose answer is longer (a few sentences), or against the app directly.",
    )


def _cut(tl: Timeline, m: Measures) -> Finding | None:
    if tl.ending != "cut":
        return None
    cause = (
        "The connection ended before the response did. Usually the server hit an exception after it "
        "had sent 200 OK: it can no longer send an error status, so it drops the connection, and "
        "clients see a network error instead of the reason. A proxy's timeout does the same."
    )
    if m.silence_s >= SILENCE_LIMIT_S and m.silence_from + m.silence_s >= tl.end_at - 0.5:
        cause += f" Here the stream had been silent for {m.silence_s:.1f} s: an idle timeout is likely."
    return Finding(
        "cut",
        True,
        f"Cut at {tl.end_at:.2f} s: {tl.reason}.",
        cause,
        "End a failed stream with an error event its client understands (StreamingMiddleware turns "
        "exceptions into one, in the stream's own format), and send heartbeats through long silences.",
    )


def _unfinished(tl: Timeline) -> Finding | None:
    if tl.ending != "end" or not tl.unfinished:
        return None
    return Finding(
        "unfinished_event",
        True,
        f"Ended inside an event: {tl.unfinished} bytes after the last blank line were discarded.",
        "The server closed the stream without the blank line that ends an event; every client drops it.",
        "End every event with a blank line (`\\n\\n`).",
    )


def _error_event(tl: Timeline) -> Finding | None:
    errors = [a for a in tl.arrivals if a.kind == ERROR]
    if not errors:
        return None
    return Finding(
        "error_event",
        True,
        f"The stream reported an error at {errors[0].at:.2f} s: {errors[0].detail}",
        "The server failed during the stream and said so in the stream, as it should.",
        "Look for that error in the server's logs; the transport itself is fine.",
    )


def _no_end(tl: Timeline) -> Finding | None:
    if tl.protocol is None or tl.ending != "end" or tl.times(END, ERROR):
        return None
    marker = END_MARKERS[tl.protocol]
    return Finding(
        "no_end_marker",
        True,
        f"Ended without its end marker ({marker}): a client cannot tell a finished answer from a cut one.",
        "The server or a proxy closed the stream before the format's end.",
        f"End every stream with {marker}; on failure send the format's error event instead "
        "(StreamingMiddleware does).",
    )


def _no_events(tl: Timeline, m: Measures) -> Finding | None:
    if m.events or tl.ending == "timeout":
        return None
    what = "event" if tl.sse else "line"
    return Finding(
        "no_events",
        True,
        f"The stream carried no {what} at all ({m.body_bytes} bytes).",
        "The endpoint answered with a stream's headers but no content: check the request it expects.",
        "Check the method, body and headers the endpoint needs (-X, -d, -H).",
    )


def _content_length(tl: Timeline) -> Finding | None:
    length = tl.header("content-length")
    if length is None:
        return None
    return Finding(
        "content_length",
        True,
        f"The event stream has a Content-Length ({length}).",
        "The whole body was known before it was sent: the app built it in full, or a proxy buffered it "
        "and measured it.",
        "Stream with chunked transfer: never set Content-Length on a stream (StreamingMiddleware drops it).",
    )


def _compressed(tl: Timeline, m: Measures, buffered: bool) -> Finding | None:
    """A compressed stream is fine when every read decodes to whole events (a sync flush per frame, as
    ``compress="auto"`` and nginx with ``X-Accel-Buffering: no`` do): then nothing is said."""
    encoding = tl.header("content-encoding")
    if encoding is None or encoding.strip().lower() == "identity":
        return None
    sizes = f"{m.wire_bytes} bytes on the wire for {m.body_bytes}"
    if buffered:
        title = f"The event stream was compressed (Content-Encoding: {encoding}; {sizes})."
    elif m.split_reads:
        title = (
            f"The event stream was compressed (Content-Encoding: {encoding}; {sizes}), and "
            f"{m.split_reads} of {m.frames} reads stopped inside an event: compressed frames do not "
            "arrive as they are written."
        )
    else:
        return None
    return Finding(
        "compressed",
        buffered,
        title,
        "A compression layer (nginx `gzip on` with text/event-stream in gzip_types, a CDN, a gzip "
        "middleware) compresses the stream. Compressors hold output until their buffer fills unless "
        "told to flush after each event.",
        'Compress where the events are known: StreamingSettings(compress="auto") flushes after every '
        "frame. Or exclude text/event-stream from compression, or send `X-Accel-Buffering: no` so nginx "
        "flushes every chunk (StreamingMiddleware does).",
    )


def _headers(tl: Timeline, buffered: bool) -> Finding | None:
    """`X-Accel-Buffering` never reaches a client behind nginx (nginx consumes it), so its absence is only
    reported with a Cache-Control that lacks the anti-buffering directives too."""
    cache = (tl.header("cache-control") or "").lower()
    directives = [] if "no-cache" in cache or "no-store" in cache else ["no-cache"]
    if "no-transform" not in cache:
        directives.append("no-transform")
    if not directives:
        return None
    missing = ["Cache-Control: " + ", ".join(directives)]
    if (tl.header("x-accel-buffering") or "").strip().lower() != "no":
        missing.append("X-Accel-Buffering: no")
    effect = (
        ", as one did here."
        if buffered
        else "; it reached you intact this time, but a layer added later (an ingress, a CDN) can turn it "
        "into a batch."
    )
    return Finding(
        "headers",
        buffered,
        "Missing anti-buffering headers: " + "; ".join(missing) + ".",
        "Without them nginx, CDNs and other layers may cache, compress or hold a stream" + effect,
        _ANTI_BUFFERING_FIX + ".",
    )


def _silence(m: Measures) -> Finding | None:
    if m.silence_s < SILENCE_LIMIT_S:
        return None
    return Finding(
        "silence",
        True,
        f"Silent for {m.silence_s:.1f} s (from {m.silence_from:.1f} s) with no heartbeat.",
        "Nothing was sent while the model thought or a tool ran; proxies and load balancers cut "
        "connections idle for 30 to 120 s (nginx proxy_read_timeout 60 s, AWS ALB 60 s, Cloudflare 100 s).",
        "Send a comment (`: ping`) after 15 s of silence (StreamingMiddleware does: heartbeat_interval).",
    )


def _timeout(tl: Timeline) -> Finding | None:
    if tl.ending != "timeout":
        return None
    return Finding(
        "timeout",
        False,
        f"Stopped after {tl.end_at:.1f} s (--timeout) with the stream still open; the figures cover what "
        "arrived until then.",
        "The stream is longer than the time the check was given, or never ends.",
        "Give the check more time with --timeout, or ask for a shorter answer.",
    )
