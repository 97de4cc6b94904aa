"""The state table of one run of the app on a recovered stream (:mod:`sse_middleware._core.recovery.run`):
every stage against every move, the legal ones as the table says and every other an error of ours."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sse_middleware._core.lifecycle import LifecycleError
from sse_middleware._core.recovery import Failure
from sse_middleware._core.recovery.run import MOVES, RunState, Stage

STALL = Failure("stall")
# Each named transition, and the stage it moves to from a stage that allows it.
TRANSITIONS: dict[str, tuple[Callable[[RunState], None], Stage]] = {
    "start": (lambda s: s.start(None), Stage.STREAMING),
    "start refused": (lambda s: s.start("the re-run answered 400"), Stage.REFUSED),
    "fail": (lambda s: s.fail(STALL), Stage.FAILED),
    "end": (RunState.end, Stage.ENDED),
    "give up": (RunState.give_up, Stage.GIVEN_UP),
    "rerun": (RunState.rerun, Stage.WAITING),
}
IDEMPOTENT = {"fail": Stage.FAILED, "end": Stage.ENDED}


def at(stage: Stage) -> RunState:
    """A run state in ``stage``, reached through transitions only."""
    state = RunState()
    path = {
        Stage.STREAMING: [],
        Stage.FAILED: ["fail"],
        Stage.WAITING: ["fail", "rerun"],
        Stage.REFUSED: ["fail", "rerun", "start refused"],
        Stage.ENDED: ["end"],
        Stage.GIVEN_UP: ["fail", "give up"],
    }[stage]
    for name in path:
        TRANSITIONS[name][0](state)
    assert state.stage is stage
    return state


@pytest.mark.parametrize("stage", list(Stage))
@pytest.mark.parametrize("name", list(TRANSITIONS))
def test_every_stage_against_every_move(stage: Stage, name: str) -> None:
    move, target = TRANSITIONS[name]
    state = at(stage)
    if target in MOVES[stage] or IDEMPOTENT.get(name) is stage:
        move(state)
        assert state.stage is target
    else:
        with pytest.raises(LifecycleError):
            move(state)
        assert state.stage is stage


def test_the_first_failure_of_a_run_wins_and_a_rerun_forgets_it() -> None:
    state = RunState()
    state.fail(STALL)
    state.fail(Failure("exception"), "the upstream answered 400")
    assert state.failure is STALL and state.refusal == "the upstream answered 400"
    state.rerun()
    assert state.stage is Stage.WAITING
    assert state.failure is None and state.refusal is None


def test_a_first_run_is_streaming_from_the_outset() -> None:
    assert RunState().stage is Stage.STREAMING
