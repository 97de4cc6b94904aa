"""A short soak in CI (30 s): open/close churn with heartbeats and coalescing, every stream ending as it
must, RSS and tasks flat. The controls run the same churn against an app that leaks 256 KiB per stream,
and against the app without the middleware (its failing streams are cut): the verdict must say so.
The long soak for users: ``python tests/support/soak.py --minutes 30`` (see tests/support/soak.py)."""

from __future__ import annotations

import pytest

from ..support.soak import run

pytestmark = pytest.mark.timeout(180)


@pytest.mark.slow
def test_short_soak_is_flat() -> None:
    problems, summary = run(30, concurrency=24)
    assert summary["streams"] > 500  # real churn
    assert not problems, problems


def test_control_a_leaking_app_is_not_flat() -> None:
    problems, _ = run(8, concurrency=24, env={"TEST_LEAK": "1"})
    assert any("RSS grew" in p for p in problems), problems


def test_control_streams_that_fail_without_the_middleware_are_counted() -> None:
    problems, summary = run(8, concurrency=8, env={"TEST_WRAP": "0"})
    assert summary["failed"].get("fail", 0) > 0 and any("fail streams did not end" in p for p in problems)
