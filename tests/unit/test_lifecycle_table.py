"""The lifecycle's tables of moves, every phase x every target and every client state x every target
(h2's ``test_state_machines`` idea): what a table allows, its named transitions do; what it does not,
they refuse with ``LifecycleError`` and leave the state as it was. Everything is derived from ``Phase``,
``Client``, ``MOVES``, ``CLIENT_MOVES`` and ``Lifecycle``'s public methods as they are, so that a new
state or transition is covered without a new test. The naming is read too: a transition whose docstring
says "idempotent" changes nothing the second time; one that does not raises wherever it cannot move.

Deriving the illegal pairs from a table cannot by itself catch a wrong entry in it; what the states mean
can: a move changes the phase (none to itself), the ends are ends (a detached client's frames belong to
the log for good), and the choice made at the start (a stream, or a pass-through) is never made again."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest

from sse_middleware._core.errors import ErrorInfo
from sse_middleware._core.lifecycle import CLIENT_MOVES, MOVES, Client, Lifecycle, LifecycleError, Phase

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


State = tuple[Phase, Client]


def _state(life: Lifecycle) -> State:
    return life.phase, life.client


def _states() -> dict[State, Path]:
    """Each (phase, client) the named transitions reach from a new lifecycle, by the shortest path."""
    paths: dict[State, Path] = {(Phase.WAITING, Client.CONNECTED): ()}
    todo = [(Phase.WAITING, Client.CONNECTED)]
    while todo:
        path = paths[todo.pop(0)]
        for name in _transitions():
            life = _at(path)
            try:
                _call(life, name)
            except LifecycleError:
                continue
            if _state(life) not in paths:
                paths[_state(life)] = (*path, name)
                todo.append(_state(life))
    return paths


def _reachable() -> dict[Phase, Path]:
    """Each phase the named transitions reach from a new lifecycle, by the shortest path of calls."""
    paths: dict[Phase, Path] = {}
    for (phase, _), path in _states().items():  # found breadth first: the shortest path first
        paths.setdefault(phase, path)
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


# -- the client's table, the naming, the ending's reason ----------------------------------------------


def _state_outcomes() -> Iterator[tuple[State, str, State | None]]:
    """(state, transition, the state it moved to, or None when it raised LifecycleError)."""
    for state, path in _states().items():
        for name in _transitions():
            life = _at(path)
            try:
                _call(life, name)
            except LifecycleError:
                assert _state(life) == state  # a refused move changes nothing
                yield state, name, None
            else:
                yield state, name, _state(life)


def _idempotent(name: str) -> bool:
    return "idempotent" in (getattr(Lifecycle, name).__doc__ or "").lower()


def test_the_client_table_is_made_and_enforced() -> None:
    """Every client move a transition makes is in ``CLIENT_MOVES`` and every entry is made; every move
    not in it is refused. Killed by ``_move_client`` without its check (``client_left()`` after
    ``detach()`` then goes DETACHED -> GONE)."""
    outcomes = list(_state_outcomes())
    assert {client for _, client in _states()} == set(Client)
    made = {(s[1], to[1]) for s, _, to in outcomes if to is not None and to[1] is not s[1]}
    assert made == {(c, to) for c, targets in CLIENT_MOVES.items() for to in targets}
    towards = {(name, to[1]) for s, name, to in outcomes if to is not None and to[1] is not s[1]}
    for (_, client), name, to in outcomes:
        for mover, target in towards:
            if name == mover and target not in CLIENT_MOVES[client] and target is not client:
                assert to is None or to[1] is client, f"{name}() moved the client {client} -> {to}"


def test_a_detached_client_is_an_end_and_connected_is_never_returned_to() -> None:
    """Killed by ``CLIENT_MOVES[DETACHED]`` allowing GONE (a detached stream's log would stop being fed
    when a write to its long-gone client fails)."""
    assert CLIENT_MOVES[Client.DETACHED] == frozenset()
    assert all(Client.CONNECTED not in targets for targets in CLIENT_MOVES.values())
    life = Lifecycle(lambda: None)
    life.stream(lambda: None)
    life.detach()
    with pytest.raises(LifecycleError):
        life.client_left()
    assert life.client is Client.DETACHED


def test_an_idempotent_transition_changes_nothing_the_second_time() -> None:
    """Killed by ``detach()`` moving the client again (its second call raises: the watcher is killed when
    a stuck client is detached at a shutdown's handover), and by a later ``end()`` or ``fail()`` taking
    the ending's reason."""
    named = [name for name in _transitions() if _idempotent(name)]
    assert {"detach", "end", "abandon", "fail", "let_go"} <= set(named)
    for state, path in _states().items():
        for name in named:
            life = _at(path)
            try:
                _call(life, name)
            except LifecycleError:
                continue
            once = (_state(life), life.ending, life.ours, life.abandoned)
            _call(life, name)  # fresh arguments: a second reason, which must not win
            assert (_state(life), life.ending, life.ours, life.abandoned) == once, (
                f"{name}() twice from {state}"
            )


def test_a_transition_not_named_idempotent_raises_wherever_it_does_not_move() -> None:
    """A transition that moves the phase or the client somewhere and does not say it is idempotent is
    strict: from any other state it raises. Killed by ``client_gone()`` doing nothing outside STREAMING
    (it then quietly stays put in WAITING, PASSING or ENDED)."""
    outcomes = list(_state_outcomes())
    movers = {name for s, name, to in outcomes if to is not None and to != s and not _idempotent(name)}
    assert {"client_gone", "closed", "closing", "finished", "client_left", "stream"} <= movers
    for state, name, to in outcomes:
        if name in movers:
            assert to != state, f"{name}() from {state}: neither a move nor LifecycleError"


def test_the_first_reason_wins() -> None:
    """``end()`` then ``end()`` or ``fail()``: the client is told the first reason; a refused write is
    still kept for the report. Killed by a later call taking ``ending``."""
    first, second = ErrorInfo("stall", "first", "a"), ErrorInfo("internal_error", "second", "b")
    for later in ("end", "fail"):
        cancelled: list[int] = []
        life = Lifecycle(lambda cancelled=cancelled: cancelled.append(1))
        life.stream(lambda: None)
        life.end(first)
        failure = OSError("refused")
        life.end(second) if later == "end" else life.fail(failure, second)
        assert life.ending is first and life.phase is Phase.ENDING and cancelled == [1], later
        assert life.write_failure is (failure if later == "fail" else None)
    control = Lifecycle(lambda: None)  # the control: the first call alone sets the reason
    control.stream(lambda: None)
    control.fail(OSError("refused"), second)
    assert control.ending is second
