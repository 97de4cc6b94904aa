"""Real servers for behaviour tests: uvicorn subprocesses and nginx on 127.0.0.1, on free ports."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes] | None = None, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise RuntimeError(f"server exited with {proc.returncode}:\n{out}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port}")


class Server:
    """A running subprocess with its URL and output."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = log

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


@contextlib.contextmanager
def uvicorn(app: str, env: Mapping[str, str] | None = None, *extra: str) -> Iterator[Server]:
    """``uvicorn app`` in a subprocess; ``env`` adds variables (e.g. SSE_MIDDLEWARE_*, TEST_WRAP)."""
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="uvicorn-", suffix=".log")[1])
    cmd = [
        sys.executable,
        "-m",
        "uvicorn",
        app,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--app-dir",
        str(ROOT),
        "--no-access-log",
        *extra,
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT
        )
    server = Server(proc, port, log)
    try:
        wait_for_port(port, proc)
        yield server
    finally:
        server.stop()


NGINX_CONF = """
worker_processes 1;
error_log {dir}/error.log;
pid {dir}/nginx.pid;
daemon off;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    {gzip}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
"""
GZIP = "gzip on; gzip_min_length 1; gzip_types text/event-stream text/plain application/json;"


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.path.exists(p)), None)


def require(binary: str | None, what: str) -> str:
    """A real component the test needs: missing is a failure in CI, a skip on a laptop."""
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{what} is not installed (CI must install it)")
        pytest.skip(f"{what} is not installed")
    return binary


@contextlib.contextmanager
def nginx(upstream: int, *, gzip: bool) -> Iterator[str]:
    """A real nginx proxying to 127.0.0.1:upstream with default buffering, optionally with gzip."""
    binary = require(nginx_binary(), "nginx")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="nginx-") as tmp:
        conf = Path(tmp) / "nginx.conf"
        conf.write_text(NGINX_CONF.format(dir=tmp, port=port, upstream=upstream, gzip=GZIP if gzip else ""))
        proc = subprocess.Popen(
            [binary, "-p", tmp, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        try:
            wait_for_port(port, proc)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(10)
