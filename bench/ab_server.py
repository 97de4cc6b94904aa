"""Two (or more) checkouts, interleaved, through uvicorn: ``python bench/ab_server.py ROUNDS DIR [DIR ...]``.

Each DIR is a checkout of the project (``git worktree add /tmp/base <commit>``). Per round, each DIR in
turn (the order reversed every other round, so that neither always runs first) starts its own
``bench.serve`` and measures server CPU per token for ``raw``, coalesced (``middleware``) and
pass-through at 25, 100 and 1,000 tok/s (5,000 tok/s in all, 2.5 s each), and server CPU per one-token
stream for ``raw`` and ``middleware``. Prints the medians and the ratios to raw of the same DIR. This is
how docs/benchmarks.md compares commits: on a shared machine, runs an hour apart differ by more than
most changes do.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

RATES = (25.0, 100.0, 1000.0)
NAMES = ("raw", "middleware", "middleware_passthrough")

_ONE_ROUND = f"""
import json, sys
sys.path.insert(0, ".")
from bench import server
names = {list(NAMES)!r}
out = {{}}
with server.uvicorn_server(names) as (pid, port):
    for name in names:
        server.paced_cpu(pid, port, name, 200.0, 4, 0.3)  # warm-up
    for rate in {list(RATES)!r}:
        for name in names:
            got = server.paced_cpu(pid, port, name, rate, max(2, round(5000 / rate)), 2.5)
            out[f"{{name}}@{{int(rate)}}"] = got["cpu_us_per_token"]
    per = server.per_stream(pid, port, ["raw", "middleware"], 400, lambda message: None)
    out["per_stream raw"], out["per_stream middleware"] = per["raw"], per["middleware"]
print(json.dumps(out))
"""


def one_round(checkout: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _ONE_ROUND], cwd=checkout, capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    rounds, checkouts = int(sys.argv[1]), [Path(arg).resolve() for arg in sys.argv[2:]]
    if rounds < 1 or not checkouts:
        raise SystemExit(__doc__)
    runs: dict[Path, list[dict[str, float]]] = {checkout: [] for checkout in checkouts}
    for i in range(rounds):
        for checkout in checkouts if i % 2 == 0 else checkouts[::-1]:
            runs[checkout].append(one_round(checkout))
    for checkout, results in runs.items():
        median = {key: statistics.median(r[key] for r in results) for key in results[0]}
        ratios = {
            key: round(value / median["raw@" + key.split("@")[1]], 3)
            for key, value in median.items()
            if "@" in key and not key.startswith("raw")
        }
        ratios["per_stream"] = round(median["per_stream middleware"] / median["per_stream raw"], 3)
        print(checkout, json.dumps({key: round(value, 1) for key, value in median.items()}))
        print("   ratios to raw", json.dumps(ratios))


if __name__ == "__main__":
    main()
