"""The per-stream stages on the app's body path, composed by one rule: each stage wraps the next.

A stage is an object made for one stream with ``wrap(inner) -> body``: given the body path behind it (what
it hands the app's bodies on to), it returns its own, which the stage before it (or the app) calls. The
writer's per-token path is the innermost; recovery (each run's bodies spliced onto the stream) comes
first, then the guards (whose gate hands approved text to the writer's own methods, so it keeps nothing
of ``inner``). A new stage (a stream recorder, pacing) is one class with ``wrap``, and one line in
:meth:`.stream.Stream.__init__`'s list.

Frames leave the other way, through one point: the writer's ``put`` (compression sits there).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from .._types import Message

Body = Callable[[Message], Awaitable[None]]
"""A body path: where an ``http.response.body`` message goes."""


class Stage(Protocol):
    def wrap(self, inner: Body) -> Body:
        """This stage's body path, in front of ``inner``."""


def compose(stages: Sequence[Stage], inner: Body) -> Body:
    """``inner`` with ``stages`` in front, the first listed outermost (the app's bodies reach it first)."""
    for stage in reversed(stages):
        inner = stage.wrap(inner)
    return inner
