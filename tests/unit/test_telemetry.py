"""StreamTelemetry driven directly with explicit clocks: exact TTFT/TPOT values, span shape, metrics.

Private SDK providers with in-memory exporters throughout; the global providers are only ever set in a
child process, so these tests cannot leak into (or be fooled by) anything else in the run.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from opentelemetry import baggage, propagate, trace
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.propagators.textmap import TextMapPropagator, default_getter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind, StatusCode

from sse_middleware import StreamingMiddleware, StreamingSettings, annotate
from sse_middleware._telemetry import gaps
from sse_middleware._telemetry import instruments as instruments_module
from sse_middleware._telemetry import recorder as tm
from sse_middleware._telemetry.gaps import FOLD_AT
from sse_middleware._telemetry.recorder import StreamTelemetry, Telemetry
from sse_middleware._telemetry.request_model import BodyPeek

from ..support.otel import Otel, OTLPReceiver, attributes

PACKAGE_PARENT = Path(tm.__file__).parents[2]  # wherever this run imports sse_middleware from
T0 = 1000.0  # monotonic clock at request arrival
NS0 = 1_700_000_000_000_000_000  # wall clock (ns) at request arrival
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

# Copied by hand from the GenAI conventions (semantic-conventions-genai docs/gen-ai/gen-ai-metrics.md),
# not imported from the module, so a wrong constant there fails here.
SPEC_BUCKETS = {
    "gen_ai.server.time_to_first_token": [
        0.001,
        0.005,
        0.01,
        0.02,
        0.04,
        0.06,
        0.08,
        0.1,
        0.25,
        0.5,
        0.75,
        1.0,
        2.5,
        5.0,
        7.5,
        10.0,
    ],
    "gen_ai.server.time_per_output_token": [
        0.01,
        0.025,
        0.05,
        0.075,
        0.1,
        0.15,
        0.2,
        0.3,
        0.4,
        0.5,
        0.75,
        1.0,
        2.5,
    ],
    "gen_ai.server.request.duration": [
        0.01,
        0.02,
        0.04,
        0.08,
        0.16,
        0.32,
        0.64,
        1.28,
        2.56,
        5.12,
        10.24,
        20.48,
        40.96,
        81.92,
    ],
}


def scope(**extra: Any) -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": [], **extra}


def feed(stream: StreamTelemetry, events: list[tuple[float, bool]]) -> None:
    for at, content in events:
        stream.chunk(T0 + at, content)
        stream.frame(10)


def one_stream(
    tel: Telemetry, events: list[tuple[float, bool]], end: float, **end_kw: Any
) -> StreamTelemetry:
    stream = tel.start(scope(), start_mono=T0, start_ns=NS0)
    stream.dialect("openai", "chat")
    feed(stream, events)
    stream.end(T0 + end, **end_kw)
    return stream


# A role chunk (no text) at 0.1 s, then text at 0.5, 0.6, 0.7, 0.9 s: TTFT 0.5, gaps 0.1 0.1 0.2.
EVENTS = [(0.1, False), (0.5, True), (0.6, True), (0.7, True), (0.9, True)]


def test_ttft_tpot_and_gaps_match_the_times_fed(otel: Otel) -> None:
    one_stream(otel.tel(), EVENTS, end=1.0)
    (span,) = otel.spans()
    a = span.attributes or {}
    assert a["gen_ai.response.time_to_first_chunk"] == pytest.approx(0.5)
    assert a["sse_middleware.time_per_output_token"] == pytest.approx(0.4 / 3)
    assert a["sse_middleware.token_count_source"] == "chunks"
    assert a["sse_middleware.inter_chunk.p50"] == pytest.approx(0.1)
    assert a["sse_middleware.inter_chunk.p95"] == pytest.approx(0.2)
    assert a["sse_middleware.inter_chunk.max"] == pytest.approx(0.2)
    counts = (a["sse_middleware.chunks_in"], a["sse_middleware.frames_out"], a["sse_middleware.bytes_out"])
    assert counts == (5, 5, 50)
    (ttft,) = otel.points("gen_ai.server.time_to_first_token")
    assert (ttft.count, ttft.sum) == (1, pytest.approx(0.5))
    (tpot,) = otel.points("gen_ai.server.time_per_output_token")
    assert (tpot.count, tpot.sum) == (1, pytest.approx(0.4 / 3))
    (gaps,) = otel.points("sse_middleware.inter_chunk.duration")
    assert (gaps.count, gaps.sum, gaps.max) == (3, pytest.approx(0.4), pytest.approx(0.2))
    (duration,) = otel.points("gen_ai.server.request.duration")
    assert (duration.count, duration.sum) == (1, pytest.approx(1.0))
    assert span.start_time == NS0 and span.end_time == NS0 + 1_000_000_000
    (event,) = span.events
    assert event.name == "sse_middleware.first_token" and event.timestamp == NS0 + 500_000_000


def test_server_span_with_request_attributes_and_trace_id(otel: Otel) -> None:
    route = SimpleNamespace(path="/v1/chat/{model}")
    stream = otel.tel().start(scope(route=route), start_mono=T0, start_ns=NS0)
    assert otel.spans() == []  # nothing exported before the end
    stream.dialect("anthropic", "chat")
    stream.response(model="claude-x", response_id="msg_1", finish_reason="end_turn", input_tokens=7)
    stream.end(T0 + 0.2)
    (span,) = otel.spans()
    assert span.kind is SpanKind.SERVER and span.parent is None
    assert span.name == "chat claude-x"
    assert stream.trace_id == format(span.context.trace_id, "032x")
    assert (
        dict(span.attributes or {}).items()
        >= {
            "http.request.method": "POST",
            "url.path": "/v1/chat/completions",
            "http.route": "/v1/chat/{model}",
            "gen_ai.request.stream": True,
            "gen_ai.provider.name": "anthropic",
            "gen_ai.operation.name": "chat",
            "gen_ai.response.model": "claude-x",
            "gen_ai.response.id": "msg_1",
            "gen_ai.response.finish_reasons": ("end_turn",),
            "gen_ai.usage.input_tokens": 7,
            "sse_middleware.client_disconnected": False,
        }.items()
    )
    assert span.status.status_code is StatusCode.UNSET
    # Metric attributes: low cardinality only (no path, no response id).
    (point,) = otel.points("gen_ai.server.request.duration")
    assert dict(point.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.response.model": "claude-x",
        "http.route": "/v1/chat/{model}",
    }


def test_span_name_without_dialect_uses_route(otel: Otel) -> None:
    otel.tel().start(scope(route=SimpleNamespace(path="/gen")), start_mono=T0, start_ns=NS0).end(T0 + 1)
    otel.tel().start(scope(), start_mono=T0, start_ns=NS0).end(T0 + 1)
    assert [s.name for s in otel.spans()] == ["stream /gen", "stream"]


def test_traceparent_from_headers_is_honoured(otel: Otel) -> None:
    headers = [
        (b"host", b"x"),
        (b"traceparent", TRACEPARENT.encode()),
        (b"tracestate", b"a=1"),
        (b"tracestate", b"b=2"),
    ]  # a repeated header: both kept
    otel.tel().start(scope(headers=headers), start_mono=T0, start_ns=NS0).end(T0 + 1)
    (span,) = otel.spans()
    assert dict(span.context.trace_state) == {"a": "1", "b": "2"}
    assert span.kind is SpanKind.SERVER
    assert span.parent is not None and span.parent.is_remote
    assert format(span.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert format(span.parent.span_id, "016x") == "b7ad6b7169203331"


class _PrefixBaggage(TextMapPropagator):
    """A propagator of the Jaeger kind: every header named ``ctx-<key>`` is baggage, so it walks all the
    carrier's names (``getter.keys``) instead of asking for fixed ones."""

    def extract(self, carrier: Any, context: Any = None, getter: Any = default_getter) -> Any:
        for name in getter.keys(carrier):
            if name.startswith("ctx-"):
                context = baggage.set_baggage(name[4:], ",".join(getter.get(carrier, name)), context)
        return context

    def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
        pass

    @property
    def fields(self) -> set[str]:
        return set()


class _Parents(SpanProcessor):
    """The baggage of the context each span was started in."""

    def __init__(self) -> None:
        self.baggage: list[dict[str, object]] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.baggage.append(dict(baggage.get_all(parent_context)))


def test_a_propagator_that_walks_every_header_name_finds_them(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request headers reach the configured propagator as a carrier it can list (``keys``) as
    well as ask (``get``): repeated names once in the list, their values kept apart."""
    monkeypatch.setattr(propagate, "get_global_textmap", lambda: CompositePropagator([_PrefixBaggage()]))
    parents = _Parents()
    otel.tp.add_span_processor(parents)
    headers = [(b"host", b"x"), (b"ctx-tenant", b"t1"), (b"ctx-tier", b"a"), (b"ctx-tier", b"b")]
    otel.tel().start(scope(headers=headers), start_mono=T0, start_ns=NS0).end(T0 + 1)
    otel.tel().start(scope(headers=headers[:1]), start_mono=T0, start_ns=NS0).end(T0 + 1)
    assert parents.baggage == [{"tenant": "t1", "tier": "a,b"}, {}]  # the control: no such headers


def test_internal_child_when_a_span_is_current(otel: Otel) -> None:
    headers = [(b"traceparent", TRACEPARENT.encode())]  # ignored: the current span wins
    with otel.tp.get_tracer("outer").start_as_current_span("GET /x", kind=SpanKind.SERVER) as outer:
        otel.tel().start(scope(headers=headers), start_mono=T0, start_ns=NS0).end(T0 + 1)
    ours = next(s for s in otel.spans() if s.name == "stream")
    assert ours.kind is SpanKind.INTERNAL
    assert ours.parent is not None and ours.parent.span_id == outer.get_span_context().span_id
    assert ours.context.trace_id == outer.get_span_context().trace_id


def test_nested_under_opentelemetry_instrumentation_asgi(otel: Otel) -> None:
    tel = otel.tel()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        stream = tel.start(scope, start_mono=T0, start_ns=NS0)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        stream.chunk(T0 + 0.3, True)
        await send({"type": "http.response.body", "body": b"data: hi\n\n", "more_body": False})
        stream.frame(10)
        stream.end(T0 + 0.4)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        pass

    asgi_scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/stream",
        "raw_path": b"/stream",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"traceparent", TRACEPARENT.encode())],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }
    wrapped = OpenTelemetryMiddleware(app, tracer_provider=otel.tp, meter_provider=otel.mp)
    asyncio.run(wrapped(asgi_scope, receive, send))
    spans = otel.spans()
    server = next(s for s in spans if s.kind is SpanKind.SERVER)
    ours = next(s for s in spans if s.name == "stream")
    assert ours.kind is SpanKind.INTERNAL
    assert ours.parent is not None and ours.parent.span_id == server.context.span_id
    assert format(ours.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"


def test_error_sets_status_and_keeps_out_of_ttft_tpot(otel: Otel) -> None:
    boom = ValueError("secret detail")
    one_stream(otel.tel(), EVENTS, end=1.0, error_type="upstream_error", exception=boom)
    (span,) = otel.spans()
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "upstream_error"
    assert [e.name for e in span.events] == ["sse_middleware.first_token", "exception"]
    assert (span.events[1].attributes or {})["exception.type"] == "ValueError"
    assert otel.points("gen_ai.server.time_to_first_token") == []
    assert otel.points("gen_ai.server.time_per_output_token") == []
    (duration,) = otel.points("gen_ai.server.request.duration")
    assert duration.attributes["error.type"] == "upstream_error"
    # The span still says what happened before the error.
    assert (span.attributes or {})["gen_ai.response.time_to_first_chunk"] == pytest.approx(0.5)


def test_error_type_derived_from_exception(otel: Otel) -> None:
    class Boom(Exception):
        pass

    one_stream(otel.tel(), [], end=0.1, exception=Boom())
    (span,) = otel.spans()
    error_type = (span.attributes or {})["error.type"]
    assert error_type == f"{__name__}.test_error_type_derived_from_exception.<locals>.Boom"
    assert span.status.status_code is StatusCode.ERROR


def test_error_without_exception_records_no_exception_event(otel: Otel) -> None:
    one_stream(otel.tel(), [], end=0.1, error_type="timeout")
    (span,) = otel.spans()
    assert list(span.events) == []


def test_client_disconnect_is_not_an_error(otel: Otel) -> None:
    one_stream(otel.tel(), EVENTS[:3], end=0.65, client_disconnected=True)
    (span,) = otel.spans()
    assert span.status.status_code is StatusCode.UNSET
    assert (span.attributes or {})["sse_middleware.client_disconnected"] is True
    assert "error.type" not in (span.attributes or {})
    (duration,) = otel.points("gen_ai.server.request.duration")
    assert "error.type" not in duration.attributes


def test_usage_tokens_used_for_tpot(otel: Otel) -> None:
    tel = otel.tel()
    stream = tel.start(scope(), start_mono=T0, start_ns=NS0)
    feed(stream, [(0.2, True), (0.6, True), (1.0, True)])  # 3 chunks over 0.8 s
    stream.response(output_tokens=2)
    stream.response(output_tokens=9)  # a later (final) usage wins
    stream.end(T0 + 1.1)
    (span,) = otel.spans()
    assert (span.attributes or {})["sse_middleware.token_count_source"] == "usage"
    assert (span.attributes or {})["gen_ai.usage.output_tokens"] == 9
    (tpot,) = otel.points("gen_ai.server.time_per_output_token")
    assert tpot.sum == pytest.approx(0.8 / 8)


def test_no_tpot_from_a_single_content_chunk(otel: Otel) -> None:
    stream = otel.tel().start(scope(), start_mono=T0, start_ns=NS0)
    feed(stream, [(0.2, True)])
    stream.response(output_tokens=50)
    stream.end(T0 + 0.3)
    assert otel.points("gen_ai.server.time_per_output_token") == []
    assert len(otel.points("gen_ai.server.time_to_first_token")) == 1


def test_finish_reasons_accumulate_without_duplicates(otel: Otel) -> None:
    stream = otel.tel().start(scope(), start_mono=T0, start_ns=NS0)
    for reason in ("stop", "length", "stop", None):
        stream.response(finish_reason=reason)
    stream.end(T0 + 1)
    assert (otel.spans()[0].attributes or {})["gen_ai.response.finish_reasons"] == ("stop", "length")


def test_end_twice_records_once(otel: Otel) -> None:
    stream = one_stream(otel.tel(), EVENTS, end=1.0)
    stream.end(T0 + 5.0, error_type="late")
    assert len(otel.spans()) == 1
    (duration,) = otel.points("gen_ai.server.request.duration")
    assert duration.count == 1 and "error.type" not in duration.attributes
    assert otel.spans()[0].status.status_code is StatusCode.UNSET


def test_heartbeats_counted(otel: Otel) -> None:
    stream = otel.tel().start(scope(), start_mono=T0, start_ns=NS0)
    for _ in range(3):
        stream.heartbeat()
    stream.end(T0 + 45)
    assert (otel.spans()[0].attributes or {})["sse_middleware.heartbeats"] == 3


def slo_counts(otel: Otel) -> dict[str, int]:
    return {p.attributes["kind"]: p.value for p in otel.points("sse_middleware.slo.violations")}


def test_slo_violations_counted(otel: Otel) -> None:
    tel = otel.tel(slo_ttft=0.2, slo_tpot=0.05)
    one_stream(tel, EVENTS, end=1.0)  # TTFT 0.5 > 0.2, p95 gap 0.2 > 0.05
    a = otel.spans()[-1].attributes or {}
    assert (a["sse_middleware.slo.ttft_met"], a["sse_middleware.slo.tpot_met"]) == (False, False)
    assert slo_counts(otel) == {"ttft": 1, "tpot": 1}
    one_stream(tel, [(0.1, True), (0.12, True), (0.14, True)], end=0.2)  # both met
    a = otel.spans()[-1].attributes or {}
    assert (a["sse_middleware.slo.ttft_met"], a["sse_middleware.slo.tpot_met"]) == (True, True)
    assert slo_counts(otel) == {"ttft": 1, "tpot": 1}
    # Failing after the TTFT objective passed with nothing shown: the user waited; that is a miss.
    one_stream(tel, [], end=3.0, error_type="timeout")
    assert slo_counts(otel) == {"ttft": 2, "tpot": 1}
    # A client that gave up waiting after the objective with nothing shown: also a miss.
    one_stream(tel, [], end=2.0, client_disconnected=True)
    assert slo_counts(otel) == {"ttft": 3, "tpot": 1}
    # Failing fast, before the objective: not judged.
    one_stream(tel, [], end=0.1, error_type="boom")
    assert slo_counts(otel) == {"ttft": 3, "tpot": 1}
    assert "sse_middleware.slo.ttft_met" not in (otel.spans()[-1].attributes or {})


def test_no_slo_attributes_without_objectives(otel: Otel) -> None:
    one_stream(otel.tel(), EVENTS, end=1.0)
    assert not any(k.startswith("sse_middleware.slo") for k in otel.spans()[0].attributes or {})
    assert otel.points("sse_middleware.slo.violations") == []


def test_bucket_boundaries_follow_the_conventions(otel: Otel) -> None:
    one_stream(otel.tel(), EVENTS, end=1.0)
    for name, bounds in SPEC_BUCKETS.items():
        (point,) = otel.points(name)
        assert list(point.explicit_bounds) == bounds, name
    (gaps,) = otel.points("sse_middleware.inter_chunk.duration")
    assert list(gaps.explicit_bounds)[:13] == SPEC_BUCKETS["gen_ai.server.time_per_output_token"]
    assert list(gaps.explicit_bounds)[-1] == 80.0


def test_long_stream_keeps_memory_bounded_and_stats_close(otel: Otel) -> None:
    n = 3 * FOLD_AT + 123
    gaps = [0.0005 + 0.001 * ((i * 37) % 100) for i in range(n)]  # 0.5..99.5 ms, well mixed, off bounds
    stream = otel.tel().start(scope(), start_mono=T0, start_ns=NS0)
    now = T0 + 0.1
    stream.chunk(now, True)
    for gap in gaps:
        now += gap
        stream.chunk(now, True)
        assert len(stream._gaps) < FOLD_AT
    stream.end(now)
    a = otel.spans()[0].attributes or {}
    exact = sorted(gaps)
    assert a["sse_middleware.inter_chunk.p50"] == pytest.approx(exact[n // 2], abs=0.002)
    assert a["sse_middleware.inter_chunk.p95"] == pytest.approx(exact[int(n * 0.95)], abs=0.002)
    assert a["sse_middleware.inter_chunk.max"] == pytest.approx(0.0995)
    # Folded gaps reach the histogram as bucket means: bucket counts, count and sum stay exact.
    (hist,) = otel.points("sse_middleware.inter_chunk.duration")
    assert hist.count == n and hist.sum == pytest.approx(sum(gaps), rel=1e-9)
    expected = [0] * (len(hist.explicit_bounds) + 1)
    for gap in gaps:
        expected[bisect.bisect_left(hist.explicit_bounds, gap)] += 1
    assert list(hist.bucket_counts) == expected


def test_gap_sampling_records_every_nth_gap_and_keeps_span_stats_exact(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every 3rd gap from a phase drawn per stream (so short streams are not all sampled alike): 0.4
    draws phase 1 of 3, the control 0.0 draws phase 0, one gap more of the 100."""
    tel = otel.tel(gap_sample_every=3)
    counts = []
    for draw in (0.4, 0.0):
        monkeypatch.setattr(instruments_module.random, "random", lambda draw=draw: draw)
        stream = tel.start(scope(), start_mono=T0, start_ns=NS0)
        feed(stream, [(0.1 + 0.01 * i, True) for i in range(101)])  # 100 gaps of 10 ms
        stream.end(T0 + 1.2)
        counts.append(otel.count("sse_middleware.inter_chunk.duration") - sum(counts))
    assert counts == [len(range(1, 100, 3)), len(range(0, 100, 3))]
    a = otel.spans()[0].attributes or {}
    assert a["sse_middleware.inter_chunk.max"] == pytest.approx(0.01)
    (tpot,) = otel.points("gen_ai.server.time_per_output_token")
    assert tpot.sum == pytest.approx(0.02)  # TPOT and span stats use every gap: 0.01 a stream, twice


def test_gap_sampling_of_a_folded_stream_rounds_without_bias(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 5 * FOLD_AT  # 20480 gaps of 20 ms, all folded into one bucket; 20480 = 3 * 6826 + 2
    tel = otel.tel(gap_sample_every=3)
    counts = []
    for draw in (0.6, 0.7):  # one extra copy with probability 2/3: when 3 * draw < 2
        monkeypatch.setattr(gaps.random, "random", lambda draw=draw: draw)
        stream = tel.start(scope(), start_mono=T0, start_ns=NS0)
        feed(stream, [(0.1 + 0.02 * i, True) for i in range(n + 1)])
        stream.end(T0 + 0.2 + 0.02 * n)
        counts.append(sum(p.count for p in otel.points("sse_middleware.inter_chunk.duration")) - sum(counts))
    assert counts == [n // 3 + 1, n // 3]


def test_metric_exemplars_point_at_the_stream_span(otel: Otel) -> None:
    stream = one_stream(otel.tel(), EVENTS, end=1.0)
    (ttft,) = otel.points("gen_ai.server.time_to_first_token")
    assert ttft.exemplars and format(ttft.exemplars[0].trace_id, "032x") == stream.trace_id
    assert ttft.exemplars[0].span_id == otel.spans()[0].context.span_id


def test_noop_provider_costs_nothing_and_has_no_trace_id() -> None:
    from opentelemetry.metrics import NoOpMeterProvider

    tel = Telemetry(trace.NoOpTracerProvider(), NoOpMeterProvider(), slo_ttft=0.1, slo_tpot=0.1)
    assert tel.start(scope(), start_mono=T0, start_ns=NS0) is None  # no recorder: nothing per token
    from opentelemetry.sdk.metrics import MeterProvider

    tel = Telemetry(trace.NoOpTracerProvider(), MeterProvider(), slo_ttft=0.1, slo_tpot=0.1)
    stream = one_stream(tel, EVENTS, end=1.0)  # the control: metrics alone are worth recording
    assert stream.trace_id is None


GLOBAL_SCRIPT = """
import json, time
from opentelemetry import metrics, trace
from sse_middleware._telemetry.recorder import Telemetry

# Made before any provider exists, as when an app module is imported before opentelemetry-instrument
# (or the app's own setup) installs the global providers.
tel = Telemetry()
early = tel.start({"method": "GET", "path": "/", "headers": []}, start_mono=0.0, start_ns=time.time_ns())

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.propagators.textmap import TextMapPropagator, default_getter
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
tp = TracerProvider(); tp.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(tp)
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

s = tel.start({"method": "POST", "path": "/x", "headers": []}, start_mono=0.0, start_ns=time.time_ns())
s.chunk(0.25, True); s.chunk(0.5, True); s.end(0.6)
names = sorted(m.name for rm in reader.get_metrics_data().resource_metrics
               for sm in rm.scope_metrics for m in sm.metrics)
print(json.dumps({"early": early, "trace_id": s.trace_id,
                  "spans": [sp.name for sp in exporter.get_finished_spans()], "metrics": names}))
"""


def test_global_providers_set_after_construction_are_used() -> None:
    path = os.pathsep.join([str(PACKAGE_PARENT), os.environ.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(GLOBAL_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["early"] is None  # no provider yet: no recorder at all, and no crash
    assert result["trace_id"] is not None and len(result["trace_id"]) == 32
    assert result["spans"] == ["stream"]
    assert {
        "gen_ai.server.time_to_first_token",
        "gen_ai.server.time_per_output_token",
        "gen_ai.server.request.duration",
        "sse_middleware.inter_chunk.duration",
    } <= set(result["metrics"])


def test_real_otlp_exporters_to_a_local_receiver(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    with OTLPReceiver() as rx:
        tp = TracerProvider()
        tp.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=rx.traces_url, timeout=10)))
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=rx.metrics_url, timeout=10), export_interval_millis=3_600_000
        )
        mp = MeterProvider(metric_readers=[reader])
        stream = one_stream(Telemetry(tp, mp), EVENTS, end=1.0)
        tp.shutdown()
        mp.shutdown()  # collects and exports once more
        spans = rx.spans()
        received = {m.name: m for m in rx.metrics()}
    assert rx.paths and set(rx.paths) <= {"/v1/traces", "/v1/metrics"}
    (span,) = spans
    assert span.name == "chat" and span.trace_id.hex() == stream.trace_id
    attrs = attributes(span)
    assert attrs["gen_ai.response.time_to_first_chunk"] == pytest.approx(0.5)
    assert attrs["gen_ai.request.stream"] is True
    assert span.events[0].time_unix_nano == NS0 + 500_000_000
    ttft = received["gen_ai.server.time_to_first_token"].histogram.data_points[0]
    assert (ttft.count, ttft.sum) == (1, pytest.approx(0.5))
    assert list(ttft.explicit_bounds) == SPEC_BUCKETS["gen_ai.server.time_to_first_token"]
    assert attributes(ttft) == {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"}


# -- issue 15: request model, the app's attributes, the parent span, abandoned streams -----------------


def peek(body: bytes) -> BodyPeek:
    seen = BodyPeek()
    seen.see({"type": "http.request", "body": body, "more_body": False})
    return seen


def test_request_model_on_the_span_and_the_metrics(otel: Otel) -> None:
    body = json.dumps({"messages": [{"role": "user", "model": "nested"}], "model": "gpt-4o"}).encode()
    stream = otel.tel().start(scope(), start_mono=T0, start_ns=NS0, body=peek(body))
    stream.dialect("openai", "chat")
    feed(stream, EVENTS)
    stream.response(model="gpt-4o-2024-08-06")
    stream.end(T0 + 1.0)
    (span,) = otel.spans()
    assert (span.attributes or {})["gen_ai.request.model"] == "gpt-4o"
    for name in ("gen_ai.server.time_to_first_token", "gen_ai.server.request.duration"):
        (point,) = otel.points(name)
        assert point.attributes["gen_ai.request.model"] == "gpt-4o"
        assert point.attributes["gen_ai.response.model"] == "gpt-4o-2024-08-06"
    # Control: no body (or one without a top-level "model"), no attribute at all.
    one_stream(otel.tel(), EVENTS, end=1.0)
    otel.tel().start(scope(), start_mono=T0, start_ns=NS0, body=peek(b'{"x": {"model": "n"}}')).end(T0 + 1)
    assert [("gen_ai.request.model" in (s.attributes or {})) for s in otel.spans()] == [True, False, False]


def test_annotate_adds_span_attributes_and_names_the_model(otel: Otel) -> None:
    asgi_scope = scope()
    annotate(asgi_scope, {"session.id": "conv-1", "user.id": "u-7"}, request_model="from-hook")
    stream = otel.tel().start(asgi_scope, start_mono=T0, start_ns=NS0, body=peek(b'{"model": "body"}'))
    annotate(asgi_scope, {"gen_ai.conversation.id": "conv-1", "tenant.id": "acme"})  # later: still in
    stream.dialect("openai", "chat")
    feed(stream, EVENTS)
    stream.end(T0 + 1.0)
    late = otel.tel().start(scope_2 := scope(), start_mono=T0, start_ns=NS0, body=peek(b'{"model": "b"}'))
    annotate(scope_2, request_model="named-late")  # from the generator, after the response started
    late.end(T0 + 1.0)
    assert (otel.spans()[1].attributes or {})["gen_ai.request.model"] == "named-late"
    attrs = otel.spans()[0].attributes or {}
    assert {k: attrs[k] for k in ("session.id", "user.id", "gen_ai.conversation.id", "tenant.id")} == {
        "session.id": "conv-1",
        "user.id": "u-7",
        "gen_ai.conversation.id": "conv-1",
        "tenant.id": "acme",
    }
    assert attrs["gen_ai.request.model"] == "from-hook"  # the hook wins over the body
    point, _ = otel.points("gen_ai.server.request.duration")
    assert point.attributes["gen_ai.request.model"] == "from-hook"
    assert "user.id" not in point.attributes and "session.id" not in point.attributes  # span only


def test_annotate_checks_what_it_is_given() -> None:
    for bad in ({"k": object()}, {"k": [1, "a"]}, {"": 1}, {"k": b"bytes"}):
        with pytest.raises(TypeError):
            annotate({}, bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        annotate({}, request_model="")
    annotate(asgi_scope := {}, {"k": [1, 2], "b": True, "f": 0.5})
    assert asgi_scope["sse_middleware.telemetry"]["attributes"] == {"k": [1, 2], "b": True, "f": 0.5}


@pytest.mark.parametrize("mark", [True, False])
def test_a_failed_stream_marks_the_enclosing_server_span(otel: Otel, mark: bool) -> None:
    tracer = otel.tp.get_tracer("contrib-asgi")
    with tracer.start_as_current_span("POST /v1/chat/completions", kind=SpanKind.SERVER):
        otel.tel().start(scope(), start_mono=T0, start_ns=NS0, mark_parent=mark).end(
            T0 + 1, exception=RuntimeError("boom")
        )
    with tracer.start_as_current_span("POST /ok", kind=SpanKind.SERVER):
        otel.tel().start(scope(), start_mono=T0, start_ns=NS0, mark_parent=mark).end(
            T0 + 1, client_disconnected=True
        )
    servers = {s.name: s for s in otel.spans() if s.kind is SpanKind.SERVER}
    parent = servers["POST /v1/chat/completions"]
    if mark:
        assert parent.status.status_code is StatusCode.ERROR
        assert (parent.attributes or {})["error.type"] == "RuntimeError"
    else:  # the control: the setting off leaves it as the HTTP layer left it
        assert parent.status.status_code is StatusCode.UNSET
        assert "error.type" not in (parent.attributes or {})
    assert servers["POST /ok"].status.status_code is StatusCode.UNSET  # a client that left: no error


def test_abandoned_and_failed_streams_stay_out_of_ttft_and_tpot(otel: Otel) -> None:
    tel = otel.tel()
    one_stream(tel, EVENTS, end=0.95, client_disconnected=True)
    one_stream(tel, EVENTS, end=0.95, error_type="timeout")
    assert otel.points("gen_ai.server.time_to_first_token") == []
    assert otel.points("gen_ai.server.time_per_output_token") == []
    assert sum(p.count for p in otel.points("gen_ai.server.request.duration")) == 2
    one_stream(tel, EVENTS, end=1.0)  # the control: a stream that ended well is counted
    (ttft,) = otel.points("gen_ai.server.time_to_first_token")
    assert ttft.count == 1


def test_the_middleware_hands_the_body_the_app_read_to_telemetry(otel: Otel) -> None:
    """Through the real shell: the app reads its JSON body; the span and the metrics name the model."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def chat(request: Request) -> StreamingResponse:
        body = await request.json()

        async def gen() -> Any:
            yield f'data: {{"model": "{body["model"]}-0613", "choices": []}}\n\n'

        return StreamingResponse(gen(), media_type="text/event-stream")

    app = StreamingMiddleware(
        Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])]),
        StreamingSettings(),
        tracer_provider=otel.tp,
        meter_provider=otel.mp,
    )

    async def run() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            payload = {"messages": [{"role": "user", "content": "hi"}], "model": "gpt-4o", "stream": True}
            await client.post("/v1/chat/completions", json=payload)
            await client.post("/v1/chat/completions", content=b'{"model": "x"}', headers={"x": "y"})

    asyncio.run(run())
    first, second = otel.spans()
    assert (first.attributes or {})["gen_ai.request.model"] == "gpt-4o"
    assert (second.attributes or {})["gen_ai.request.model"] == "x"


def test_the_lab_reads_the_standard_exporter_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PACKAGE_PARENT / "examples"))
    import lab_telemetry

    def chosen(**env: str) -> tuple[list[str], list[str]]:
        for name in [n for n in os.environ if n.startswith("OTEL_")]:
            monkeypatch.delenv(name)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return lab_telemetry.exporters("TRACES"), lab_telemetry.exporters("METRICS")

    assert chosen() == (["console"], ["console"])
    assert chosen(OTEL_EXPORTER_OTLP_ENDPOINT="http://x") == (["otlp"], ["otlp"])
    # Phoenix: traces to its endpoint, no metrics (it has no metrics endpoint: 405 on each export).
    phoenix = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x/v1/traces", "OTEL_METRICS_EXPORTER": "none"}
    assert chosen(**phoenix) == (["otlp"], [])
    assert chosen(OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="prometheus, console") == (
        [],
        ["prometheus", "console"],
    )
    with pytest.raises(SystemExit, match="OTEL_METRICS_EXPORTER"):
        chosen(OTEL_METRICS_EXPORTER="zipkin")
