"""One in-process stream of EVENTS events through one contender, for instruction counts:
``valgrind --tool=callgrind python bench/callgrind_inproc.py NAME EVENTS``, run twice with different
EVENTS and subtract (instructions per event, repeatable on a shared machine, unlike CPU time)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path.pop(0)
sys.path.insert(0, str(ROOT))

from bench import apps, inproc  # noqa: E402

if __name__ == "__main__":
    name, events = sys.argv[1], int(sys.argv[2])
    asyncio.run(inproc._drive(apps.build(name), name, events, collect=False))
