"""Resumable streams with real parts: a real redis-server shared by two uvicorn hosts behind a real nginx
(round robin), headless Chromium's own ``EventSource`` across a SIGTERM, the memory store in one process,
another caller's resume, and Redis killed mid-stream. The app (``tests/support/apps_resume.py``) records
every run, so a test sees how often it ran and where. Each test has its control: the same client with
``resume`` off for its request (``&resume=0``), or the same resume with the right caller or a live Redis.
"""

from __future__ import annotations

import contextlib
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from sse_middleware._core.sse import Event, Parser

from ..support.apps_resume import END, expected
from ..support.browser import chromium
from ..support.redis import RedisServer, redis_server
from ..support.servers import Server, nginx, upstream_log, uvicorn

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.timeout(180)
APP = "tests.support.apps_resume:app"
GRACE = 10  # shutdown_grace: the app of a stopped host produces for a resume elsewhere this long
ALICE = {"Authorization": "Bearer alice"}


@dataclass
class Read:
    status: int = 0
    headers: httpx.Headers = field(default_factory=httpx.Headers)
    events: list[Event] = field(default_factory=list)

    @property
    def data(self) -> list[str]:
        return [e.data for e in self.events if e.data != END]

    @property
    def ended(self) -> bool:
        return bool(self.events) and self.events[-1].data == END


def read(url: str, headers: dict[str, str], leave_after: int | None = None) -> Read:
    """Read a stream to its end, or leave (close the connection) after ``leave_after`` events."""
    out, parser = Read(), Parser()
    with httpx.Client(timeout=30) as client, client.stream("GET", url, headers=headers) as response:
        out.status, out.headers = response.status_code, response.headers
        for chunk in response.iter_bytes():
            for event in parser.feed(chunk):
                out.events.append(event)  # type: ignore[arg-type]
                if leave_after is not None and len(out.events) >= leave_after:
                    return out
    return out


def drop_and_reconnect(url: str, leave_after: int, again: dict[str, str] | None = None) -> tuple[Read, Read]:
    """What ``EventSource`` does after a dropped connection: reconnect, with ``Last-Event-ID`` when the
    events had ids. ``again``: the reconnect's credentials, when not the first request's."""
    first = read(url, ALICE, leave_after)
    assert first.data == expected(leave_after), "the first connection got the start"
    last = first.events[-1].id
    headers = dict(ALICE if again is None else again)
    if last:
        headers["Last-Event-ID"] = last
    return first, read(url, headers)


def runs(marks: Path, run: str, *, finished: bool = True, timeout: float = 30) -> list[str]:
    """The hosts the app ran on for ``run``, one per run, once every run has finished (or at once)."""
    deadline = time.monotonic() + timeout
    while True:
        records = sorted(marks.glob(f"{run}.*"))
        done = all("finished" in r.read_text() for r in records)
        if not finished or done or time.monotonic() > deadline:
            return [r.name.split(".")[1] for r in records]
        time.sleep(0.1)


def host(name: str, marks: Path, store: str, **settings: object) -> contextlib.AbstractContextManager[Server]:
    env = {
        "TEST_HOST": name,
        "TEST_MARKS": str(marks),
        "SSE_MIDDLEWARE_RESUME": "true",
        "SSE_MIDDLEWARE_RESUME_STORE": store,
        "SSE_MIDDLEWARE_SHUTDOWN_GRACE": str(GRACE),
    }
    env.update({f"SSE_MIDDLEWARE_{k.upper()}": str(v) for k, v in settings.items()})
    return uvicorn(APP, env, "--timeout-graceful-shutdown", str(GRACE + 10))


@dataclass
class Cluster:
    hosts: dict[str, Server]
    url: str  # nginx in front of them

    def named(self, address: str) -> str:
        return next(name for name, s in self.hosts.items() if address == f"127.0.0.1:{s.port}")


@contextlib.contextmanager
def cluster(marks: Path, store: str) -> Iterator[Cluster]:
    """Two uvicorn hosts sharing ``store``, behind a real nginx round robin."""
    with contextlib.ExitStack() as stack:
        a, b = (stack.enter_context(host(name, marks, store)) for name in "ab")
        yield Cluster({"a": a, "b": b}, stack.enter_context(nginx([a.port, b.port], gzip=False)))


@pytest.fixture(scope="module")
def marks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


@pytest.fixture(scope="module")
def two_hosts(marks: Path, redis: RedisServer) -> Iterator[Cluster]:
    with cluster(marks, redis.url) as c:
        yield c


def answer_url(base: str, run: str, n: int, every: float = 0.05, *, resume: bool = True) -> str:
    return f"{base}/answer?run={run}&n={n}&every={every}" + ("" if resume else "&resume=0")


# -- 1. two hosts, one Redis, nginx round robin ---------------------------------------------------------


def test_a_dropped_client_resumes_on_the_other_host_and_the_app_runs_once(
    two_hosts: Cluster, marks: Path
) -> None:
    run = uuid.uuid4().hex
    first, again = drop_and_reconnect(answer_url(two_hosts.url, run, 40), 10)
    assert again.status == 200 and again.ended
    assert again.data == expected(40)[10:], "events 11… exactly once, in order"
    assert again.headers["x-upstream"] != first.headers["x-upstream"], "the resume landed on the other host"
    first_host = two_hosts.named(first.headers["x-upstream"])
    assert runs(marks, run) == [first_host], "the app ran once, on the first host, to its end"


def test_control_resume_off_the_reconnect_starts_the_app_again(two_hosts: Cluster, marks: Path) -> None:
    run = uuid.uuid4().hex
    first, again = drop_and_reconnect(answer_url(two_hosts.url, run, 40, resume=False), 10)
    assert first.events[-1].id is None, "no ids: nothing to resume from"
    assert again.data == expected(40), "the reconnect got the answer from its start again"
    assert sorted(runs(marks, run)) == ["a", "b"], "and the app ran twice"


# -- 4. another caller ------------------------------------------------------------------------------------


def test_a_resume_with_another_authorization_is_a_new_request(two_hosts: Cluster, marks: Path) -> None:
    run = uuid.uuid4().hex
    url = answer_url(two_hosts.url, run, 30)
    first, mallory = drop_and_reconnect(url, 8, again={"Authorization": "Bearer mallory"})
    assert mallory.data == expected(30), "refused: the app answered it from the start"
    assert len(runs(marks, run)) == 2
    # Control: the same Last-Event-ID with the first request's Authorization is resumed.
    alice = read(url, {**ALICE, "Last-Event-ID": str(first.events[-1].id)})
    assert alice.data == expected(30)[8:] and len(runs(marks, run)) == 2


# -- 2. Chromium's EventSource across a SIGTERM of the host serving it -------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as b:
        yield b


@pytest.mark.parametrize("resume", [True, False], ids=["resume", "control-resume-off"])
def test_eventsource_reads_the_whole_text_once_across_a_sigterm(
    browser: Browser, marks: Path, redis: RedisServer, resume: bool
) -> None:
    """The host serving the page's stream gets SIGTERM with most of the answer to go. Resumable, it sends
    its client away at once (``retry:`` and a clean end) while its app goes on producing into Redis; the
    browser reconnects with ``Last-Event-ID`` through nginx and lands on the other host (the stopped one
    no longer accepts), which replays and follows the log. Control, resume off: with the same
    ``shutdown_grace`` the stopped host keeps its client until the answer ends. Its text is whole too:
    text differs only for an answer that outlasts ``shutdown_grace``, and then both lose its tail."""
    run, n = uuid.uuid4().hex, 80
    with cluster(marks, redis.url) as c:
        page = browser.new_page()
        page.goto(answer_url(c.url, run, n, resume=resume).replace("/answer", "/page"))
        page.wait_for_function("window.got.length >= 15", timeout=30_000)
        [serving] = runs(marks, run, finished=False)
        stopped = c.hosts[serving]
        stopped.proc.send_signal(signal.SIGTERM)
        page.wait_for_function("window.ended", timeout=60_000)
        got, opens = page.evaluate("window.got"), page.evaluate("window.opens")
        page.close()
        stopped.proc.wait(GRACE + 20)
        served = [c.named(addr.split(", ")[-1]) for uri, addr, _ in upstream_log(c.url) if "/answer" in uri]
    assert got == expected(n), "the whole text, each event once, in order"
    assert runs(marks, run) == [serving], "the app ran once, to its end, on the host that got the SIGTERM"
    # uvicorn re-raises the signal once its graceful shutdown is done: it stopped by itself, nothing cut.
    assert stopped.proc.returncode == -signal.SIGTERM and "Finished server process" in stopped.output()
    assert "timeout graceful shutdown exceeded" not in stopped.output()
    other = "b" if serving == "a" else "a"
    if resume:  # it moved at once (with most of the answer still to come) to the other host, which resumed it
        assert len(opens) == 2 and opens[1] < n - 20 and served == [serving, other], (opens, served)
    else:  # control: the client stays on the stopped host for the rest of the answer (see docs/resume.md)
        assert opens == [0] and served == [serving]


# -- 3. the memory store, one process -----------------------------------------------------------------------


@pytest.mark.parametrize("resume", [True, False], ids=["resume", "control-resume-off"])
def test_memory_store_one_process_drop_and_resume(marks: Path, resume: bool) -> None:
    run = uuid.uuid4().hex
    with host("solo", marks, "memory://") as solo:
        _, again = drop_and_reconnect(answer_url(solo.url, run, 30, resume=resume), 10)
        if resume:
            assert again.data == expected(30)[10:] and runs(marks, run) == ["solo"]
        else:  # control
            assert again.data == expected(30) and runs(marks, run) == ["solo", "solo"]


# -- 5. Redis killed mid-stream ----------------------------------------------------------------------------


@pytest.mark.parametrize("kill", [True, False], ids=["killed", "control-redis-up"])
def test_redis_killed_mid_stream_the_live_stream_completes_and_a_resume_goes_to_the_app(
    marks: Path, kill: bool
) -> None:
    run = uuid.uuid4().hex
    with redis_server() as store, host("a", marks, store.url) as a:
        url = answer_url(a.url, run, 40)
        out, parser = Read(), Parser()
        with httpx.Client(timeout=30) as client, client.stream("GET", url, headers=ALICE) as response:
            for chunk in response.iter_bytes():
                out.events += parser.feed(chunk)  # type: ignore[arg-type]
                if kill and len(out.events) >= 10 and store.proc.poll() is None:
                    store.kill()
        assert out.data == expected(40) and out.ended, "the live stream went on to its end, every event once"
        tenth = out.events[9].id
        assert tenth is not None
        again = read(url, {**ALICE, "Last-Event-ID": tenth})
        assert again.status == 200
        if kill:  # the log is lost: the resume is unknown and goes to the app, which answers from the start
            assert again.data == expected(40) and runs(marks, run) == ["a", "a"]
        else:  # control: with the store up, the same resume is answered from the log
            assert again.data == expected(40)[10:] and runs(marks, run) == ["a"]
