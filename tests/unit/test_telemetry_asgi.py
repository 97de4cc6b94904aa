"""Telemetry through the whole middleware: one span per stream with values from the stream itself,
metrics, errors, and nesting under the contrib ASGI instrumentation. In-process, on asyncio and trio."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.trace import SpanKind, StatusCode

from sse_middleware import StreamingMiddleware, StreamingSettings

from ..support.apps import api
from ..support.otel import Otel

pytestmark = pytest.mark.anyio


def wrap(otel: Otel, **settings: Any) -> StreamingMiddleware:
    return StreamingMiddleware(
        api,
        StreamingSettings(**settings),
        tracer_provider=otel.tp,
        meter_provider=otel.mp,
    )


async def get(app: Any, path: str, method: str = "GET") -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        return await client.request(method, path, json={} if method == "POST" else None)


async def test_one_span_per_stream_with_values_from_the_stream(otel: Otel) -> None:
    await get(wrap(otel, inter_chunk_sample_every=1), "/openai?n=10&delay=0.02")
    (span,) = otel.ours()
    attrs = span.attributes or {}
    assert span.kind is SpanKind.SERVER
    assert attrs["gen_ai.provider.name"] == "openai" and attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.response.model"] == "test-model" and attrs["gen_ai.response.id"] == "chatcmpl-1"
    assert tuple(attrs["gen_ai.response.finish_reasons"]) == ("stop",)  # type: ignore[arg-type]
    assert 0.015 < attrs["gen_ai.response.time_to_first_chunk"] < 1.0  # type: ignore[operator]
    assert attrs["sse_middleware.token_count_source"] == "chunks"
    (ttft,) = otel.points("gen_ai.server.time_to_first_token")
    assert ttft.count == 1
    (tpot,) = otel.points("gen_ai.server.time_per_output_token")
    assert 0.01 < tpot.sum < 0.5
    assert sum(p.count for p in otel.points("sse_middleware.inter_chunk.duration")) == 9


async def test_anthropic_usage_counts_the_tokens(otel: Otel) -> None:
    await get(wrap(otel), "/v1/messages?n=6&delay=0.01", method="POST")
    attrs = otel.ours()[0].attributes or {}
    assert attrs["gen_ai.provider.name"] == "anthropic"
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (7, 6)
    assert attrs["sse_middleware.token_count_source"] == "usage"


async def test_an_error_sets_status_and_type_and_skips_ttft(otel: Otel) -> None:
    await get(wrap(otel), "/openai?n=10&fail_at=3")
    (span,) = otel.ours()
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "RuntimeError"
    assert otel.points("gen_ai.server.time_to_first_token") == []
    (duration,) = otel.points("gen_ai.server.request.duration")
    assert duration.attributes["error.type"] == "RuntimeError"


async def test_no_span_for_non_streams_or_with_telemetry_off(otel: Otel) -> None:
    await get(wrap(otel), "/json")
    assert otel.ours() == []
    await get(wrap(otel, telemetry=False), "/openai?n=3")
    assert otel.ours() == []  # the control for the first test: the span is ours


async def test_child_of_the_contrib_asgi_span_and_ended_before_it(otel: Otel) -> None:
    app = OpenTelemetryMiddleware(wrap(otel), tracer_provider=otel.tp, exclude_spans=["send", "receive"])
    await get(app, "/openai?n=5&delay=0.01")
    (ours,) = otel.ours()
    theirs = [s for s in otel.spans() if s.kind is SpanKind.SERVER and s is not ours]
    assert len(theirs) == 1
    assert ours.kind is SpanKind.INTERNAL
    assert ours.parent is not None and ours.parent.span_id == theirs[0].context.span_id
    assert ours.context.trace_id == theirs[0].context.trace_id
    assert ours.end_time is not None and theirs[0].end_time is not None
    assert ours.end_time <= theirs[0].end_time


def the_contrib_span(otel: Otel) -> Any:
    (theirs,) = [s for s in otel.spans() if s.kind is SpanKind.SERVER and s not in otel.ours()]
    return theirs


@pytest.mark.parametrize("mark", [True, False])
async def test_a_failed_stream_marks_the_contrib_span_unless_mark_parent_span_is_off(
    otel: Otel, mark: bool
) -> None:
    """The HTTP server span of opentelemetry-instrumentation-asgi around us says 200 OK: a stream that
    fails after its start marks it ERROR (so the trace list shows the failure), unless the setting is off;
    our own span says it either way."""
    inner = wrap(otel) if mark else wrap(otel, mark_parent_span=False)  # the default, and the setting off
    app = OpenTelemetryMiddleware(inner, tracer_provider=otel.tp, exclude_spans=["send", "receive"])
    await get(app, "/openai?n=10&fail_at=3")
    (ours,) = otel.ours()
    assert ours.status.status_code is StatusCode.ERROR
    theirs = the_contrib_span(otel)
    if mark:
        assert theirs.status.status_code is StatusCode.ERROR
        assert (theirs.attributes or {})["error.type"] == "RuntimeError"
    else:
        assert theirs.status.status_code is StatusCode.UNSET
        assert "error.type" not in (theirs.attributes or {})


async def test_control_a_stream_that_ends_well_leaves_the_contrib_span_unset(otel: Otel) -> None:
    app = OpenTelemetryMiddleware(wrap(otel), tracer_provider=otel.tp, exclude_spans=["send", "receive"])
    await get(app, "/openai?n=3")
    assert the_contrib_span(otel).status.status_code is StatusCode.UNSET


async def test_w3c_parent_is_continued(otel: Otel) -> None:
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=wrap(otel)), base_url="http://test"
    ) as client:
        await client.get("/openai?n=2", headers={"traceparent": f"00-{trace_id}-b7ad6b7169203331-01"})
    assert format(otel.ours()[0].context.trace_id, "032x") == trace_id


async def test_error_id_is_the_trace_id(otel: Otel) -> None:
    response = await get(wrap(otel), "/sse?n=3&fail_at=1")
    trace_id = format(otel.ours()[0].context.trace_id, "032x")
    assert trace_id in response.text


async def test_the_per_gap_histogram_is_sampled_by_default(otel: Otel) -> None:
    """Every 32nd gap from a random phase: one SDK record per gap would cost more than the rest of the
    token's way through the middleware (docs/benchmarks.md). The span's own percentiles use every gap."""
    await get(wrap(otel), "/openai?n=65&delay=0.001")
    recorded = sum(p.count for p in otel.points("sse_middleware.inter_chunk.duration"))
    assert recorded == 2  # 64 gaps / 32, whatever the phase
    assert (otel.ours()[0].attributes or {})["sse_middleware.inter_chunk.p95"] > 0
