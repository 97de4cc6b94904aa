"""Resumable streams on a real three-node Redis Cluster shared by two uvicorn hosts
(``resume_store="redis+cluster://…"``): a stream started on host A, cut, and resumed on host B; then the
node that holds the stream's slot killed mid-stream. The app (``tests/support/apps_resume.py``) records
every run, so a test sees how often it ran and where. Controls: ``resume`` off for the request (the
reconnect starts the app again), and the same resume with every node up.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sse_middleware._core.resume import parse_id
from sse_middleware._core.sse import Parser

from ..support.apps_resume import expected
from ..support.redis_cluster import RedisClusterServer, redis_cluster
from ..support.servers import Server
from .test_resume_e2e import ALICE, Read, answer_url, host, marks, read, runs

__all__ = ["marks"]  # the fixture, shared with test_resume_e2e.py
pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@contextlib.contextmanager
def two_hosts(marks: Path, cluster: RedisClusterServer) -> Iterator[tuple[Server, Server]]:
    with host("a", marks, cluster.seeds_url) as a, host("b", marks, cluster.seeds_url) as b:
        yield a, b


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisClusterServer]:
    with redis_cluster() as made:
        yield made


@pytest.fixture(scope="module")
def hosts(marks: Path, cluster: RedisClusterServer) -> Iterator[tuple[Server, Server]]:
    with two_hosts(marks, cluster) as made:
        yield made


@pytest.mark.parametrize("resume", [True, False], ids=["resume", "control-resume-off"])
def test_cut_on_host_a_resumed_on_host_b(hosts: tuple[Server, Server], marks: Path, resume: bool) -> None:
    a, b = hosts
    run = uuid.uuid4().hex
    first = read(answer_url(a.url, run, 40, resume=resume), ALICE, leave_after=10)
    assert first.data == expected(10)
    last = first.events[-1].id
    headers = dict(ALICE)
    if last:  # what EventSource does: Last-Event-ID when the events had ids
        headers["Last-Event-ID"] = last
    again = read(answer_url(b.url, run, 40, resume=resume), headers)
    assert again.status == 200 and again.ended
    if resume:
        assert again.data == expected(40)[10:], "events 11… exactly once, in order, from the cluster"
        assert runs(marks, run) == ["a"], "the app ran once, on host A, to its end"
    else:  # control: no ids, so host B's app answers from the start
        assert last is None and again.data == expected(40)
        assert sorted(runs(marks, run)) == ["a", "b"]


@pytest.mark.parametrize("kill", [True, False], ids=["killed", "control-all-nodes-up"])
def test_the_node_holding_the_stream_killed_mid_stream(marks: Path, kill: bool) -> None:
    """Killed: the live stream on host A goes on to its end, every event once (the log is lost, so it
    is not resumable); a resume on host B goes to the app, which answers from the start. Control: with
    the node up, the same resume on host B is answered from the log and the app ran once."""
    run = uuid.uuid4().hex
    with redis_cluster() as cluster, two_hosts(marks, cluster) as (a, b):
        url = answer_url(a.url, run, 40)
        out, parser, killed = Read(), Parser(), None
        with httpx.Client(timeout=30) as client, client.stream("GET", url, headers=ALICE) as response:
            for chunk in response.iter_bytes():
                out.events += parser.feed(chunk)  # type: ignore[arg-type]
                if kill and killed is None and len(out.events) >= 10:
                    position = parse_id(out.events[0].id)
                    assert position is not None
                    killed = cluster.slot_owner(f"sse_middleware:{{{position.stream}}}")
                    killed.kill()
        assert response.status_code == 200
        assert out.data == expected(40) and out.ended, "the live stream went on to its end, every event once"
        tenth = out.events[9].id
        assert tenth is not None
        again = read(answer_url(b.url, run, 40), {**ALICE, "Last-Event-ID": tenth})
        assert again.status == 200 and again.ended
        if kill:
            assert killed is not None and killed.proc.returncode is not None
            assert again.data == expected(40) and sorted(runs(marks, run)) == ["a", "b"]
        else:  # control
            assert again.data == expected(40)[10:] and runs(marks, run) == ["a"]
