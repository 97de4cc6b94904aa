"""Zero-code ``opentelemetry-instrument`` on ``examples/fastapi_openai.py``: the contrib FastAPI
instrumentation makes an ``http send`` span per frame of a stream, and docs/observability.md's remedy
(leaving the streaming route out with ``OTEL_PYTHON_FASTAPI_EXCLUDED_URLS``) removes them while the
middleware's span becomes the server span. The control is the same run without the variable. Spans go
to the local OTLP receiver of ``tests/support/otel.py`` through the real exporter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from ..support.otel import OTLPReceiver, attributes
from ..support.servers import ROOT, free_port, require, wait_for_port

BODY = {"messages": [{"role": "user", "content": "hi"}], "model": "zero-code", "stream": True}


def run(extra_env: dict[str, str]) -> list[tuple[str, int, dict[str, object]]]:
    """(name, kind, attributes) of every span from one stream under ``opentelemetry-instrument``."""
    instrument = shutil.which("opentelemetry-instrument", path=str(Path(sys.executable).parent))
    require(instrument, "opentelemetry-instrument (opentelemetry-distro)")
    port = free_port()
    with OTLPReceiver() as rx, tempfile.TemporaryFile() as log:
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env |= {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rx.traces_url,
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            **extra_env,
        }
        cmd = [
            instrument,
            sys.executable,
            "-m",
            "uvicorn",
            "fastapi_openai:app",
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
            "--app-dir",
            str(ROOT / "examples"),
            "--no-access-log",
        ]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for_port(port, proc, timeout=60)
            response = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=BODY, timeout=30)
            assert response.status_code == 200 and "[DONE]" in response.text
            deadline = time.monotonic() + 30
            while not any(s.name.startswith("chat ") for s in rx.spans()) and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(0.5)  # the HTTP span ends after ours
        finally:
            proc.terminate()
            proc.wait(20)
        return [(s.name, s.kind, attributes(s)) for s in rx.spans()]


def test_excluding_the_stream_route_removes_the_per_frame_spans() -> None:
    try:
        import opentelemetry.instrumentation.fastapi  # noqa: F401
    except ImportError:
        require(None, "opentelemetry-instrumentation-fastapi")
    control = run({})
    sends = [name for name, _, _ in control if name.endswith("http send")]
    assert len(sends) > 10, "control: without the variable, one http send span per frame"
    fixed = run({"OTEL_PYTHON_FASTAPI_EXCLUDED_URLS": "v1/chat/completions"})
    assert [name for name, _, _ in fixed if "http" in name] == []
    ((name, kind, attrs),) = fixed
    assert name == "chat zero-code" and kind == 2  # SPAN_KIND_SERVER: ours is the server span now
    assert attrs["gen_ai.request.model"] == "zero-code" and attrs["http.route"] == "/v1/chat/completions"
