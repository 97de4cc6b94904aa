"""Metrics of ``uvicorn --workers 2``, summed right: docs/observability.md's "Several workers" recipe
(each worker's own ``/metrics`` port, the first free one of a list) scraped by a real Prometheus, and
the page's own PromQL sums the streams of every worker: exactly as many as the clients ran. The
control, scraped by the same Prometheus: ``/metrics`` on the app's port, which whichever worker takes
the scrape answers with its own counts only, holds fewer.
"""

from __future__ import annotations

import ast
import contextlib
import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from ..support.prometheus import instant, prometheus
from ..support.servers import ROOT, free_port, uvicorn

pytestmark = pytest.mark.timeout(180)
DOC = ROOT / "docs" / "observability.md"
BATCH = 8  # streams at once: both workers take some (checked), and more batches run until they have


def doc_query(name: str) -> str:
    (query,) = re.findall(rf"```promql\n# {name}:[^\n]*\n(.*?)```", DOC.read_text(), re.DOTALL)
    return str(query).strip()


def by_job(url: str, promql: str) -> dict[str, float]:
    return {r["metric"].get("job", ""): float(r["value"][1]) for r in instant(url, promql)}


def listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def one(app_url: str) -> str:
    """One stream, read to its end; the worker that served it."""
    with httpx.Client(timeout=60) as client, client.stream("GET", f"{app_url}/v1/answer") as response:
        response.raise_for_status()
        body = response.read()
    assert body.endswith(b"data: [DONE]\n\n")
    return response.headers["x-worker"]


def test_the_doc_has_the_recipe_the_app_runs() -> None:
    source = (ROOT / "tests" / "support" / "apps_workers.py").read_text()  # not imported: it serves
    (recipe,) = (n for n in ast.parse(source).body if getattr(n, "name", "") == "serve_metrics")
    segment = ast.get_source_segment(source, recipe)
    assert segment and segment in DOC.read_text()


@pytest.mark.slow
def test_streams_summed_over_every_workers_metrics_port_are_all_the_streams() -> None:
    ports = [free_port() for _ in range(3)]  # one more than the workers: a target that is down is fine
    env = {"TEST_METRICS_PORTS": ",".join(map(str, ports))}
    with (
        uvicorn("tests.support.apps_workers:app", env, "--workers", "2") as app,
        prometheus({"workers": ports, "naive": [app.port]}) as url,
        ThreadPoolExecutor(BATCH) as pool,
    ):
        deadline = time.monotonic() + 60
        while sum(listening(port) for port in ports) < 2:  # both workers have imported the app
            assert time.monotonic() < deadline, "the two workers did not both start"
            time.sleep(0.2)
        workers: list[str] = []
        while len(set(workers)) < 2:
            assert len(workers) < 10 * BATCH, "every stream went to one worker"
            workers += pool.map(one, [app.url] * BATCH)
        streams, query = len(workers), doc_query("streams_by_job")
        deadline = time.monotonic() + 60
        while (got := by_job(url, query)).get("workers") != streams:
            assert time.monotonic() < deadline, (got, streams)
            time.sleep(0.5)
        time.sleep(3)  # a few more scrapes of both jobs, after every stream ended
        got = by_job(url, query)
        print(f"{streams} streams ({workers.count(workers[0])} on one worker), summed: {got}")
        assert got["workers"] == streams  # the recipe: every worker's streams, each once
        # The control: each scrape of the app's port reached one worker, which counts only its own.
        assert 0 < got["naive"] < streams, (got, streams)
