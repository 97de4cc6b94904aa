"""What the conformance runner needs before it runs anything, made lazily and idempotently: the pinned
sdists from the package index, unpacked into ``.conformance-cache/`` (stand-ins added where an sdist lacks
a test-support file), and ``.venv-conformance/`` with the pinned test dependencies and our package
(editable, from this repo). Both are gitignored; both are rebuilt when the pins change. A file lock makes
concurrent runners wait for each other instead of half-building the same venv.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CACHE = ROOT / ".conformance-cache"
VENV = ROOT / ".venv-conformance"
REQUIREMENTS = HERE / "requirements.txt"
PROJECTS = ("starlette", "fastapi", "sse-starlette")


class SetupError(RuntimeError):
    """The sdists or the venv could not be made (typically: the package index is out of reach)."""


def suites() -> dict[str, dict[str, object]]:
    with (HERE / "suites.toml").open("rb") as f:
        return tomllib.load(f)


def pins() -> dict[str, str]:
    """``name==version`` lines of requirements.txt, by normalized name."""
    found: dict[str, str] = {}
    for line in REQUIREMENTS.read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==(\S+)", line.strip())
        if match:
            found[re.sub(r"[-_.]+", "-", match[1]).lower()] = match[2]
    return found


@contextlib.contextmanager
def locked() -> Iterator[None]:
    CACHE.mkdir(exist_ok=True)
    with (CACHE / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SetupError(f"{what} failed ({' '.join(cmd)}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")


def source(project: str) -> Path:
    """The unpacked sdist of ``project`` at its pinned version, stand-ins added."""
    version = pins()[project]
    tree = CACHE / "src" / f"{project}-{version}"
    if (tree / ".complete").exists():
        return tree
    sdists = CACHE / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    archive = _find_sdist(sdists, project, version)
    if archive is None:
        download = ["download", "--no-binary", ":all:", "--no-deps", "-q", "-d", str(sdists)]
        _run(
            [sys.executable, "-m", "pip", *download, f"{project}=={version}"],
            f"downloading the {project} {version} sdist",
        )
        archive = _find_sdist(sdists, project, version)
        if archive is None:
            raise SetupError(f"pip downloaded no sdist for {project}=={version}")
    shutil.rmtree(tree, ignore_errors=True)
    staging = tree.with_name(tree.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(staging, filter="data")
    (top,) = staging.iterdir()  # an sdist holds one directory, name-version/
    top.rename(tree)
    staging.rmdir()
    standins = suites()[project].get("standins")
    if isinstance(standins, str):
        for file in sorted((HERE / standins).rglob("*.py")):
            target = tree / file.relative_to(HERE / standins)
            if not target.exists():  # a later sdist that ships its own keeps its own
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(file, target)
    (tree / ".complete").write_text(str(archive.name))
    return tree


def _find_sdist(folder: Path, project: str, version: str) -> Path | None:
    stem = re.sub(r"[-_.]+", "[-_.]", project)
    for path in folder.glob("*.tar.gz"):
        if re.fullmatch(rf"{stem}-{re.escape(version)}\.tar\.gz", path.name, re.IGNORECASE):
            return path
    return None


def venv_python() -> Path:
    """``.venv-conformance``'s interpreter, the venv (re)built first if the pins or this repo moved."""
    python = VENV / "bin" / "python"
    stamp = VENV / "conformance-stamp"
    want = hashlib.sha256(REQUIREMENTS.read_bytes() + str(ROOT).encode() + sys.version.encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == want and python.exists():
        return python
    shutil.rmtree(VENV, ignore_errors=True)
    _run([sys.executable, "-m", "venv", str(VENV)], "creating .venv-conformance")
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _run([*pip, "-r", str(REQUIREMENTS)], "installing the suites' test dependencies")
    _run([*pip, "--no-deps", "-e", str(ROOT)], "installing sse_middleware from the repo")
    stamp.write_text(want)
    return python


def suite_env(outcomes: Path) -> dict[str, str]:
    """The environment a suite runs in: ours, minus what would steer its pytest or its imports."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = str(HERE / "plugins")
    env["SSE_CONFORMANCE_OUTCOMES"] = str(outcomes)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env
