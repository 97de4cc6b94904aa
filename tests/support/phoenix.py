"""Arize Phoenix from its PyPI package, in its own venv, on loopback ports, for the backend tests.

Phoenix brings a large dependency tree, so it never enters the shared venv: ``.ci/run`` creates
``.venv-phoenix`` beside it (``PHOENIX_VENV`` names another). Started in a temporary working dir (its
SQLite database lives there), with telemetry and external resources off.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from .servers import ROOT, free_port, require

VENV = Path(os.environ.get("PHOENIX_VENV") or ROOT / ".venv-phoenix")
STARTUP_SECONDS = 300  # a fresh database runs every migration first: over a minute on a busy 2-core box


class Phoenix:
    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.traces_endpoint = f"{url}/v1/traces"
        self.log = log

    def spans(self, project: str = "default") -> list[dict[str, Any]]:
        """Every span of the project, through the REST API (``GET /v1/projects/{p}/spans``)."""
        found: list[dict[str, Any]] = []
        cursor = None
        with httpx.Client(base_url=self.url, timeout=30, trust_env=False) as client:
            while True:
                params = {"limit": 100, **({"cursor": cursor} if cursor else {})}
                page = client.get(f"/v1/projects/{project}/spans", params=params).raise_for_status().json()
                found += page["data"]
                cursor = page.get("next_cursor")
                if not cursor:
                    return found

    def sessions(self, project: str = "default") -> list[dict[str, Any]]:
        with httpx.Client(base_url=self.url, timeout=30, trust_env=False) as client:
            data: list[dict[str, Any]] = client.get(f"/v1/projects/{project}/sessions").json()["data"]
            return data


@contextlib.contextmanager
def phoenix() -> Iterator[Phoenix]:
    binary = VENV / "bin" / "phoenix"
    require(str(binary) if binary.exists() else None, f"Arize Phoenix in {VENV} (.ci/run creates it)")
    port, grpc_port = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="phoenix-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env |= {
            "PHOENIX_WORKING_DIR": tmp,
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(port),
            "PHOENIX_GRPC_PORT": str(grpc_port),
            "PHOENIX_TELEMETRY_ENABLED": "false",
            "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
            "PHOENIX_ENABLE_PROMETHEUS": "false",
        }
        log = Path(tmp) / "phoenix.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(binary), "serve"], cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + STARTUP_SECONDS
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Phoenix did not start:\n{log.read_text(errors='replace')[-3000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/healthz", timeout=1, trust_env=False).status_code == 200:
                        break
                time.sleep(0.5)
            yield Phoenix(url, log)
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
