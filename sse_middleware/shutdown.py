"""Knowing that the server is stopping, without patching the server.

uvicorn (and most servers) wait for open responses before the lifespan shutdown, with no limit unless
told, so an endless stream hangs a deploy: the lifespan event comes too late to help. What every server
does first is receive SIGTERM or SIGINT. We *chain* the process's handler for those: ours schedules the
drain on the event loop and then calls whatever handler was there before (the server's), so the server
shuts down exactly as it would without us. Nothing of the server's is replaced or patched; when the
server restores its original handlers on exit, ours goes with them.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any, Final

_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)

def _scheduler() -> Callable[[Callable[[], None]], None] | None:
    """A thread- and signal-safe way to run a callback on the current event loop."""
    try:
        return asyncio.get_running_loop().call_soon_threadsafe
    except RuntimeError:
        pass
    trio = sys.modules.get("trio")  # only if the app already runs on trio; never imported by us
    if trio is not None:
        try:
            schedule: Callable[[Callable[[], None]], None] = trio.lowlevel.current_trio_token().run_sync_soon
            return schedule
        except RuntimeError:
            pass
    return None


class ShutdownWatch:
    """Per middleware instance: which streams are open, and whether the server is stopping."""

    def __init__(self, on_shutdown: Callable[[], None]) -> None:
        self._on_shutdown = on_shutdown
        self._installed = False
        self.stopping = False

    def install(self) -> None:
        """Chain our handler in front of the current one, once per signal. Main thread only."""
        if self._installed or threading.current_thread() is not threading.main_thread():
            return
        schedule = _scheduler()
        if schedule is None:
            return
        ref = weakref.WeakMethod(self._fire)
        self._installed = True
        for sig in _SIGNALS:
            previous = signal.getsignal(sig)
            if callable(previous):  # default or ignored: no server manages this signal, leave it alone
                signal.signal(sig, _chained(ref, schedule, previous))

    def _fire(self) -> None:
        if not self.stopping:
            self.stopping = True
            self._on_shutdown()


def _chained(
    ref: weakref.WeakMethod[Callable[[], None]],
    schedule: Callable[[Callable[[], None]], None],
    previous: Callable[[int, FrameType | None], Any],
) -> Callable[[int, FrameType | None], Any]:
    def handler(signum: int, frame: FrameType | None) -> Any:
        fire = ref()
        if fire is not None:
            try:
                schedule(fire)
            except RuntimeError:  # the loop is closed: nothing left to drain
                pass
        return previous(signum, frame)

    return handler
