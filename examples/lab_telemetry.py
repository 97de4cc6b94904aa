"""OpenTelemetry for the lab and the examples, configured by the standard ``OTEL_*`` variables.

- ``OTEL_TRACES_EXPORTER``: ``otlp`` (OTLP/HTTP protobuf), ``console`` or ``none``.
- ``OTEL_METRICS_EXPORTER``: ``otlp``, ``console``, ``prometheus`` (a pull endpoint on
  ``OTEL_EXPORTER_PROMETHEUS_HOST``:``OTEL_EXPORTER_PROMETHEUS_PORT``, default localhost:9464; needs
  ``opentelemetry-exporter-prometheus``) or ``none``. A comma-separated list sends to each.
- Unset, a signal goes to OTLP when an OTLP endpoint is set for it (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
  ``OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT``), else to the console.
- The OTLP exporters read their endpoints (per-signal ones used as given, the common one with
  ``/v1/traces`` or ``/v1/metrics`` appended) and ``OTEL_EXPORTER_OTLP_HEADERS`` themselves;
  ``OTEL_METRIC_EXPORT_INTERVAL`` (ms) sets how often metrics are pushed; ``OTEL_SERVICE_NAME`` names
  the service.

Arize Phoenix takes traces only: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:6006/v1/traces
OTEL_METRICS_EXPORTER=none`` (with only the common endpoint set, every metrics export gets a 405).
"""

from __future__ import annotations

import json
import os
import sys
from typing import TextIO

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricReader,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor

KNOWN = {"TRACES": ("otlp", "console", "none"), "METRICS": ("otlp", "console", "prometheus", "none")}


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


def exporters(signal: str) -> list[str]:
    """The exporters ``OTEL_<signal>_EXPORTER`` names for ``TRACES`` or ``METRICS`` (see above)."""
    raw = os.environ.get(f"OTEL_{signal}_EXPORTER")
    if raw is None:
        endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")
        return ["otlp"] if any(os.environ.get(name) for name in endpoints) else ["console"]
    names = [name.strip().lower() for name in raw.split(",") if name.strip()]
    unknown = sorted(set(names) - set(KNOWN[signal]))
    if unknown:
        raise SystemExit(f"OTEL_{signal}_EXPORTER={raw!r}: unknown {unknown}; known: {KNOWN[signal]}")
    return [name for name in names if name != "none"]


def setup(
    service_name: str = "sse-middleware-lab", out: TextIO = sys.stdout
) -> tuple[TracerProvider, MeterProvider]:
    """Providers as the ``OTEL_*`` variables say (not installed globally: pass them to the middleware,
    or install them with :func:`install`)."""
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name)})
    tracer_provider = TracerProvider(resource=resource)
    for name in exporters("TRACES"):
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            tracer_provider.add_span_processor(
                SimpleSpanProcessor(ConsoleSpanExporter(out=out, formatter=_span_line))
            )
    interval = int(os.environ.get("OTEL_METRIC_EXPORT_INTERVAL", "15000"))
    readers: list[MetricReader] = []
    for name in exporters("METRICS"):
        if name == "prometheus":
            readers.append(_prometheus_reader())
        elif name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            readers.append(
                PeriodicExportingMetricReader(OTLPMetricExporter(), export_interval_millis=interval)
            )
        else:
            console = ConsoleMetricExporter(out=out, formatter=_metrics_lines)
            readers.append(PeriodicExportingMetricReader(console, export_interval_millis=interval))
    return tracer_provider, MeterProvider(resource=resource, metric_readers=readers)


def _prometheus_reader() -> MetricReader:
    """A pull endpoint for Prometheus to scrape (``/metrics`` on the configured host and port)."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import start_http_server

    host = os.environ.get("OTEL_EXPORTER_PROMETHEUS_HOST", "localhost")
    start_http_server(int(os.environ.get("OTEL_EXPORTER_PROMETHEUS_PORT", "9464")), addr=host)
    return PrometheusMetricReader()


def install(service_name: str) -> None:
    """Set :func:`setup`'s providers as the global ones (for apps that use the global providers, as
    ``StreamingMiddleware`` does by default), unless something (``opentelemetry-instrument``) already
    did; flushed at exit."""
    from opentelemetry import metrics, trace

    if type(trace.get_tracer_provider()).__name__ != "ProxyTracerProvider":
        return  # opentelemetry-instrument (or the app) configured OpenTelemetry already
    tracer_provider, meter_provider = setup(service_name)
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)


def describe() -> str:
    traces, metrics = (", ".join(exporters(signal)) or "none" for signal in ("TRACES", "METRICS"))
    return f"traces -> {traces}; metrics -> {metrics}"
