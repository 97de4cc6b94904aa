"""Which event loop runs us, asked in one place: asyncio, or trio (through anyio, the app may run on
either). The shell needs the loop itself only for what anyio does not offer cheaply: a timer callback with
no task (asyncio), a task with no task group, and a signal-safe way onto the loop.

trio is never imported here: it is looked up in ``sys.modules``, where it is only when the app already
runs on it.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import Callable, Coroutine
from typing import Any

Loop = asyncio.AbstractEventLoop


def asyncio_loop() -> Loop | None:
    """The running asyncio loop, or None (trio, or no loop). ``asyncio._get_running_loop``: the public
    ``get_running_loop`` raises and catches a ``RuntimeError`` where there is none, at each call."""
    return asyncio._get_running_loop()


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
