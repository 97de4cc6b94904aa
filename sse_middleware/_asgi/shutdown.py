"""Knowing that the server is stopping, without patching the server.

uvicorn (and most servers) wait for open responses before the lifespan shutdown, with no limit unless
told, so an endless stream hangs a deploy: the lifespan event comes too late to help. What every server
does first is receive SIGTERM or SIGINT. We *chain* the process's handler for those: ours schedules the
drain on the event loop and then calls whatever handler was there before (the server's), so the server
shuts down exactly as it would without us. Nothing of the server's is replaced or patched.

The order matters, and is why we install lazily, when the first stream starts: uvicorn's
``Server.capture_signals`` sets its handlers with ``signal.signal`` before it loads the app and restores
the previous ones when it stops. A handler installed before that (at import) would simply be replaced;
one installed while serving sits in front of uvicorn's and is removed with it. If the server restores its
handlers and serves again (or another loop runs), the next stream finds our link gone and chains again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any, Final

from .backend import asyncio_loop, trio_module

_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)

try:  # signal.getsignal, without its Enum look-up: that raises and catches a ValueError per call
    from _signal import getsignal as _raw_getsignal  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # an interpreter without CPython's module
    _raw_getsignal = signal.getsignal

Schedule = Callable[[Callable[[], None]], object]
Handler = Callable[[int, FrameType | None], Any]


def _current_loop() -> tuple[object, Schedule] | None:
    """The running event loop (an identity) and a thread- and signal-safe way to run a function *in a
    new task* on it: the drain starts tasks and cancel scopes, which anyio allows only inside one."""
    loop = asyncio_loop()
    if loop is not None:
        tasks: set[asyncio.Task[None]] = set()  # strong references until each is done

        def in_asyncio_task(fn: Callable[[], None]) -> None:
            task = loop.create_task(_call(fn))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        return loop, lambda fn: loop.call_soon_threadsafe(in_asyncio_task, fn)
    trio = trio_module()  # only if the app already runs on trio; never imported by us
    if trio is not None:
        try:
            token = trio.lowlevel.current_trio_token()
        except RuntimeError:
            return None
        spawn = trio.lowlevel.spawn_system_task
        return token, lambda fn: token.run_sync_soon(spawn, _call, fn)
    return None


async def _call(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:  # never let a drain take the server down (a trio system task would)
        logging.getLogger("sse_middleware").exception("draining streams for the shutdown failed")


class ShutdownWatch:
    """Per middleware instance: whether the server is stopping, and our link in the signal chain."""

    def __init__(self, on_shutdown: Callable[[], None]) -> None:
        self._on_shutdown = on_shutdown
        self.stopping = False
        self._heads: tuple[object, ...] = ()  # the loop and the handlers in front when we last looked

    def install(self) -> None:
        """Chain our handler in front of the current one, unless our link for this loop is already in the
        chain. Main thread only (Python runs signal handlers there, and only it may set them)."""
        heads = (asyncio_loop(), *map(_raw_getsignal, _SIGNALS))  # _heads(), inlined: asked per stream
        if heads == self._heads:
            return  # nothing moved since we looked: the usual case, every stream after the first
        if threading.current_thread() is not threading.main_thread():
            return
        current = _current_loop()
        if current is None:
            return
        loop, schedule = current
        for sig in _SIGNALS:
            previous = signal.getsignal(sig)
            # SIG_DFL / SIG_IGN / None: no server manages this signal; changing it would change behaviour.
            if callable(previous) and not _linked(previous, self, loop):
                signal.signal(sig, _Link(self, loop, schedule, previous))
        self._heads = _heads()

    def fire(self) -> None:
        """Runs on the event loop, once: end the open streams."""
        if not self.stopping:
            self.stopping = True
            self._on_shutdown()


def _heads() -> tuple[object, ...]:
    """The loop, and the handler in front for each of ``_SIGNALS``: what :meth:`ShutdownWatch.install`
    compares, per stream."""
    return (asyncio_loop(), *map(_raw_getsignal, _SIGNALS))


class _Link:
    """Our handler: schedule the drain on the loop, then hand the signal to the previous handler."""

    __slots__ = ("loop", "previous", "schedule", "watch")

    def __init__(self, watch: ShutdownWatch, loop: object, schedule: Schedule, previous: Handler) -> None:
        self.watch = weakref.ref(watch)  # a handler must not keep a middleware (and its app) alive
        self.loop = loop
        self.schedule = schedule
        self.previous = previous

    def __call__(self, signum: int, frame: FrameType | None) -> Any:
        watch = self.watch()
        if watch is not None:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nothing left to drain
                self.schedule(watch.fire)
        return self.previous(signum, frame)


def _linked(handler: Any, watch: ShutdownWatch, loop: object) -> bool:
    """Whether ``watch`` already has a link for ``loop`` in the chain that starts at ``handler``."""
    while isinstance(handler, _Link):
        if handler.watch() is watch and handler.loop is loop:
            return True
        handler = handler.previous
    return False
