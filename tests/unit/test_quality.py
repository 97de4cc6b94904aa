"""The house rules that a machine can check: mypy --strict and ruff on the package, and its imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sse_middleware"
RUNTIME = {"anyio", "opentelemetry"}  # pyproject.toml's dependencies (exceptiongroup: below, < 3.11 only)
SANS_IO = PACKAGE / "_core"  # the sans-I/O core: every module in it, by the layout
# optional extras: the Redis store, imported by open_store only for a redis URL
OPTIONAL = {"_resume/redis_store.py": {"redis"}, "_resume/redis_connect.py": {"redis"}}


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *cmd], cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.mark.slow  # a tool run, not a behaviour: the full run only
def test_mypy_strict() -> None:
    result = _run("mypy", "--strict", "sse_middleware")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_ruff() -> None:
    result = _run("ruff", "check", "sse_middleware", "tests", "examples", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_runtime_imports_only_the_allowed_dependencies(path: Path) -> None:
    third_party = _imports(path) - set(sys.stdlib_module_names) - {"sse_middleware", "exceptiongroup"}
    assert third_party <= RUNTIME | OPTIONAL.get(path.relative_to(PACKAGE).as_posix(), set()), third_party
    if SANS_IO in path.parents:
        assert not _imports(path) & {"anyio", "asyncio", "starlette", "trio"}, "sans-I/O modules do no I/O"
