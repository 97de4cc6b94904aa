"""The state of one run of the app on a recovered stream: its stages, the only moves between them as data,
and the one object that makes them (the rule of :mod:`..lifecycle`: one writer).

:class:`RunState` is the only code that assigns a run's ``stage`` (the quality test checks it); the shell
asks it (``stage``, ``failure``, ``refusal``) and calls its named transitions. One object serves every
run of a stream: a re-run starts over from :attr:`Stage.WAITING`. An illegal move raises
:class:`~..lifecycle.LifecycleError`, a bug of ours.
"""

from __future__ import annotations

import enum
from typing import Final

from ..dialects.recovery.common import Failure
from ..lifecycle import LifecycleError


class Stage(enum.Enum):
    WAITING = "waiting"  # a re-run whose response has not started (its upstream's answer): no stall clock
    STREAMING = "streaming"  # its response started: its bodies reach the stream, spliced
    REFUSED = "refused"  # a re-run that started with another status or content type: its bodies go nowhere
    FAILED = "failed"  # it failed (raised, an error event, a stall, a short body): a re-run or a give-up next
    ENDED = "ended"  # it ended and nothing is left to recover (the answer is whole, or the stream is over)
    GIVEN_UP = "given_up"  # the stream ends with the first failure's ending

    __hash__ = object.__hash__


MOVES: Final[dict[Stage, frozenset[Stage]]] = {
    Stage.WAITING: frozenset({Stage.STREAMING, Stage.REFUSED, Stage.FAILED, Stage.ENDED}),
    Stage.STREAMING: frozenset({Stage.FAILED, Stage.ENDED}),
    Stage.REFUSED: frozenset({Stage.FAILED, Stage.ENDED}),
    Stage.FAILED: frozenset({Stage.WAITING, Stage.ENDED, Stage.GIVEN_UP}),
    Stage.ENDED: frozenset(),
    Stage.GIVEN_UP: frozenset(),
}


class RunState:
    """The current run's stage, its failure (the first it met) and its start's refusal. Made at the
    first run's response start, so the first run is :attr:`Stage.STREAMING` from the outset."""

    __slots__ = ("failure", "refusal", "stage")

    def __init__(self) -> None:
        self.stage = Stage.STREAMING
        self.failure: Failure | None = None
        self.refusal: str | None = None

    def _move(self, new: Stage) -> None:
        if new not in MOVES[self.stage]:
            raise LifecycleError(f"a run cannot go from {self.stage.value} to {new.value}")
        self.stage = new

    def start(self, refusal: str | None) -> None:
        """A re-run's response started; ``refusal``: why it cannot continue the stream, if it cannot."""
        self.refusal = refusal
        self._move(Stage.STREAMING if refusal is None else Stage.REFUSED)

    def fail(self, failure: Failure | None, refusal: str | None = None) -> None:
        """Idempotent (the first failure wins). The run failed; ``refusal``: the request is at fault."""
        if self.stage is not Stage.FAILED:
            self._move(Stage.FAILED)
            self.failure = failure
        if refusal is not None and self.refusal is None:
            self.refusal = refusal

    def end(self) -> None:
        """Idempotent. Nothing is left to recover: the run ended well, or the stream is over."""
        if self.stage is not Stage.ENDED:
            self._move(Stage.ENDED)

    def give_up(self) -> None:
        self._move(Stage.GIVEN_UP)

    def rerun(self) -> None:
        """The failed run is followed by a re-run, waiting for its response's start."""
        self._move(Stage.WAITING)
        self.failure = self.refusal = None
