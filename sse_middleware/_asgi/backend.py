"""Which event loop runs us, asked in one place: asyncio, or trio (through anyio, the app may run on
either). The shell needs the loop itself only for what anyio does not offer cheaply: a timer callback with
no task (asyncio), a task with no task group, and a signal-safe way onto the loop.

trio is never imported here: it is looked up in ``sys.modules``, where it is only when the app already
runs on it.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import sys
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Final

import anyio

try:  # the class anyio.CancelScope(...) makes on asyncio, in every anyio 4
    from anyio._backends._asyncio import CancelScope as _AsyncioScope
except ImportError:  # pragma: no cover - an anyio laid out otherwise: its own constructor, always
    _AsyncioScope = None  # type: ignore[assignment,misc,unused-ignore]

Loop = asyncio.AbstractEventLoop


asyncio_loop: Final[Callable[[], Loop | None]] = asyncio._get_running_loop
"""The running asyncio loop, or None (trio, or no loop): the public ``get_running_loop`` raises and
catches a ``RuntimeError`` where there is none, at each call. The function itself, not a wrapper: it is
called for every stream."""


def cancel_scope(deadline: float = math.inf) -> anyio.CancelScope:
    """``anyio.CancelScope(deadline=deadline)``. On asyncio it is made by the backend's class itself:
    anyio's constructor first asks sniffio which library runs, which costs more than the scope (made
    once per request, and per write that may be cut)."""
    if _AsyncioScope is not None and asyncio_loop() is not None:
        return _AsyncioScope(deadline=deadline)
    return anyio.CancelScope(deadline=deadline)


class TaskCut:
    """A cut for a write the current asyncio task makes, with no cancel scope to enter and leave (which
    costs more than the rest of a stream's last write): :meth:`cancel` cancels the task, and leaving the
    ``with`` block takes that cancellation back (``Task.uncancel``) and swallows it, as a scope would, so
    ``cancelled_caught`` says the write was cut. A cancellation of anyone else's goes through untouched.
    Only for a write nothing else gives a deadline."""

    __slots__ = ("_at_enter", "_cut", "_task", "cancelled_caught")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self._task = task
        self._cut = False
        self._at_enter = 0
        self.cancelled_caught = False

    def __enter__(self) -> TaskCut:
        self._at_enter = self._task.cancelling()
        return self

    def cancel(self) -> None:
        if not self._cut:
            self._cut = True
            self._task.cancel()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if not self._cut:
            return False
        if self._task.uncancel() > self._at_enter:  # cancelled by someone else too: theirs goes on
            return False
        self.cancelled_caught = kind is not None and issubclass(kind, asyncio.CancelledError)
        return self.cancelled_caught


def cuttable(deadline: float = math.inf) -> TaskCut | anyio.CancelScope:
    """What a write that may be cut runs in: a :class:`TaskCut` when nothing but a cut can end it (no
    ``deadline``) and the task is asyncio's with ``uncancel`` (Python >= 3.11), else a cancel scope."""
    if deadline == math.inf and _UNCANCEL and asyncio_loop() is not None:
        task = asyncio.current_task()
        if task is not None:
            return TaskCut(task)
    return cancel_scope(deadline)


_UNCANCEL: Final = sys.version_info >= (3, 11)


def cancelled_class() -> type[BaseException]:
    """``anyio.get_cancelled_exc_class()``, without its look-up of the running library on asyncio."""
    return asyncio.CancelledError if asyncio_loop() is not None else anyio.get_cancelled_exc_class()


def trio_module() -> Any | None:
    """trio, if this process already imported it (only then can the app run on it)."""
    return sys.modules.get("trio")


def spawn_child(run: Callable[[], Coroutine[Any, Any, None]], name: str, loop: Loop | None) -> object:
    """Start ``run()`` beside the caller's task, in no task group (see :mod:`.watcher`): a task on
    ``loop`` (asyncio), or with none, a trio system task in a copy of the current context. The caller
    joins it before its stream ends."""
    if loop is not None:
        return loop.create_task(run())
    trio: Any = sys.modules["trio"]  # only ever here when the app runs on trio
    return trio.lowlevel.spawn_system_task(run, name=name, context=contextvars.copy_context())
