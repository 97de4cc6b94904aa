"""Sans-I/O: which of a stream's deadlines comes next, and what is due when the stream's watcher wakes.

One watcher serves them all (shutdown grace and hard stop, stall, coalescing window, heartbeat), so the
per-token path never touches a timer unless merged text starts waiting: it only moves ``last_app`` /
``last_write``, and the watcher reads them when it wakes.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Final

from . import headers
from .config import CoreConfig
from .pipeline import Pipeline

FINALIZE_SECONDS: Final = 5.0
"""A bound on every await in a stream's cleanup, and on how long a shutdown waits past its grace: a
client that stopped reading cannot hold a worker or a deploy."""


class Due(enum.Enum):
    NOTHING = "nothing"  # woke early (the deadline moved): sleep again
    HARD_STOP = "hard_stop"  # past the shutdown grace and the bounded cleanup: cancel everything
    SHUTDOWN = "shutdown"  # the shutdown grace is over: end with a reconnect hint
    STALL = "stall"  # the app said nothing for stall_timeout: end with a timeout error
    FLUSH = "flush"  # merged text has waited coalesce_max_delay
    HEARTBEAT = "heartbeat"  # the wire was silent for heartbeat_interval
    POSTPONE = "postpone"  # a heartbeat is due but the wire is inside a huge event: wait for its end


@dataclass(slots=True)
class Clocks:
    """The times the deadlines count from (monotonic seconds)."""

    last_write: float = 0.0  # anything written to the client
    last_app: float = 0.0  # anything the app sent
    shutdown_at: float = math.inf
    stop_at: float = math.inf  # the hard stop: shutdown_at plus FINALIZE_SECONDS

    def shutdown(self, at: float) -> None:
        self.shutdown_at = min(self.shutdown_at, at)
        self.stop_at = self.shutdown_at + FINALIZE_SECONDS


def next_deadline(s: CoreConfig, pipe: Pipeline, clocks: Clocks) -> float:
    """The next time anything is due on a live stream."""
    deadline = clocks.shutdown_at
    due = pipe.deadline()
    if due < deadline:
        deadline = due
    if s.heartbeat_interval > 0 and pipe.kind == headers.SSE:
        deadline = min(deadline, clocks.last_write + s.heartbeat_interval)
    if s.stall_timeout > 0:
        deadline = min(deadline, clocks.last_app + s.stall_timeout)
    return deadline


def due(s: CoreConfig, pipe: Pipeline, clocks: Clocks, now: float) -> Due:
    """What to do at ``now`` on a live stream, most urgent first."""
    if now >= clocks.stop_at:
        return Due.HARD_STOP
    if now >= clocks.shutdown_at:
        return Due.SHUTDOWN
    if s.stall_timeout > 0 and now >= clocks.last_app + s.stall_timeout:
        return Due.STALL
    if now >= pipe.deadline():
        return Due.FLUSH
    if (
        s.heartbeat_interval <= 0
        or pipe.kind != headers.SSE
        or now < clocks.last_write + s.heartbeat_interval
    ):
        return Due.NOTHING
    return Due.POSTPONE if pipe.mid_event else Due.HEARTBEAT
