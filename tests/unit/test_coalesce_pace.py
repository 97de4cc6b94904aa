"""The coalescer holds text only while the stream's own pace lets a window merge: slower than that,
each delta goes out as it comes and no deadline is armed; faster again, it merges again. Driven on a
fake clock as the middleware's timer drives it (ticks at each deadline before the next arrival)."""

from __future__ import annotations

from sse_middleware._core.coalesce import DIRECT_FRACTION, Coalescer
from tests.unit.test_coalesce import deadline

D = 0.0625  # max_delay: a binary fraction, so deadlines are exact floats
SLOW = 0.75 * D  # 40 ms apart against a 50 ms window is 25 tok/s at the default max_delay
FAST = D / 8


def _drive(
    c: Coalescer[str, int], arrivals: list[float], first: int = 0
) -> list[tuple[list[tuple[int, str]], float | None]]:
    """For each arrival: what its feed returned and the deadline left after it (ticks run in between)."""
    out = []
    for i, now in enumerate(arrivals):
        due = deadline(c)
        while due is not None and due <= now:
            c.tick(due)
            due = deadline(c)
        out.append((c.feed("k", first + i, f"t{first + i} ", now), deadline(c)))
    return out


def test_a_slow_steady_stream_sends_each_token_at_once_and_arms_no_deadline() -> None:
    assert SLOW > DIRECT_FRACTION * D  # the pace this test means: slower than a window merges
    c: Coalescer[str, int] = Coalescer(D, 4096)
    arrivals = [i * SLOW for i in range(60)]
    got = _drive(c, arrivals)
    settled = got[12:]  # a few gaps move the EWMA across the line
    for i, (pieces, due) in enumerate(settled, start=12):
        assert pieces == [(i, f"t{i} ")], i  # its own text, its own envelope, at its arrival
        assert due is None, i  # nothing held: no timer for the watcher to arm


def test_the_same_stream_is_merged_while_it_comes_fast() -> None:
    """Control for the pace rule's direction: at FAST the window merges as before."""
    c: Coalescer[str, int] = Coalescer(D, 4096)
    got = _drive(c, [i * FAST for i in range(60)])
    assert sum(1 for pieces, _ in got if not pieces) > 40  # most tokens wait to be merged
    assert any(due is not None for _, due in got[12:])


def test_a_rising_rate_goes_back_to_merging() -> None:
    c: Coalescer[str, int] = Coalescer(D, 4096)
    slow = [i * SLOW for i in range(40)]
    assert all(due is None for _, due in _drive(c, slow)[12:])
    start = slow[-1] + SLOW
    fast = [start + i * FAST for i in range(80)]
    got = _drive(c, fast, first=40)
    held = [i for i, (pieces, due) in enumerate(got) if not pieces and due is not None]
    assert held and held[0] < 20  # within a few gaps of the new rate the buffer holds again
    assert sum(len(pieces) for pieces, _ in got[20:]) < 20  # and merges: far fewer frames than tokens


def test_every_character_still_goes_out_within_max_delay_as_the_pace_changes() -> None:
    c: Coalescer[str, int] = Coalescer(D, 4096)
    gaps = [SLOW] * 30 + [FAST] * 60 + [SLOW] * 30 + [FAST / 2] * 60
    arrivals, now = [], 1.0
    for gap in gaps:
        now += gap
        arrivals.append(now)
    sent_at: dict[int, float] = {}
    for i, now in enumerate(arrivals):
        due = deadline(c)
        while due is not None and due <= now:
            for envelope, _ in c.tick(due):
                sent_at.setdefault(envelope, due)
            due = deadline(c)
        for envelope, _ in c.feed("k", i, "x", now):
            sent_at.setdefault(envelope, now)
    for envelope, _ in c.flush():  # the end of the stream: what is held is younger than max_delay
        assert arrivals[-1] - arrivals[envelope] < D
    # a piece carries the envelope of its first character: each envelope went out by its deadline
    for envelope, at in sent_at.items():
        assert at - arrivals[envelope] <= D, envelope


def test_a_short_slow_stream_is_sent_as_it_comes_from_its_first_gap() -> None:
    """A stream has no history: its first gap is the estimate, so a short slow answer is not held."""
    c: Coalescer[str, int] = Coalescer(D, 4096)
    got = _drive(c, [i * SLOW for i in range(6)])
    assert [pieces for pieces, _ in got] == [[(i, f"t{i} ")] for i in range(6)]
    assert all(due is None for _, due in got)
