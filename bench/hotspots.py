"""Where one contender's in-process time goes: ``python bench/hotspots.py NAME [EVENTS] [--cprofile]``.

pyinstrument (statistical, the call tree) by default; ``--cprofile`` prints the top functions by own
time instead, which is what to read for a hot path made of many tiny calls.
"""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path.pop(0)
sys.path.insert(0, str(ROOT))

from bench import apps, inproc  # noqa: E402


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    name = args[0] if args else "middleware_passthrough"
    events = int(args[1]) if len(args) > 1 else 50_000
    app = apps.build(name)

    async def go() -> None:
        await inproc._drive(app, name, 2000)  # warm-up
        await inproc._drive(app, name, events)

    if "--cprofile" in sys.argv:
        prof = cProfile.Profile()
        prof.enable()
        asyncio.run(go())
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
        return
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0002)
    profiler.start()
    asyncio.run(go())
    profiler.stop()
    print(profiler.output_text(unicode=False, color=False, show_all=False))


if __name__ == "__main__":
    main()
