"""Followers: ten readers with the ``Last-Event-ID`` of a live resumable stream (a second tab, a
reconnect that arrives before the old connection is noticed as gone) each get the rest, live, while the
first reader is still connected, and the app runs once. Over ``memory://`` on one uvicorn host, and over
a real redis-server shared by two hosts (the followers alternate between the producer's host and the
other). The app (``tests/support/apps_resume.py``) records every run. Control: resume off for the
requests (``&resume=0``): no ids, so each follower's request runs the app again.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
import pytest

from sse_middleware._core.sse import Event, Parser

from ..support.apps_resume import END, expected
from ..support.redis import RedisServer, redis_server
from ..support.servers import Server
from .test_resume_e2e import ALICE, answer_url, host, marks, runs

__all__ = ["marks"]  # the fixture, shared with test_resume_e2e.py
pytestmark = pytest.mark.timeout(120)
FOLLOWERS = 10
EVENTS, EVERY, JOIN_AT = 60, 0.05, 10  # a 3 s answer; the followers join after its 10th event


@dataclass
class Reader:
    events: list[Event] = field(default_factory=list)
    live_at_first: bool | None = None  # at its first event: the first reader still reading, the app running

    @property
    def data(self) -> list[str]:
        return [e.data for e in self.events if e.data != END]


@dataclass
class Outcome:
    first: Reader
    followers: list[Reader]


def app_finished(marks: Path, run: str) -> bool:
    return any("finished" in record.read_text() for record in marks.glob(f"{run}.*"))


async def leader_and_followers(marks: Path, run: str, leader: str, followers: list[str]) -> Outcome:
    """Read ``leader`` to its end; after its JOIN_AT-th event, start each follower (with the last id as
    ``Last-Event-ID`` when the events have ids, as ``EventSource`` would), all at once."""
    first, joined = Reader(), anyio.Event()
    readers = [Reader() for _ in followers]
    last_id: list[str | None] = [None]

    async def read(client: httpx.AsyncClient, url: str, headers: dict[str, str], out: Reader) -> None:
        parser = Parser()
        async with client.stream("GET", url, headers=headers) as response:
            assert response.status_code == 200
            async for chunk in response.aiter_bytes():
                for event in parser.feed(chunk):
                    out.events.append(event)  # type: ignore[arg-type]
                    if out is first and len(out.events) == JOIN_AT:
                        last_id[0] = out.events[-1].id
                        joined.set()
                    if out is not first and out.live_at_first is None:
                        first_reading = bool(first.events) and first.events[-1].data != END
                        out.live_at_first = first_reading and not app_finished(marks, run)

    async def follow(client: httpx.AsyncClient, url: str, out: Reader) -> None:
        await joined.wait()
        headers = dict(ALICE)
        if last_id[0]:
            headers["Last-Event-ID"] = last_id[0]
        await read(client, url, headers, out)

    limits = httpx.Limits(max_connections=FOLLOWERS + 5)
    with anyio.fail_after(60):
        async with httpx.AsyncClient(timeout=30, limits=limits) as client, anyio.create_task_group() as tg:
            tg.start_soon(read, client, leader, dict(ALICE), first)
            for url, out in zip(followers, readers, strict=True):
                tg.start_soon(follow, client, url, out)
    return Outcome(first, readers)


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


@contextlib.contextmanager
def hosts(marks: Path, store_url: str, names: list[str]) -> Iterator[dict[str, Server]]:
    """Hosts sharing ``store_url``, by the name each one's app records."""
    with contextlib.ExitStack() as stack:
        yield {name: stack.enter_context(host(name, marks, store_url)) for name in names}


@pytest.mark.parametrize("resume", [True, False], ids=["resume", "control-resume-off"])
@pytest.mark.parametrize("store", ["memory", pytest.param("redis", marks=pytest.mark.slow)])
def test_ten_followers_of_a_live_stream_get_the_rest_live_and_the_app_runs_once(
    marks: Path, request: pytest.FixtureRequest, store: str, resume: bool
) -> None:
    if store == "memory":  # one process: its memory is the store
        store_url, names = "memory://", ["solo"]
    else:  # two hosts, one redis-server: the followers alternate between them
        store_url, names = request.getfixturevalue("redis").url, ["a", "b"]
    run = uuid.uuid4().hex
    with hosts(marks, store_url, names) as named:
        leader = answer_url(named[names[0]].url, run, EVENTS, EVERY, resume=resume)
        followers = [
            answer_url(named[names[i % len(names)]].url, run, EVENTS, EVERY, resume=resume)
            for i in range(FOLLOWERS)
        ]
        outcome = anyio.run(leader_and_followers, marks, run, leader, followers)
        ran = runs(marks, run)
    assert outcome.first.data == expected(EVENTS), "the first reader got the whole answer"
    if resume:
        for follower in outcome.followers:
            assert follower.data == expected(EVENTS)[JOIN_AT:], "the rest, each event once, in order"
            assert follower.events[-1].data == END
            assert follower.live_at_first, "its first event came while the first reader read and the app ran"
        assert ran == [names[0]], "the app ran once, on the first reader's host"
    else:  # control: no ids, so every follower's request is a new answer from the start
        assert all(f.data == expected(EVENTS) for f in outcome.followers)
        assert len(ran) == 1 + FOLLOWERS
