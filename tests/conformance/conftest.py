"""Collects the conformance results of this session, to print the figures of docs/drop-in.md at the end."""

from __future__ import annotations

import pytest

RESULTS: list[object] = []
collect_ignore = ["standins", "plugins"]  # they run inside the ecosystem's suites, not ours


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if RESULTS:
        from .runner import describe, figures

        terminalreporter.section("conformance (the ecosystem's suites with the middleware injected)")
        for result in RESULTS:
            terminalreporter.write_line(describe(result))  # type: ignore[arg-type]
        terminalreporter.write_line(figures(RESULTS))  # type: ignore[arg-type]
