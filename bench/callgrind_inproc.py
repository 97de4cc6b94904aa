"""One in-process stream of EVENTS events through one contender, for instruction counts:
``valgrind --tool=callgrind python bench/callgrind_inproc.py NAME EVENTS``, run twice with different
EVENTS and subtract (instructions per event, repeatable on a shared machine, unlike CPU time).

``--paced SECONDS``: the stream's clock (``time.monotonic`` as ``Writer.body``, the per-token path,
reads it) moves by that much per app send, so that coalescing holds and cuts as at that token rate, yet
repeatably (under callgrind the real clock runs 50 times slower, and with it what a coalesced stream
does)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path.pop(0)
sys.path.insert(0, str(ROOT))

from bench import apps, inproc  # noqa: E402


class _PacedClock:
    """``time`` for the stream module: a monotonic clock that moves ``step`` per reading."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.now = time.monotonic()

    def monotonic(self) -> float:
        self.now += self.step
        return self.now


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--paced" in sys.argv:
        import sse_middleware._asgi.last_write as last_write_module
        import sse_middleware._asgi.writer as writer_module

        args.remove(sys.argv[sys.argv.index("--paced") + 1])
        clock = _PacedClock(float(sys.argv[sys.argv.index("--paced") + 1]))
        setattr(writer_module, "time", clock)  # noqa: B010  (the module's own name for its clock)
        setattr(last_write_module, "time", clock)  # noqa: B010
    name, events = args[0], int(args[1])
    asyncio.run(inproc._drive(apps.build(name), name, events, collect=False))
