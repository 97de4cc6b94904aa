"""What a stream's telemetry asks of the OpenTelemetry SDK, and when (issue 14): an open stream holds no
SDK span (it is made at the end, dated from the request's arrival, or when its trace id is asked for);
the tracer is taken at the first stream, not when the middleware is built; the per-gap records carry
no exemplar. Private SDK providers throughout, as in test_telemetry.py."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import SpanKind, StatusCode

from sse_middleware import StreamingMiddleware, StreamingSettings

from ..support.apps import api
from ..support.otel import Otel
from .test_telemetry import EVENTS, NS0, T0, feed, scope


class Started(SpanProcessor):
    """The names of the spans the SDK was asked to start, in order."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.names.append(span.name)

    def on_end(self, span: ReadableSpan) -> None:
        pass


def started(otel: Otel) -> Started:
    processor = Started()
    otel.tp.add_span_processor(processor)
    return processor


def test_an_open_stream_holds_no_sdk_span(otel: Otel) -> None:
    spans = started(otel)
    stream = otel.tel().start(scope(), start_mono=T0, start_ns=NS0)
    assert stream is not None
    stream.dialect("openai", "chat")
    feed(stream, EVENTS)
    stream.heartbeat()
    assert spans.names == []  # the whole stream ran with nothing of the SDK's
    stream.end(T0 + 1.0)
    assert spans.names == ["chat"]
    (span,) = otel.spans()
    assert (span.start_time, span.end_time) == (NS0, NS0 + 1_000_000_000)  # dated from the request


def test_a_trace_id_asked_early_names_the_span_that_ends(otel: Otel) -> None:
    """A failing stream's error id is asked for before its end: the span is made then, once, and the
    end completes that same span (its final name, the attributes, the status)."""
    spans = started(otel)
    stream = otel.tel().start(scope(), start_mono=T0, start_ns=NS0)
    assert stream is not None
    stream.dialect("openai", "chat")
    feed(stream, EVENTS[:2])
    trace_id = stream.trace_id
    assert spans.names == ["chat"] and trace_id is not None and len(trace_id) == 32
    assert stream.trace_id == trace_id
    stream.response(model="gpt-x")
    stream.end(T0 + 1.0, error_type="timeout")
    (span,) = otel.spans()
    assert spans.names == ["chat"]  # not a second span
    assert format(span.context.trace_id, "032x") == trace_id
    assert span.name == "chat gpt-x" and span.start_time == NS0
    assert span.status.status_code is StatusCode.ERROR
    attrs = span.attributes or {}
    assert (attrs["gen_ai.response.model"], attrs["sse_middleware.chunks_in"]) == ("gpt-x", 2)
    assert attrs["error.type"] == "timeout" and attrs["http.request.method"] == "POST"


def test_gap_records_carry_no_exemplar_under_a_current_span(otel: Otel) -> None:
    """Under an HTTP server span (the contrib instrumentation's), the SDK would sample an exemplar on
    every record made in its context; each gap record would pay for one pointing at that span."""
    with otel.tp.get_tracer("contrib-asgi").start_as_current_span("POST /x", kind=SpanKind.SERVER):
        stream = otel.tel(gap_sample_every=1).start(scope(), start_mono=T0, start_ns=NS0)
        assert stream is not None
        feed(stream, EVENTS)
        stream.end(T0 + 1.0)
    data = otel.reader.get_metrics_data()  # once: a collection hands the exemplars over and drops them
    points = (
        {
            m.name: m.data.data_points[0]
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
        }
        if data
        else {}
    )
    gaps = points["sse_middleware.inter_chunk.duration"]
    assert gaps.count == 3 and list(gaps.exemplars) == []
    # The control: in the same collection the SDK sampled one for TTFT, recorded in our span's context.
    (exemplar,) = points["gen_ai.server.time_to_first_token"].exemplars
    assert exemplar.span_id == otel.ours()[0].context.span_id


async def get(app: Any, path: str) -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        (await client.get(path)).raise_for_status()


@pytest.mark.anyio
async def test_the_tracer_is_taken_at_the_first_stream_not_when_built(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FastAPI's own telemetry tests count the calls to ``get_tracer`` on the global provider: a
    middleware that never streams must make none."""
    calls: list[str] = []
    real = otel.tp.get_tracer

    def counted(name: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(otel.tp, "get_tracer", counted)
    app = StreamingMiddleware(api, StreamingSettings(), tracer_provider=otel.tp, meter_provider=otel.mp)
    await get(app, "/json")
    assert calls == []  # built and answered a response that is no stream: nothing asked
    await get(app, "/openai?n=2")
    await get(app, "/openai?n=2")
    assert calls == ["sse_middleware"]  # once, at the first stream
    assert len(otel.ours()) == 2
