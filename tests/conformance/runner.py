"""The conformance runner: Starlette's, FastAPI's and sse-starlette's own test suites, from their pinned
sdists, run once as is (the control) and once with ``StreamingMiddleware`` injected into every app they
build (plugins/sse_conformance_inject.py says how), compared per test id.

A test that passes in the control and does not pass with the middleware is a *difference*. Each one is
run again once, alone: if it passes then, it is reported as flaky, not as a difference. A difference is
acceptable only when ``differences.toml`` lists it (a test id, or a pattern with ``*``) with its reason;
an entry that no longer matches any difference is stale and must go. Tests that fail or skip in the
control are not compared (their number is reported).

    python -m tests.conformance.runner [starlette|fastapi|sse-starlette ...] [--fresh-control]

Exit status 0 when every difference is documented and no entry is stale, 1 otherwise, 2 when a suite
could not be set up or did not run to its end. The control depends only on the pins, so its outcomes
are kept in ``.conformance-cache/results/`` and reused until the pins, the suite selection or the
stand-ins change (``--fresh-control`` runs it anyway).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import tomllib

from . import environment as env

NAMES = {"starlette": "Starlette", "fastapi": "FastAPI", "sse-starlette": "sse-starlette"}
SUITE_TIMEOUT = 1200  # seconds for one whole run; each test also has pytest-timeout's 60 s


class SuiteError(RuntimeError):
    """A suite did not run to its end (pytest crashed, could not start, or wrote no outcomes)."""


@dataclasses.dataclass
class Run:
    outcomes: dict[str, str]
    messages: dict[str, str]
    seconds: float
    cached: bool = False


@dataclasses.dataclass
class Result:
    project: str
    compared: int  # tests that passed in the control
    ignored: int  # tests that failed, errored or skipped in the control
    documented: dict[str, str]  # test id -> reason
    undocumented: dict[str, str]  # test id -> what happened with the middleware
    flaky: list[str]
    stale: list[str]  # differences.toml patterns that matched nothing
    control: Run
    injected: Run

    @property
    def ok(self) -> bool:
        return not self.undocumented and not self.stale


def pytest_command(python: Path, project: str, *, inject: bool, only: list[str] | None = None) -> list[str]:
    suite = env.suites()[project]
    cmd = [str(python), "-m", "pytest", "-p", "sse_conformance_record", "-p", "no:cacheprovider"]
    if inject:
        cmd += ["-p", "sse_conformance_inject"]
    cmd += ["-q", "--timeout=60", *suite.get("args", [])]  # type: ignore[misc]
    for ignored in suite.get("ignore", []):  # type: ignore[attr-defined]
        cmd.append(f"--ignore={ignored['path']}")
    if only is None:  # loadgroup: FastAPI keeps tests that share a working directory on one worker
        cmd += ["-n", "2", "--dist", "loadgroup", *suite["paths"]]  # type: ignore[misc]
    else:
        cmd += ["-p", "no:xdist", *only]
    return cmd


def run_suite(project: str, *, inject: bool, only: list[str] | None = None) -> Run:
    src, python = env.source(project), env.venv_python()
    results = env.CACHE / "results"
    results.mkdir(parents=True, exist_ok=True)
    label = f"{project}-{'injected' if inject else 'control'}{'-rerun' if only else ''}"
    outcomes, log = results / f"{label}.json", results / f"{label}.log"
    outcomes.unlink(missing_ok=True)
    began = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(
            pytest_command(python, project, inject=inject, only=only),
            cwd=src,
            env=env.suite_env(outcomes),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=SUITE_TIMEOUT,
        )
    seconds = time.monotonic() - began
    if done.returncode not in (0, 1) or not outcomes.exists():
        tail = log.read_text(errors="replace")[-4000:]
        raise SuiteError(f"{label}: pytest exited {done.returncode} (log: {log}):\n{tail}")
    data = json.loads(outcomes.read_text())
    return Run(data["outcomes"], data["messages"], seconds)


def _control_key(project: str) -> str:
    suite = " ".join(pytest_command(Path("python"), project, inject=False))
    standins = b"".join(p.read_bytes() for p in sorted((env.HERE / "standins").rglob("*.py")))
    recorder = (env.HERE / "plugins" / "sse_conformance_record.py").read_bytes()
    blob = env.REQUIREMENTS.read_bytes() + suite.encode() + standins + recorder + sys.version.encode()
    return hashlib.sha256(blob).hexdigest()


def control(project: str, *, fresh: bool) -> Run:
    cached = env.CACHE / "results" / f"{project}-control.cached.json"
    key = _control_key(project)
    if not fresh and cached.exists():
        data = json.loads(cached.read_text())
        if data.get("key") == key:
            return Run(data["outcomes"], data["messages"], data["seconds"], cached=True)
    run = run_suite(project, inject=False)
    payload = {"key": key, **dataclasses.asdict(run)}
    cached.write_text(json.dumps(payload))
    return run


def documented_differences(project: str) -> list[dict[str, str]]:
    with (env.HERE / "differences.toml").open("rb") as f:
        entries: list[dict[str, str]] = tomllib.load(f).get(project, [])
    for entry in entries:
        if not entry.get("test") or not entry.get("reason", "").strip():
            raise ValueError(
                f"differences.toml [[{project}]]: every entry needs a test and a reason: {entry}"
            )
    return entries


def _matches(pattern: str, test_id: str) -> bool:
    return re.fullmatch(re.escape(pattern).replace(r"\*", ".*"), test_id) is not None


def compare(project: str, *, fresh_control: bool = False) -> Result:
    with env.locked():
        base = control(project, fresh=fresh_control)
        injected = run_suite(project, inject=True)
        passed = sorted(t for t, outcome in base.outcomes.items() if outcome == "passed")
        differing = [t for t in passed if injected.outcomes.get(t, "missing") != "passed"]
        flaky: list[str] = []
        if differing:
            again = run_suite(project, inject=True, only=differing)
            flaky = [t for t in differing if again.outcomes.get(t) == "passed"]
    entries = documented_differences(project)
    documented: dict[str, str] = {}
    undocumented: dict[str, str] = {}
    used: set[str] = set()
    for test in (t for t in differing if t not in flaky):
        entry = next((e for e in entries if _matches(e["test"], test)), None)
        if entry is None:
            outcome = injected.outcomes.get(test, "missing")
            undocumented[test] = f"{outcome}: {injected.messages.get(test, '')}".rstrip(": ")
        else:
            documented[test] = entry["reason"]
            used.add(entry["test"])
    stale = [e["test"] for e in entries if e["test"] not in used]
    return Result(
        project=project,
        compared=len(passed),
        ignored=len(base.outcomes) - len(passed),
        documented=documented,
        undocumented=undocumented,
        flaky=flaky,
        stale=stale,
        control=base,
        injected=injected,
    )


def describe(result: Result) -> str:
    name = NAMES[result.project]
    c, i = result.control, result.injected
    lines = [
        f"{name}: {result.compared} tests compared ({result.ignored} failing or skipped in the control,"
        f" not compared); {len(result.documented)} documented differences,"
        f" {len(result.undocumented)} others, {len(result.flaky)} flaky;"
        f" control {c.seconds:.0f} s{' (cached)' if c.cached else ''}, injected {i.seconds:.0f} s",
    ]
    lines += [f"  UNDOCUMENTED {test}  ->  {what}" for test, what in sorted(result.undocumented.items())]
    lines += [f"  flaky (passed when run again) {test}" for test in result.flaky]
    lines += [f"  STALE differences.toml entry, matches no difference now: {test}" for test in result.stale]
    lines += [f"  documented {test}" for test in sorted(result.documented)]
    return "\n".join(lines)


def figures(results: list[Result]) -> str:
    """The sentence of docs/drop-in.md."""
    counts = [f"{NAMES[r.project]} {r.compared}" for r in results]
    counts[0] += " tests"
    documented = sum(len(r.documented) for r in results)
    others = sum(len(r.undocumented) for r in results)
    return f"{', '.join(counts)}: {documented} documented differences, {others} others"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("projects", nargs="*", metavar="|".join(env.PROJECTS), help="default: all three")
    parser.add_argument("--fresh-control", action="store_true", help="run the control even if cached")
    parser.add_argument("--setup", action="store_true", help="only fetch the sdists and build the venv")
    args = parser.parse_args(argv)
    unknown = set(args.projects) - set(env.PROJECTS)
    if unknown:
        parser.error(f"unknown project(s): {', '.join(sorted(unknown))}")
    results = []
    try:
        if args.setup:
            with env.locked():
                print(*(env.source(p) for p in args.projects or env.PROJECTS), env.venv_python(), sep="\n")
            return 0
        for project in args.projects or env.PROJECTS:
            result = compare(project, fresh_control=args.fresh_control)
            print(describe(result), flush=True)
            results.append(result)
    except (env.SetupError, SuiteError) as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    print(figures(results))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
