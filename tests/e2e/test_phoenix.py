"""Arize Phoenix, a real tracing backend, sees what an operator needs (issue 15).

``examples/fastapi_openai.py`` under FastAPIInstrumentor (``tests/support/apps_otel.py``) exports its
spans over OTLP/HTTP to a Phoenix started here from its own venv; they are read back through Phoenix's
REST API. Controls: a request whose body names no model (no ``gen_ai.request.model``), a failing
stream with ``mark_parent_span`` off for that request (its HTTP span stays UNSET), a stream that ends
well (its HTTP span stays UNSET). ``PHOENIX_SCREENSHOT=docs/phoenix_trace.png`` refreshes the picture
in docs/observability.md; otherwise it goes to a temporary file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..support.browser import chromium
from ..support.phoenix import Phoenix, phoenix
from ..support.servers import ROOT, Server, free_port, uvicorn, wait_for_port

SCREENSHOT = Path(os.environ.get("PHOENIX_SCREENSHOT") or Path(tempfile.gettempdir()) / "sse-phoenix.png")
STREAMS = {  # query string -> the model the request body names
    "session=conv-42": "ok-model",
    "fail_at=3": "failing-model",
    "fail_at=3&mark=0": "unmarked-model",
}


@pytest.fixture(scope="module")
def backend() -> Iterator[Phoenix]:
    with phoenix() as px:
        yield px


@pytest.fixture(scope="module")
def spans(backend: Phoenix) -> dict[str, Any]:
    """Run the streams once, then wait until Phoenix holds all their spans."""
    env = {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": backend.traces_endpoint,
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_SERVICE_NAME": "sse-middleware-phoenix-test",
    }
    with uvicorn("tests.support.apps_otel:app", env) as app:
        for query, model in STREAMS.items():
            chat(app, query, model)
        with httpx.Client(base_url=app.url, timeout=30) as client:
            client.get("/timed", params={"ttft": 0.05, "gap": 0.01, "n": 5}).raise_for_status()
        deadline = time.monotonic() + 60
        while True:
            found = backend.spans()
            ours = [s for s in found if s["name"].startswith(("chat ", "stream"))]
            if (len(ours) >= 4 and len(found) >= 8) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
    by_id = {s["context"]["span_id"]: s for s in found}
    return {
        "all": found,
        "ours": ours,
        "by_id": by_id,
        "by_model": {s["attributes"].get("gen_ai.request.model"): s for s in ours},
    }


def chat(app: Server, query: str, model: str) -> str:
    body = {"messages": [{"role": "user", "content": "hi"}], "model": model, "stream": True}
    with httpx.Client(base_url=app.url, timeout=30) as client:
        response = client.post(f"/v1/chat/completions?{query}", json=body)
    assert response.status_code == 200
    return response.text


def test_one_llm_span_per_stream_with_model_and_latencies(spans: dict[str, Any]) -> None:
    ours, everything = spans["ours"], spans["all"]
    assert len(ours) == 4, [s["name"] for s in everything]
    assert not [s for s in everything if "http send" in s["name"]]  # exclude_spans: no span per frame
    ok = spans["by_model"]["ok-model"]
    attrs = ok["attributes"]
    assert ok["name"] == "chat ok-model" and ok["span_kind"] == "LLM"  # Phoenix sees an LLM span
    assert attrs["llm.model_name"] == "ok-model"  # mapped by Phoenix from gen_ai.request.model
    assert 0 < attrs["gen_ai.response.time_to_first_chunk"] < 5
    assert 0 < attrs["sse_middleware.time_per_output_token"] < 1
    assert ok["status_code"] == "UNSET"
    # The control: a request with no body names no model; the span has no gen_ai.request.model.
    (bodyless,) = [s for s in ours if "gen_ai.request.model" not in s["attributes"]]
    assert bodyless["attributes"]["http.route"] == "/timed"


def test_a_failed_stream_is_failed_in_the_trace_list(spans: dict[str, Any]) -> None:
    failed = spans["by_model"]["failing-model"]
    assert failed["status_code"] == "ERROR"
    assert failed["attributes"]["error.type"] == "RuntimeError"
    (event,) = [e for e in failed["events"] if e["name"] == "exception"]
    assert event["attributes"]["exception.type"] == "RuntimeError"
    parent = spans["by_id"][failed["parent_id"]]
    assert parent["name"] == "POST /v1/chat/completions" and parent["parent_id"] is None
    assert (parent["status_code"], parent["attributes"].get("error.type")) == ("ERROR", "RuntimeError")
    # Controls: the same failure with mark_parent_span off, and a stream that ended well.
    unmarked = spans["by_model"]["unmarked-model"]
    assert unmarked["status_code"] == "ERROR"
    assert spans["by_id"][unmarked["parent_id"]]["status_code"] == "UNSET"
    assert spans["by_id"][spans["by_model"]["ok-model"]["parent_id"]]["status_code"] == "UNSET"


def test_the_conversation_id_makes_a_phoenix_session(backend: Phoenix, spans: dict[str, Any]) -> None:
    ok = spans["by_model"]["ok-model"]
    assert ok["attributes"]["gen_ai.conversation.id"] == "conv-42"
    (session,) = backend.sessions()  # only the annotated request: the others have no conversation id
    assert session["session_id"] == "conv-42"
    assert [t["trace_id"] for t in session["traces"]] == [ok["context"]["trace_id"]]


def test_screenshot_of_a_stream_trace(backend: Phoenix, spans: dict[str, Any]) -> None:
    ok = spans["by_model"]["ok-model"]
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1500, "height": 1350})
        page.goto(f"{backend.url}/redirects/traces/{ok['context']['trace_id']}")
        page.get_by_text("chat ok-model").first.click(timeout=60_000)
        # The span's attribute table, with the model the middleware read from the request body.
        row = page.get_by_text("gen_ai.request.model", exact=True).filter(visible=True).first
        row.wait_for(timeout=30_000)
        SCREENSHOT.parent.mkdir(exist_ok=True)
        page.screenshot(path=str(SCREENSHOT))
    assert SCREENSHOT.stat().st_size > 10_000


def run_lab(extra_env: dict[str, str], model: str) -> str:
    """``examples/lab.py`` with ``extra_env``: one stream through its middleware, then its output."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env = {k: v for k, v in env.items() if not k.lower().endswith("_proxy")}
    path = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)  # this tree's package
    env |= {"PYTHONPATH": path, "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_METRIC_EXPORT_INTERVAL": "200"}
    env |= extra_env
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "examples" / "lab.py"), "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port(port, proc, timeout=60)
            body = {"model": model, "stream": True, "scenario": "short", "ttft": 0.05, "tpot": 0.002}
            response = httpx.post(f"http://127.0.0.1:{port}/mw/v1/chat/completions", json=body, timeout=60)
            assert response.status_code == 200 and "[DONE]" in response.text
            time.sleep(1.5)  # several metric export intervals
        finally:
            proc.terminate()
            proc.wait(20)
        log.seek(0)
        return log.read().decode(errors="replace")


def test_the_lab_sends_traces_to_phoenix_and_no_metrics_there(backend: Phoenix) -> None:
    output = run_lab(
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": backend.traces_endpoint, "OTEL_METRICS_EXPORTER": "none"},
        "lab-per-signal",
    )
    assert "405" not in output and "Failed to export" not in output, output
    deadline = time.monotonic() + 30
    while not [s for s in backend.spans() if s["attributes"].get("gen_ai.request.model") == "lab-per-signal"]:
        assert time.monotonic() < deadline, "the lab's span never reached Phoenix"
        time.sleep(0.3)
    # The control: only the common endpoint, as before issue 15: every metrics export is refused.
    output = run_lab({"OTEL_EXPORTER_OTLP_ENDPOINT": backend.url}, "lab-common-endpoint")
    assert "405" in output, output
