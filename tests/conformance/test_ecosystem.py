"""Starlette's, FastAPI's and sse-starlette's own test suites, with the middleware injected into every app
they build, against the same suites without it (runner.py). One test per project; each fails listing the
differences differences.toml does not document. The first run fetches the sdists and builds
``.venv-conformance`` (a few minutes); later runs reuse both, and the control's outcomes."""

from __future__ import annotations

import os
import sys

import pytest

if sys.version_info < (3, 11):  # pragma: no cover
    pytest.skip("the pinned suites need Python 3.11 or newer", allow_module_level=True)

from . import conftest, environment, runner


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("project", environment.PROJECTS)
def test_own_suite_passes_with_the_middleware(project: str) -> None:
    try:
        result = runner.compare(project)
    except environment.SetupError as exc:  # the package index out of reach: a skip on a laptop only
        if os.environ.get("CI") == "true":
            pytest.fail(f"conformance setup failed: {exc}")
        pytest.skip(f"conformance setup failed: {exc}")
    conftest.RESULTS.append(result)
    assert result.ok, runner.describe(result)
