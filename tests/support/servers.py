"""Real servers for behaviour tests, as subprocesses on free 127.0.0.1 ports, all started by ``launch``:
``uvicorn`` (the test apps), ``serve`` (any of the five ASGI servers the suite runs on), ``example``
(``python examples/X.py --port N``) and ``nginx`` in front of one of them; plus probes of a server
process (``/stats``, RSS, file descriptors)."""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SERVERS = ("uvicorn-httptools", "uvicorn-h11", "hypercorn-asyncio", "hypercorn-trio", "granian")


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


def require(binary: str | None, what: str) -> str:
    """A real component the test needs: missing is a failure in CI, a skip on a laptop."""
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{what} is not installed (CI must install it)")
        pytest.skip(f"{what} is not installed")
    return binary


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
def launch(
    name: str,
    cmd: Sequence[str],
    port: int,
    env: Mapping[str, str] | None = None,
    *,
    timeout: float = 20.0,
    drop: Collection[str] = (),
) -> Iterator[Server]:
    """Run ``cmd`` from the repo root with ROOT importable, output to a log; ``env`` adds variables,
    ``drop`` removes some. Yield it once ``port`` listens; stop it (SIGTERM, then SIGKILL) at the end."""
    log = Path(tempfile.mkstemp(prefix=f"{name}-", suffix=".log")[1])
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    environ = {k: v for k, v in os.environ.items() if k not in drop}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            list(cmd),
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**environ, "PYTHONPATH": path, **(env or {})},
        )
    server = Server(proc, port, log)
    try:
        try:
            wait_for_port(port, proc, timeout)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"{name} did not start ({exc}):\n{server.output()}") from None
        yield server
    finally:
        server.stop()


def uvicorn(
    app: str, env: Mapping[str, str] | None = None, *extra: str
) -> contextlib.AbstractContextManager[Server]:
    """``uvicorn app``; ``env`` adds variables (e.g. SSE_MIDDLEWARE_*, TEST_WRAP); ``extra`` its options."""
    port = free_port()
    cmd = [*uvicorn_command(app, port), *extra]
    return launch("uvicorn", cmd, port, env)


def served_and_bare(app: str) -> tuple[Any, Any]:
    """Module fixtures ``(ours, bare)``: uvicorn serving ``app`` with the middleware, and the same app
    without it (``TEST_WRAP=0``), the control. Bind both names in the test module:
    ``ours, bare = served_and_bare(APP)``."""

    @pytest.fixture(scope="module")
    def ours() -> Iterator[Server]:
        with uvicorn(app) as server:
            yield server

    @pytest.fixture(scope="module")
    def bare() -> Iterator[Server]:
        with uvicorn(app, {"TEST_WRAP": "0"}) as server:
            yield server

    return ours, bare


def uvicorn_command(app: str, port: int, *extra: str) -> list[str]:
    host = ["--host", "127.0.0.1", "--port", str(port)]
    return [sys.executable, "-m", "uvicorn", app, *host, "--app-dir", str(ROOT), "--no-access-log", *extra]


def command(kind: str, app: str, port: int) -> list[str]:
    """The command line that serves ``app`` on ``port`` with server ``kind`` (one of SERVERS)."""
    if kind.startswith("uvicorn"):
        return uvicorn_command(app, port, "--http", kind.split("-")[1])
    if kind.startswith("hypercorn"):
        worker = kind.split("-")[1]
        return [sys.executable, "-m", "hypercorn", app, "--bind", f"127.0.0.1:{port}", "-k", worker]
    if kind == "granian":
        return [
            str(BIN / "granian"),
            "--interface",
            "asgi",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-ws",
            "--log-level",
            "warning",
            app,
        ]
    raise ValueError(kind)


def serve(
    kind: str, app: str = "tests.support.apps_reliability:app", env: Mapping[str, str] | None = None
) -> contextlib.AbstractContextManager[Server]:
    """A server process of ``kind`` serving ``app``; ``env`` adds variables (TEST_WRAP, SSE_MIDDLEWARE_*)."""
    port = free_port()
    return launch(kind, command(kind, app, port), port, env)


@contextlib.contextmanager
def example(script: str, env: Mapping[str, str] | None = None) -> Iterator[Server]:
    """``python examples/<script> --port N`` as its docstring says, with no API key in its environment
    (the examples fake their upstream then); yield it once it listens and has printed its address."""
    port = free_port()
    cmd = [sys.executable, str(ROOT / "examples" / script), "--port", str(port)]
    with launch(script, cmd, port, env, timeout=30, drop=("ANTHROPIC_API_KEY", "OPENAI_API_KEY")) as server:
        assert server.url in server.output(), "the example must print its address"
        yield server


# -- nginx -----------------------------------------------------------------------------------------------

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
    {upstreams}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://{upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            {location}
        }}
    }}
}}
"""
GZIP = "gzip on; gzip_min_length 1; gzip_types text/event-stream text/plain application/json;"


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.path.exists(p)), None)


# Several hosts: nginx's default round robin (one worker, no upstream keepalive: requests alternate), the
# next host on a refused connection or a timeout, and which host answered in a header and a log.
BALANCED = """
    log_format upstream '$request_uri|$upstream_addr|$status';
    upstream hosts {{
        {servers}
    }}"""
BALANCED_LOCATION = """proxy_next_upstream error timeout;
            add_header X-Upstream $upstream_addr always;
            access_log {dir}/upstream.log upstream;"""


@contextlib.contextmanager
def nginx(upstream: int | Sequence[int], *, gzip: bool) -> Iterator[str]:
    """A real nginx with default buffering, optionally with gzip, proxying to 127.0.0.1:upstream, or
    round robin over several ports (see BALANCED: ``X-Upstream`` names the host that answered, and
    ``upstream_log(url)`` lists every request with its host and status)."""
    binary = require(nginx_binary(), "nginx")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="nginx-") as tmp:
        fields = {"dir": tmp, "port": port, "gzip": GZIP if gzip else ""}
        if isinstance(upstream, int):
            fields.update(upstreams="", upstream=f"127.0.0.1:{upstream}", location="")
        else:
            servers = " ".join(f"server 127.0.0.1:{p};" for p in upstream)
            fields.update(
                upstreams=BALANCED.format(dir=tmp, servers=servers),
                upstream="hosts",
                location=BALANCED_LOCATION.format(dir=tmp),
            )
        conf = Path(tmp) / "nginx.conf"
        conf.write_text(NGINX_CONF.format(**fields))
        url = f"http://127.0.0.1:{port}"
        _NGINX_DIRS[url] = Path(tmp)
        try:
            with launch("nginx", [binary, "-p", tmp, "-c", str(conf)], port):
                yield url
        finally:
            del _NGINX_DIRS[url]


_NGINX_DIRS: dict[str, Path] = {}


def upstream_log(url: str) -> list[tuple[str, str, str]]:
    """(request URI, the host(s) nginx tried, status) of each request so far to the balancing nginx at
    ``url``, oldest first (nginx writes a line when the response ends)."""
    log = _NGINX_DIRS[url] / "upstream.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [tuple(line.rsplit("|", 2)) for line in lines]  # type: ignore[misc]


# -- probes of a server process -----------------------------------------------------------------------------


def raise_fd_limit(want: int = 8192) -> int:
    """Raise this process's soft RLIMIT_NOFILE (children inherit it: the servers get it too)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def stats(server: Server, fast: bool = False) -> dict[str, Any]:
    """The served app's ``/stats`` (see tests/support/apps_reliability.py)."""
    with httpx.Client(timeout=30) as client:
        data: dict[str, Any] = client.get(server.url + "/stats" + ("?fast=1" if fast else "")).json()
    return data


def settle(server: Server, *, open_streams: int = 0, timeout: float = 15.0) -> dict[str, Any]:
    """Poll ``/stats`` until no more than ``open_streams`` streams are open (or give up); return the last."""
    deadline = time.monotonic() + timeout
    while True:
        now = stats(server)
        if now["started"] - now["finalized"] <= open_streams or time.monotonic() > deadline:
            return now
        time.sleep(0.1)


def reset_peak(pid: int) -> None:
    """Reset the process's peak RSS (VmHWM) so the next reading is the peak of what follows (Linux)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))
