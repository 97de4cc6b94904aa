"""A real Prometheus (Debian's) on a free port, scraping every second the jobs it is given, with its
files in a temp dir, and an instant query of it."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from .servers import free_port, require, wait_for_port


@contextlib.contextmanager
def prometheus(jobs: Mapping[str, Sequence[int]]) -> Iterator[str]:
    """Prometheus scraping ``/metrics`` of ``127.0.0.1:<port>`` for each port of each job; yield its URL."""
    binary = require(shutil.which("prometheus") or None, "prometheus (apt-get install prometheus)")
    port = free_port()
    scrapes = [
        {"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in ports]}]}
        for job, ports in jobs.items()
    ]
    with tempfile.TemporaryDirectory(prefix="prometheus-") as tmp:
        config = Path(tmp) / "prometheus.yml"
        global_ = {"scrape_interval": "1s", "evaluation_interval": "1s"}
        config.write_text(json.dumps({"global": global_, "scrape_configs": scrapes}))  # JSON is YAML
        log = (Path(tmp) / "prometheus.log").open("wb")
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp}/data",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            cwd=tmp,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port(port, proc, timeout=60)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(20)
            log.close()


def instant(url: str, promql: str) -> list[dict[str, Any]]:
    """An instant query's result vector: ``{"metric": labels, "value": [time, "value"]}`` each."""
    reply = httpx.get(f"{url}/api/v1/query", params={"query": promql}, timeout=30, trust_env=False).json()
    assert reply["status"] == "success", reply
    results: list[dict[str, Any]] = reply["data"]["result"]
    return results
