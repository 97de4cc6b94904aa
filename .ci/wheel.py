"""Check a built wheel: it holds the package (every tracked module of sse_middleware, its sub-packages
and py.typed) and its metadata, and nothing else (no tests, bench, examples or docs); its dependencies
are the runtime ones. Prints the wheel's files. Usage: python .ci/wheel.py dist/NAME.whl"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METADATA = {"METADATA", "WHEEL", "RECORD", "top_level.txt", "entry_points.txt"}  # + console script
RUNTIME = {"anyio", "opentelemetry-api", "exceptiongroup"}  # exceptiongroup: Python < 3.11 only


def main(wheel: Path) -> int:
    names = zipfile.ZipFile(wheel).namelist()
    print(f"{wheel.name}:", *names, sep="\n  ")
    tracked = subprocess.run(
        ["git", "ls-files", "sse_middleware"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    want = {name for name in tracked if name.endswith((".py", "/py.typed"))}
    package = {name for name in names if name.startswith("sse_middleware/")}
    meta = {name for name in names if ".dist-info/" in name}
    problems = [f"missing from the wheel: {name}" for name in sorted(want - package)]
    problems += [f"stray in the wheel: {name}" for name in sorted(set(names) - want - meta)]
    for sub in ("_core", "_asgi", "_telemetry"):
        if f"sse_middleware/{sub}/__init__.py" not in package:
            problems.append(f"sub-package {sub} is missing")
    if "sse_middleware/py.typed" not in package:
        problems.append("py.typed is missing: type checkers would ignore the package's hints")
    problems += [f"stray metadata: {n}" for n in sorted(meta) if n.split(".dist-info/", 1)[1] not in METADATA]
    metadata = zipfile.ZipFile(wheel).read(next(n for n in meta if n.endswith("/METADATA"))).decode()
    requires = Parser().parsestr(metadata).get_all("Requires-Dist") or ()
    name = re.compile(r"[A-Za-z0-9_.-]+")
    required = {name.match(req).group().lower() for req in requires if "extra ==" not in req}  # type: ignore[union-attr]
    if required != RUNTIME:
        problems.append(f"runtime dependencies {sorted(required)}, expected {sorted(RUNTIME)}")
    for problem in problems:
        print("WHEEL:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
