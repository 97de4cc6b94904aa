"""pytest plugin (``-p sse_conformance_record``): write one outcome per test id to the JSON file named by
``SSE_CONFORMANCE_OUTCOMES``: ``passed``, ``failed`` (the test), ``error`` (its setup or teardown, or a
module that failed to collect), ``skipped`` (xfail included); and for each failure, its first ``E``
line. Under pytest-xdist only the controller writes; it sees every worker's reports."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

_outcomes: dict[str, str] = {}
_messages: dict[str, str] = {}
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


def _note(report: pytest.TestReport | pytest.CollectReport, outcome: str) -> None:
    nodeid = report.nodeid
    if _RANK[outcome] >= _RANK[_outcomes.get(nodeid, "passed")]:
        _outcomes[nodeid] = outcome
    if _RANK[outcome] >= _RANK["failed"] and nodeid not in _messages:
        text = report.longreprtext
        lines = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
        _messages[nodeid] = (lines[0] if lines else (text.strip().splitlines() or [""])[-1])[:300]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call":
        _note(report, {"passed": "passed", "failed": "failed"}.get(report.outcome, "skipped"))
    elif report.failed:
        _note(report, "error")
    elif report.skipped and report.when == "setup":
        _note(report, "skipped")


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _note(report, "error")


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("SSE_CONFORMANCE_OUTCOMES")
    config: Any = session.config
    if path and not hasattr(config, "workerinput"):
        with open(path, "w") as out:
            json.dump({"outcomes": _outcomes, "messages": _messages}, out, indent=0, sort_keys=True)
