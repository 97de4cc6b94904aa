"""OpenTelemetry for the lab: spans and metrics to the console, or to OTLP/HTTP when configured.

Set ``OTEL_EXPORTER_OTLP_ENDPOINT`` (e.g. ``http://127.0.0.1:4318``) to send to a collector, Jaeger or
Grafana instead of printing; the exporters read that variable (and ``OTEL_EXPORTER_OTLP_HEADERS``)
themselves. ``OTEL_METRIC_EXPORT_INTERVAL`` (ms) changes how often metrics are exported.

Not meant to be run directly; ``examples/lab.py`` uses it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TextIO

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)


def _span_line(span: ReadableSpan) -> str:
    """One line per span: a person watching the terminal sees each stream's TTFT as it ends."""
    duration = ((span.end_time or 0) - (span.start_time or 0)) / 1e9
    attrs = json.dumps(dict(span.attributes or {}), ensure_ascii=False, default=str)
    return f"[otel span] {span.name} {duration:.3f}s {span.status.status_code.name} {attrs}\n"


def _metrics_lines(data: MetricsData) -> str:
    """Histograms as count/sum/mean per metric and attribute set, instead of pages of JSON."""
    lines = []
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in getattr(metric.data, "data_points", ()):
                    attrs = json.dumps(dict(point.attributes or {}), ensure_ascii=False, default=str)
                    count = getattr(point, "count", None)
                    if count is not None:
                        mean = point.sum / count if count else 0.0
                        value = f"count={count} mean={mean:.4f}{metric.unit or ''}"
                    else:
                        value = f"value={getattr(point, 'value', '?')}"
                    lines.append(f"[otel metric] {metric.name} {value} {attrs}\n")
    return "".join(lines)


def setup(service_name: str = "sse-middleware-lab", out: TextIO = sys.stdout,
          ) -> tuple[TracerProvider, MeterProvider]:
    """Providers for the lab (not installed globally: they are passed to the middleware)."""
    resource = Resource.create({"service.name": service_name})
    tracer_provider = TracerProvider(resource=resource)
    interval = int(os.environ.get("OTEL_METRIC_EXPORT_INTERVAL", "15000"))
    span_exporter: SpanExporter
    metric_exporter: MetricExporter
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        span_exporter, metric_exporter = OTLPSpanExporter(), OTLPMetricExporter()
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    else:
        span_exporter = ConsoleSpanExporter(out=out, formatter=_span_line)
        metric_exporter = ConsoleMetricExporter(out=out, formatter=_metrics_lines)
        tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    reader = PeriodicExportingMetricReader(metric_exporter, export_interval_millis=interval)
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    return tracer_provider, meter_provider


def describe() -> str:
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if endpoint:
        return f"OTLP/HTTP -> {endpoint}"
    return "console (set OTEL_EXPORTER_OTLP_ENDPOINT for OTLP/HTTP)"
