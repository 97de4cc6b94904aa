"""OpenTelemetry for tests: private SDK providers with in-memory exporters (``Otel``), whose spans and
metric points can be counted, and a tiny OTLP/HTTP (protobuf) receiver on 127.0.0.1 (``OTLPReceiver``).

Why a receiver and not a mock exporter: the point is that what we emit survives the *real* exporters and
wire format (attribute types, timestamps, bucket boundaries), as a collector would receive it. It decodes
the ``ExportTraceServiceRequest`` / ``ExportMetricsServiceRequest`` protobufs the exporters POST to
``/v1/traces`` and ``/v1/metrics`` and keeps them for assertions.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sse_middleware._telemetry.recorder import Telemetry


class Otel:
    """Private SDK providers (never the global ones) with in-memory exporters."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tp = TracerProvider()
        self.tp.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.mp = MeterProvider(metric_readers=[self.reader])

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def ours(self) -> list[ReadableSpan]:
        """The middleware's spans (not those of, e.g., the contrib ASGI instrumentation around it)."""
        return [s for s in self.spans() if s.instrumentation_scope.name == "sse_middleware"]

    def points(self, name: str) -> list[Any]:
        """The data points of metric ``name`` (one per attribute set); cumulative."""
        data = self.reader.get_metrics_data()
        return [
            p
            for rm in (data.resource_metrics if data else ())
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == name
            for p in m.data.data_points
        ]

    def tel(self, **settings: float) -> Telemetry:
        """The middleware's telemetry factory on these providers."""
        return Telemetry(self.tp, self.mp, **settings)

    def count(self, name: str) -> int:
        """How many observations a histogram holds, summed over attribute sets."""
        return sum(p.count for p in self.points(name))

    def shutdown(self) -> None:
        self.tp.shutdown()
        self.mp.shutdown()


class OTLPReceiver:
    """``with OTLPReceiver() as rx:`` then point exporters at ``rx.traces_url`` / ``rx.metrics_url``."""

    def __init__(self) -> None:
        self.trace_requests: list[ExportTraceServiceRequest] = []
        self.metric_requests: list[ExportMetricsServiceRequest] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                encoding = self.headers.get("Content-Encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                reply = receiver._accept(self.path, body)
                if reply is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.traces_url = f"http://127.0.0.1:{self.port}/v1/traces"
        self.metrics_url = f"http://127.0.0.1:{self.port}/v1/metrics"
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)

    def _accept(self, path: str, body: bytes) -> bytes | None:
        with self._lock:
            self.paths.append(path)
            if path == "/v1/traces":
                self.trace_requests.append(ExportTraceServiceRequest.FromString(body))
                reply: bytes = ExportTraceServiceResponse().SerializeToString()
                return reply
            if path == "/v1/metrics":
                self.metric_requests.append(ExportMetricsServiceRequest.FromString(body))
                reply = ExportMetricsServiceResponse().SerializeToString()
                return reply
        return None

    def __enter__(self) -> OTLPReceiver:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def spans(self) -> list[Span]:
        """Every span received, across requests."""
        with self._lock:
            return [
                s
                for r in self.trace_requests
                for rs in r.resource_spans
                for ss in rs.scope_spans
                for s in ss.spans
            ]

    def metrics(self) -> Iterator[Metric]:
        """Every metric received, across requests (a metric exported twice appears twice)."""
        with self._lock:
            requests = list(self.metric_requests)
        for r in requests:
            for rm in r.resource_metrics:
                for sm in rm.scope_metrics:
                    yield from sm.metrics


def value(v: AnyValue) -> Any:
    """A protobuf AnyValue as the plain Python value it carries."""
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def attributes(item: Any) -> dict[str, Any]:
    """Attributes of a protobuf span, event or data point as a plain dict."""
    return {kv.key: value(kv.value) for kv in item.attributes}
