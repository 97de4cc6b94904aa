"""Every ASGI server the suite runs on, as subprocesses on 127.0.0.1, plus process probes (RSS, fds)."""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from .servers import ROOT, Server, free_port, wait_for_port

BIN = Path(sys.executable).parent
SERVERS = ("uvicorn-httptools", "uvicorn-h11", "hypercorn-asyncio", "hypercorn-trio", "granian")


def raise_fd_limit(want: int = 8192) -> int:
    """Raise this process's soft RLIMIT_NOFILE (children inherit it: the servers get it too)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def command(kind: str, app: str, port: int) -> list[str]:
    host = ["127.0.0.1"]
    if kind.startswith("uvicorn"):
        http = kind.split("-")[1]
        return [
            sys.executable,
            "-m",
            "uvicorn",
            app,
            "--host",
            *host,
            "--port",
            str(port),
            "--http",
            http,
            "--no-access-log",
            "--app-dir",
            str(ROOT),
        ]
    if kind.startswith("hypercorn"):
        worker = kind.split("-")[1]
        return [sys.executable, "-m", "hypercorn", app, "--bind", f"127.0.0.1:{port}", "-k", worker]
    if kind == "granian":
        return [
            str(BIN / "granian"),
            "--interface",
            "asgi",
            "--host",
            *host,
            "--port",
            str(port),
            "--no-ws",
            "--log-level",
            "warning",
            app,
        ]
    raise ValueError(kind)


@contextlib.contextmanager
def serve(
    kind: str, app: str = "tests.support.apps_reliability:app", env: Mapping[str, str] | None = None
) -> Iterator[Server]:
    """A server process of ``kind`` serving ``app``; ``env`` adds variables (TEST_WRAP, SSE_MIDDLEWARE_*)."""
    port = free_port()
    log = Path(tempfile.mkstemp(prefix=f"{kind}-", suffix=".log")[1])
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command(kind, app, port),
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        )
    server = Server(proc, port, log)
    try:
        wait_for_port(port, proc)
        yield server
    finally:
        server.stop(timeout=10)


def stats(server: Server, fast: bool = False) -> dict[str, Any]:
    """The served app's ``/stats`` (see tests/apps_reliability.py)."""
    with httpx.Client(timeout=30) as client:
        data: dict[str, Any] = client.get(server.url + "/stats" + ("?fast=1" if fast else "")).json()
    return data


def settle(server: Server, *, open_streams: int = 0, timeout: float = 15.0) -> dict[str, Any]:
    """Poll ``/stats`` until no more than ``open_streams`` streams are open (or give up); return the last."""
    import time

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
