"""A short soak in CI (30 s): open/close churn with heartbeats and coalescing, RSS and tasks flat. The
control runs the same churn against an app that leaks 256 KiB per stream: the verdict must say so.
The long soak for users: ``python tests/soak.py --minutes 30`` (see tests/soak.py)."""

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
