"""``python -m sse_middleware check`` run as a user would, as a subprocess, against real uvicorn and a real
nginx. Each verdict is shown next to its control: the same endpoint served the other way."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ..support.servers import ROOT, Server, free_port, nginx, require, uvicorn

pytestmark = pytest.mark.timeout(120)

SLOW = "/sse?n=20&delay=0.1"  # 20 events over about 2 s


def check(url: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sse_middleware", "check", url, "--timeout", "30", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def check_json(url: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    done = check(url, "--json", *args, env=env)
    return done.returncode, json.loads(done.stdout)


def test_nginx_gzip_without_the_middleware_is_reported_buffered_with_cause_and_fix(control: Server) -> None:
    with nginx(control.port, gzip=True) as proxy:
        human = check(proxy + SLOW)
        code, seen = check_json(proxy + SLOW)
    assert human.returncode == 1, human.stdout
    assert "Buffered: 20 of 20 events arrived in one burst" in human.stdout
    assert "The stream was compressed (gzip) on its way" in human.stdout  # the cause
    assert "drop it from gzip_types" in human.stdout and "X-Accel-Buffering: no" in human.stdout  # the fix
    assert code == 1 and seen["buffered"] is True and seen["events"] == 20
    assert seen["ttft_s"] > 1.5 and seen["headers"]["Content-Encoding"] == "gzip"
    assert {f["code"] for f in seen["findings"] if f["problem"]} == {"buffered", "compressed", "headers"}


def test_nginx_gzip_with_the_middleware_streams(wrapped: Server) -> None:
    """The control for the test above: the same endpoint and nginx, with the middleware."""
    with nginx(wrapped.port, gzip=True) as proxy:
        code, seen = check_json(proxy + SLOW)
    assert code == 0, seen["problems"]
    assert seen["buffered"] is False and seen["problems"] == [] and seen["events"] == 20
    assert seen["ttft_s"] < 1.0 and seen["gaps_p50_s"] > 0.05
    # nginx flushes each chunk (X-Accel-Buffering: no): every read decodes to whole events, nothing to say
    assert seen["encoding"] == "gzip" and seen["split_reads"] == 0 and seen["warnings"] == []


def test_a_direct_healthy_stream(control: Server) -> None:
    code, seen = check_json(control.url + "/openai?n=20&delay=0.05")
    assert code == 0 and seen["problems"] == [] and seen["buffered"] is False
    assert seen["content_events"] == 20 and seen["dialect"] == "openai"
    assert seen["end_marker_expected"] == "openai" and seen["ending"] == "end"
    assert 0.03 < seen["gaps_p50_s"] < 0.5


def test_post_with_a_body(control: Server) -> None:
    url = control.url + "/v1/chat/completions?n=5"
    code, seen = check_json(url, "-d", '{"model": "m", "stream": true}')
    assert code == 0 and seen["method"] == "POST" and seen["content_events"] == 5
    refused = check(url)  # the control: the endpoint only answers POST
    assert refused.returncode == 2 and "HTTP 405" in refused.stdout


def test_a_json_answer_is_no_stream(control: Server) -> None:
    done = check(control.url + "/json")
    assert done.returncode == 2
    assert "not a stream: Content-Type 'application/json'" in done.stdout


def test_nothing_listening_is_no_stream() -> None:
    done = check(f"http://127.0.0.1:{free_port()}/sse")
    assert done.returncode == 2 and "ConnectionRefusedError" in done.stdout


def test_a_stream_cut_midway_is_reported(control: Server, wrapped: Server) -> None:
    url = "/openai?n=20&delay=0.02&fail_at=10"
    code, seen = check_json(control.url + url)
    assert code == 1 and seen["ending"] == "cut" and seen["content_events"] == 10
    assert seen["problems"] == [
        f"Cut at {seen['total_s']:.2f} s: the connection closed inside the chunked body."
    ]
    code, seen = check_json(wrapped.url + url)  # with the middleware: an error event instead of a cut
    assert code == 1 and seen["ending"] == "end"
    assert [f["code"] for f in seen["findings"]] == ["error_event"]


def test_a_gzip_compressed_line_stream_is_decoded() -> None:
    """Starlette's GZipMiddleware compresses text/plain streams with a flush per chunk: each read decodes
    to whole lines, so the check has nothing to say about it."""
    with uvicorn("tests.support.apps:app", {"TEST_GZIP": "outer"}) as server:
        code, seen = check_json(server.url + "/plain?n=5&delay=0.2")
        plain_code, plain = check_json(server.url + "/plain?n=5&delay=0.2", "-H", "Accept-Encoding:")
    assert code == 0 and seen["content_events"] == 5 and seen["headers"]["Content-Encoding"] == "gzip"
    assert seen["wire_bytes"] != seen["body_bytes"] and seen["encoding"] == "gzip"
    assert seen["split_reads"] == 0 and seen["warnings"] == []  # flushed per chunk: frames arrive whole
    assert plain_code == 0 and plain["headers"]["Content-Encoding"] is None and plain["warnings"] == []
    assert plain["content_events"] == 5


def test_https(tmp_path: Path) -> None:
    openssl = require(shutil.which("openssl"), "openssl")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    tls = ("--ssl-keyfile", str(key), "--ssl-certfile", str(cert))
    with uvicorn("tests.support.apps:app", None, *tls) as server:
        url = f"https://127.0.0.1:{server.port}{SLOW}"
        code, seen = check_json(url, env={"SSL_CERT_FILE": str(cert)})
        untrusted = check(url, env={"SSL_CERT_FILE": os.devnull})
    assert code == 0 and seen["events"] == 20 and seen["buffered"] is False
    assert untrusted.returncode == 2 and "CERTIFICATE_VERIFY_FAILED" in untrusted.stdout


def test_the_timeout_bounds_a_silent_stream(wrapped: Server) -> None:
    code, seen = check_json(wrapped.url + "/silence?gap=4", "--timeout", "1.5")
    assert code == 0 and seen["ending"] == "timeout" and seen["events"] == 1
    assert seen["total_s"] > 1.4  # never before the timeout; one event, so not at the next one (4 s)
    assert seen["warnings"][0].startswith("Stopped after 1.5 s")
