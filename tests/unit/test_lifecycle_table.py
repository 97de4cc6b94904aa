"""The lifecycle's table of moves, every phase x every target (h2's ``test_state_machines`` idea): what
the table allows, its named transitions do; what it does not, they refuse with ``LifecycleError`` and
leave the phase as it was. Everything is derived from ``Phase``, ``MOVES`` and ``Lifecycle``'s public
methods as they are, so that a new phase or transition is covered without a new test.

Deriving the illegal pairs from ``MOVES`` cannot by itself catch a wrong entry in ``MOVES``; what the
phases mean can: a move changes the phase (none to itself), the ends are ends, and the choice made at the
start (a stream, or a pass-through) is never made again."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest

from sse_middleware._core.lifecycle import MOVES, Lifecycle, LifecycleError, Phase

Path = tuple[str, ...]


def _transitions() -> list[str]:
    """Lifecycle's public methods (its named transitions and their helpers)."""
    return [
        name for name, member in inspect.getmembers(Lifecycle, inspect.isfunction) if not name.startswith("_")
    ]


def _call(life: Lifecycle, name: str) -> None:
    """Call a transition, any required argument a do-nothing callback (the only kind they take now)."""
    method = getattr(life, name)
    required = [
        p
        for p in inspect.signature(method).parameters.values()
        if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    method(*(lambda: None for _ in required))


def _at(path: Path) -> Lifecycle:
    life = Lifecycle(lambda: None)
    for name in path:
        _call(life, name)
    return life


def _reachable() -> dict[Phase, Path]:
    """Each phase the named transitions reach from a new lifecycle, by the shortest path of calls."""
    paths: dict[Phase, Path] = {Phase.WAITING: ()}
    todo = [Phase.WAITING]
    while todo:
        path = paths[todo.pop(0)]
        for name in _transitions():
            life = _at(path)
            try:
                _call(life, name)
            except LifecycleError:
                continue
            if life.phase not in paths:
                paths[life.phase] = (*path, name)
                todo.append(life.phase)
    return paths


def _outcomes() -> Iterator[tuple[Phase, str, Phase | None]]:
    """(phase, transition, the phase it moved to, or None when it raised LifecycleError)."""
    for phase, path in _reachable().items():
        for name in _transitions():
            life = _at(path)
            assert life.phase is phase
            try:
                _call(life, name)
            except LifecycleError:
                assert life.phase is phase  # a refused move changes nothing
                yield phase, name, None
            else:
                yield phase, name, life.phase


def _closure(start: Phase) -> set[Phase]:
    seen, todo = set(), [start]
    while todo:
        for nxt in MOVES[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_table_names_every_phase_and_every_phase_is_reached() -> None:
    assert set(MOVES) == set(Phase)
    assert set(_reachable()) == set(Phase)  # no phase the transitions cannot get to


def test_a_move_changes_the_phase_and_the_ends_are_ends() -> None:
    for phase, targets in MOVES.items():
        assert phase not in targets, f"{phase} -> {phase}: staying is not a move"
    assert MOVES[Phase.ENDED] == frozenset() and MOVES[Phase.PASSING] == frozenset()


def test_the_start_decides_once_between_a_stream_and_a_pass_through() -> None:
    streamed, passed = _closure(Phase.STREAMING), _closure(Phase.PASSING)
    assert Phase.PASSING not in streamed and Phase.STREAMING not in passed
    assert Phase.WAITING not in streamed | passed | _closure(Phase.WAITING)  # nothing goes back
    assert MOVES[Phase.WAITING] == {Phase.PASSING, Phase.STREAMING}


def test_every_move_a_transition_makes_is_in_the_table_and_every_entry_is_made() -> None:
    made = {(phase, to) for phase, _, to in _outcomes() if to is not None and to is not phase}
    assert made == {(phase, to) for phase, targets in MOVES.items() for to in targets}


@pytest.mark.parametrize(
    ("phase", "target"),
    [(phase, target) for phase in Phase for target in Phase if target not in MOVES[phase]],
    ids=lambda p: p.value,
)
def test_every_illegal_move_raises(phase: Phase, target: Phase) -> None:
    """Each transition that moves to ``target`` from somewhere refuses it from ``phase``: it raises
    LifecycleError, or (a transition that is a no-op outside its own phase, such as ``end()``) leaves the
    phase as it was. A transition that raises anywhere is strict: it never quietly stays put."""
    outcomes = list(_outcomes())
    towards = {name for start, name, to in outcomes if to is target and to is not start}
    strict = {name for _, name, to in outcomes if to is None}
    assert towards or target is Phase.WAITING, f"no transition moves to {target}"
    for start, name, to in outcomes:
        if start is phase and name in towards:
            assert to is None or to is phase, f"{name}() moved {phase} -> {to}"
            if name in strict:
                assert to is None, f"{name}() from {phase}: neither the move nor LifecycleError"


def test_a_strict_transition_from_a_phase_it_does_not_leave_raises() -> None:
    """The same promise from the other side: a transition that raises somewhere and did not move here
    raised here (no strict transition quietly does nothing)."""
    outcomes = list(_outcomes())
    strict = {name for _, name, to in outcomes if to is None}
    assert strict, "no transition raises: the table is not enforced"
    for phase, name, to in outcomes:
        if name in strict and to is phase:
            pytest.fail(f"{name}() from {phase.value}: it neither moved nor raised")
