"""Prometheus (Debian's) scrapes the OpenTelemetry Prometheus exporter of an app served by uvicorn, and
the PromQL of docs/observability.md, read from that file, returns the P95 TTFT, TPOT and inter-token
gap of streams with known latencies, each within its bucket, and the TTFT burn rate.

The control is built in: two requested models with different known latencies, in the same app and the
same queries; each model's quantile must land in the bucket of its own latency, so a query that ignored
the latencies (or the model label) cannot pass for both.
"""

from __future__ import annotations

import itertools
import re
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from ..support.prometheus import instant, prometheus
from ..support.servers import ROOT, free_port, uvicorn

DOC = ROOT / "docs" / "observability.md"
# (ttft, gap) per requested model, each well inside one bucket of the conventions' boundaries.
# The time the server adds (routing, instrumentation, a busy 2-core machine) only goes above them, so
# each sits just above a bucket's lower bound: 145 ms or more of room for TTFT, 48 ms for a gap.
LATENCIES = {"fast": (0.105, 0.102), "slow": (0.505, 0.205)}
TTFT_BUCKETS = (0.1, 0.25, 0.5, 0.75)
GAP_BUCKETS = (0.1, 0.15, 0.2, 0.3)
STREAMS_PER_MODEL = 6
TOKENS = 9  # 8 gaps: sampling every 8th gap (set below), one per stream in the gap histogram
SLO_TTFT = 0.4  # fast streams meet it, slow ones miss it


def doc_queries() -> dict[str, str]:
    """The ```promql blocks of docs/observability.md, by the name on their first comment line."""
    blocks = re.findall(r"```promql\n# (\w+):[^\n]*\n(.*?)```", DOC.read_text(), re.DOTALL)
    return {name: query.strip() for name, query in blocks}


def bucket(value: float, bounds: tuple[float, ...]) -> tuple[float, float]:
    """The (lower, upper] bucket among ``bounds`` holding ``value``."""
    for lower, upper in itertools.pairwise(bounds):
        if lower < value <= upper:
            return lower, upper
    raise AssertionError(f"{value} is outside {bounds}")


def query(url: str, promql: str) -> dict[str, float]:
    """An instant query's result as {gen_ai_request_model: value}."""
    results = instant(url, promql)
    return {r["metric"].get("gen_ai_request_model", ""): float(r["value"][1]) for r in results}


def run_streams(app_url: str, per_model: int) -> None:
    """``per_model`` streams of each model, at most two of a model at a time."""

    def one(model: str) -> None:
        ttft, gap = LATENCIES[model]
        params: dict[str, str | float] = {"ttft": ttft, "gap": gap, "n": TOKENS, "model": model}
        httpx.get(f"{app_url}/timed", params=params, timeout=60).raise_for_status()

    with ThreadPoolExecutor(2 * len(LATENCIES)) as pool:
        list(pool.map(one, [model for _ in range(per_model) for model in LATENCIES]))


def wait_for(url: str, promql: str, expected: float, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while sum(query(url, promql).values()) != expected:
        assert time.monotonic() < deadline, f"{promql} never reached {expected}: {query(url, promql)}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, float]]:
    metrics_port = free_port()
    env = {
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "prometheus",
        "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
        "OTEL_EXPORTER_PROMETHEUS_PORT": str(metrics_port),
        "SSE_MIDDLEWARE_SLO_TTFT": str(SLO_TTFT),
        # Pinned, not the default (32): with 8 gaps a stream, 32 would record no gap of a model's six
        # streams one run in six, and its quantile would be empty.
        "SSE_MIDDLEWARE_INTER_CHUNK_SAMPLE_EVERY": "8",
    }
    with uvicorn("tests.support.apps_otel:app", env) as app, prometheus({"app": [metrics_port]}) as url:
        count = "sum(gen_ai_server_time_to_first_token_seconds_count)"
        # One stream per model first, scraped before the measured set: rate() counts increases from
        # the first sample a series has, so the measured streams must come after it.
        run_streams(app.url, 1)
        wait_for(url, count, len(LATENCIES))
        time.sleep(2)
        run_streams(app.url, STREAMS_PER_MODEL)
        wait_for(url, count, len(LATENCIES) * (1 + STREAMS_PER_MODEL))
        time.sleep(2)  # a few more scrapes, so rate() has its last points
        return {name: query(url, promql) for name, promql in doc_queries().items()}


def test_the_doc_has_the_queries_the_test_runs() -> None:
    assert set(doc_queries()) == {
        "ttft_p95",
        "tpot_p95",
        "gap_p95",
        "ttft_burn",
        "streams_by_job",
    }  # the last: test_workers_metrics


@pytest.mark.parametrize(
    ("name", "index", "bounds"),
    [("ttft_p95", 0, TTFT_BUCKETS), ("tpot_p95", 1, GAP_BUCKETS), ("gap_p95", 1, GAP_BUCKETS)],
)
def test_p95_is_in_the_bucket_of_the_known_latency(
    results: dict[str, dict[str, float]], name: str, index: int, bounds: tuple[float, ...]
) -> None:
    got = results[name]
    assert set(got) == set(LATENCIES), got
    for model, latencies in LATENCIES.items():
        lower, upper = bucket(latencies[index], bounds)
        assert lower < got[model] <= upper, (name, model, got)
    assert bucket(got["fast"], bounds) != bucket(got["slow"], bounds)  # the control: latency moves it


def test_ttft_burn_rate(results: dict[str, dict[str, float]]) -> None:
    burn = results["ttft_burn"]
    assert burn["slow"] == pytest.approx(1 / 0.05, rel=0.1)  # every slow stream missed the objective
    assert burn.get("fast", 0.0) == 0.0  # the control: streams that met it spend nothing
