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


def _imports(path: Path, *, at_runtime: bool = False) -> set[str]:
    """The top-level modules ``path`` imports; ``at_runtime``: leaving out what ``if TYPE_CHECKING:``
    guards, which only the type checker reads (so ``typing_extensions`` may appear there)."""
    tree = ast.parse(path.read_text())
    if at_runtime:
        for node in [n for n in ast.walk(tree) if isinstance(n, ast.If) and _type_checking(n.test)]:
            node.body = []
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_runtime_imports_only_the_allowed_dependencies(path: Path) -> None:
    imported = _imports(path, at_runtime=True)
    third_party = imported - set(sys.stdlib_module_names) - {"sse_middleware", "exceptiongroup"}
    assert third_party <= RUNTIME | OPTIONAL.get(path.relative_to(PACKAGE).as_posix(), set()), third_party
    if SANS_IO in path.parents:
        assert not _imports(path) & {"anyio", "asyncio", "starlette", "trio"}, "sans-I/O modules do no I/O"


def test_a_type_checking_import_is_no_runtime_dependency() -> None:
    """The control: ``typing_extensions`` under ``if TYPE_CHECKING:`` passes, imported at run time fails."""
    probe = PACKAGE / "_runtime_probe.py"
    guarded = "import typing\nif typing.TYPE_CHECKING:\n    from typing_extensions import Unpack\n"
    try:
        probe.write_text(guarded)
        test_runtime_imports_only_the_allowed_dependencies(probe)
        probe.write_text("from typing_extensions import Unpack\n")
        with pytest.raises(AssertionError, match="typing_extensions"):
            test_runtime_imports_only_the_allowed_dependencies(probe)
    finally:
        probe.unlink()


# The layers, lowest first: a module may import its own layer and those below it, never one above (nor,
# within a layer, a sibling package: telemetry and resume know nothing of each other). TYPE_CHECKING
# imports count: a type the core names from above is a dependency all the same.
LAYERS: list[set[str]] = [
    {"_types", "_exceptions"},
    {"_core"},
    {"_settings_types"},
    {"_settings"},
    {"_telemetry", "_resume"},
    {"_asgi"},
    {"_check", "__init__", "__main__"},
]
_LAYER_OF = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _top(path: Path) -> str:
    """The layer name of a module: its first part below the package (``_core``, ``_settings``, ...)."""
    return path.relative_to(PACKAGE).with_suffix("").parts[0]


def _internal_imports(path: Path) -> set[str]:
    """The package's own modules that ``path`` imports, as their first part below the package."""
    package = path.relative_to(PACKAGE).with_suffix("").parts[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = (*base, *(node.module.split(".") if node.module else ()))
                if not target:  # ``from .. import x``: the package's own __init__ (or a module named x)
                    target = ("__init__",)
            elif node.module and node.module.split(".")[0] == "sse_middleware":
                target = tuple(node.module.split(".")[1:]) or ("__init__",)
            else:
                continue
            found.add(target[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "sse_middleware":
                    found.add(parts[1] if len(parts) > 1 else "__init__")
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_layers_import_downward_only(path: Path) -> None:
    mine = _top(path)
    assert mine in _LAYER_OF, f"{mine} is in no layer: add it to LAYERS"
    for target in _internal_imports(path) - {mine}:
        assert target in _LAYER_OF, f"{target} is in no layer: add it to LAYERS"
        assert _LAYER_OF[target] < _LAYER_OF[mine] or (
            _LAYER_OF[target] == _LAYER_OF[mine] == len(LAYERS) - 1
        ), f"{mine} imports {target}, which is not below it"


def test_the_layer_check_sees_an_upward_import() -> None:
    """The control: the check finds a relative, an absolute and a TYPE_CHECKING import of a higher layer."""
    core = PACKAGE / "_core"
    for source in (
        "from .._settings import StreamingSettings\n",
        "import sse_middleware._telemetry.recorder\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..._asgi.stream import Stream\n",
    ):
        probe = core / "dialects" / "_layer_probe.py" if "..." in source else core / "_layer_probe.py"
        try:
            probe.write_text(source)
            with pytest.raises(AssertionError, match="not below it"):
                test_layers_import_downward_only(probe)
        finally:
            probe.unlink()


OWNER = PACKAGE / "_core" / "lifecycle.py"  # the one writer of a response's phase
_LIFECYCLE_STATE = {"phase", "ours"}


def _state_writes(source: str) -> list[int]:
    """Lines that assign ``<anything>.phase`` or ``.ours`` (plain, augmented or annotated)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and part.attr in _LIFECYCLE_STATE:
                    lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_lifecycle_assigns_a_phase(path: Path) -> None:
    if path == OWNER:
        assert _state_writes(path.read_text()), "the owner makes the moves"
        return
    assert not _state_writes(path.read_text()), "only _core/lifecycle.py changes a phase: call a transition"


def test_the_phase_check_sees_a_write_from_outside() -> None:
    """The control: the writes the old shell made (``r.phase = move(...)``, ``r.ours = True``) are found."""
    assert _state_writes("r.phase = move(r.phase, Phase.ENDED)\n") == [1]
    assert _state_writes("x = 1\nself.r.ours = True\n") == [2]
    assert _state_writes("a, s.life.phase = 1, 2\n") == [1]
    assert not _state_writes("phase = life.phase\nif life.ours: pass\n")
