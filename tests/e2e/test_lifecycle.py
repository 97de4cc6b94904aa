"""The stream lifecycle through a real uvicorn process: heartbeats, client disconnects, stall timeout, HEAD,
and graceful shutdown on SIGTERM/SIGINT. Each behaviour is shown against the same app served without the
middleware (``TEST_WRAP=0``), which must fail it."""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager as ContextManager
from pathlib import Path

import httpx
import pytest

from sse_middleware._core.sse import Comment, Event, Parser

from ..support.clients import read_stream
from ..support.servers import Server, uvicorn

pytestmark = pytest.mark.timeout(120)
APP = "tests.support.apps_lifecycle:app"


@pytest.fixture(scope="module")
def marks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("marks")


def serve(marks: Path, *extra: str, wrap: bool = True, **settings: object) -> ContextManager[Server]:
    env = {"TEST_MARKS": str(marks), "TEST_WRAP": "1" if wrap else "0"}
    env.update({f"SSE_MIDDLEWARE_{name.upper()}": str(value) for name, value in settings.items()})
    return uvicorn(APP, env, *extra)


@pytest.fixture(scope="module")
def wrapped(marks: Path) -> Iterator[Server]:
    with serve(marks, shutdown_grace=1) as server:
        yield server


@pytest.fixture(scope="module")
def bare(marks: Path) -> Iterator[Server]:
    with serve(marks, wrap=False) as server:
        try:
            yield server
        finally:  # its abandoned generators would hold a graceful stop forever: that is the point
            server.proc.kill()
            server.proc.wait(10)


def until(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def clean_log(server: Server) -> bool:
    out = server.output()
    return "Traceback" not in out and "ERROR" not in out


class Reader(threading.Thread):
    """Reads an SSE stream in a thread; with ``leave_after`` it hangs up after that many events."""

    def __init__(self, url: str, *, leave_after: int | None = None, timeout: float = 15.0) -> None:
        super().__init__(daemon=True)
        self.url, self.leave_after, self.timeout = url, leave_after, timeout
        self.items: list[Event | Comment] = []
        self.error: Exception | None = None
        self.worker = ""  # the pid that served it, when the app says (apps_lifecycle's /forever does)
        self.started_streaming = threading.Event()
        self.start()

    @property
    def events(self) -> list[Event]:
        return [item for item in self.items if isinstance(item, Event)]

    def run(self) -> None:
        parser = Parser(comments=True)
        try:
            with httpx.Client(timeout=self.timeout) as client, client.stream("GET", self.url) as response:
                self.worker = response.headers.get("x-worker", "")
                for chunk in response.iter_bytes():
                    self.items += parser.feed(chunk)
                    if self.events:
                        self.started_streaming.set()
                    if self.leave_after is not None and len(self.events) >= self.leave_after:
                        return  # closes the connection: the client is gone
        except httpx.HTTPError as exc:
            self.error = exc
        finally:
            self.started_streaming.set()

    def shutdown_event(self) -> dict[str, object] | None:
        """The server_shutdown error this stream ended with, if it did (with its retry hint)."""
        last = self.events[-1] if self.events else None
        if last is None or last.event != "error" or last.retry != 1000:
            return None
        error: dict[str, object] = json.loads(last.data)["error"]
        return error if error["type"] == "server_shutdown" else None


def tasks(server: Server) -> int:
    return int(httpx.get(server.url + "/tasks").json()["tasks"])


# -- heartbeats ----------------------------------------------------------------------------------------


def test_heartbeats_keep_a_silent_stream_alive_and_never_split_an_event(
    wrapped: Server, bare: Server
) -> None:
    path = "/silence?hb=0.2&gap=0.6"  # 0.2 s heartbeats for this request; half an event in the middle
    ours, control = Reader(wrapped.url + path), Reader(bare.url + path)
    ours.join(10)
    control.join(10)
    assert ours.events == control.events == [Event("before"), Event("hello"), Event("after")]
    comments = [i for i, item in enumerate(ours.items) if isinstance(item, Comment)]
    assert len(comments) >= 4 and ours.items.index(Event("hello")) > comments[2]  # pings during the half
    assert not [item for item in control.items if isinstance(item, Comment)]  # control: no middleware
    default = read_stream(wrapped.url + "/silence?gap=0.2")  # 15 s default: a short silence gets none
    assert default.comments == [] and len(default.events) == 3


# -- client disconnects --------------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["/raw", "/forever"])
def test_disconnect_stops_the_generator(wrapped: Server, bare: Server, marks: Path, endpoint: str) -> None:
    name = f"dc-{uuid.uuid4().hex}"
    Reader(wrapped.url + f"{endpoint}?mark={name}", leave_after=5).join(10)
    assert until((marks / name).exists, 3.0)  # its finally ran, promptly
    if endpoint == "/raw":  # control: alone, an app that never calls receive() runs on forever
        Reader(bare.url + f"/raw?mark=bare-{name}", leave_after=5).join(10)
        assert not until((marks / f"bare-{name}").exists, 1.5)
    assert clean_log(wrapped)


def test_many_disconnects_leave_no_tasks_behind(wrapped: Server, bare: Server) -> None:
    before = tasks(wrapped)
    paths = ["/raw?delay=0.01", "/forever?delay=0.01"] * 10
    readers = [Reader(wrapped.url + path, leave_after=3) for path in paths]
    for reader in readers:
        reader.join(10)
    assert until(lambda: tasks(wrapped) <= before, 5.0), (before, tasks(wrapped))
    assert clean_log(wrapped)
    control_before = tasks(bare)  # control: without us every abandoned raw stream stays
    for reader in [Reader(bare.url + "/raw?delay=0.01", leave_after=3) for _ in range(8)]:
        reader.join(10)
    time.sleep(0.5)
    assert tasks(bare) >= control_before + 8


# -- stall timeout ---------------------------------------------------------------------------------------


def test_stall_timeout_ends_a_silent_upstream(wrapped: Server, bare: Server, marks: Path) -> None:
    name = f"stall-{uuid.uuid4().hex}"
    seen = read_stream(wrapped.url + f"/hang?stall=0.5&mark={name}", timeout=10)
    assert seen.error is None and seen.total < 4.0
    assert seen.events[0].data == "first" and seen.events[-1].event == "error"
    assert json.loads(seen.events[-1].data)["error"]["type"] == "timeout"
    assert until((marks / name).exists, 2.0)
    control = read_stream(bare.url + "/hang?stall=0.5", timeout=1.5)  # control: the silence holds it
    assert isinstance(control.error, httpx.ReadTimeout) and [e.data for e in control.events] == ["first"]


# -- HEAD ------------------------------------------------------------------------------------------------


def test_head_gets_the_stream_headers_and_runs_as_without_us(wrapped: Server, bare: Server) -> None:
    """HEAD on an endless stream: the headers GET would have, and then the app runs exactly as it would
    without us (issue 12: HEAD is the app's own business). uvicorn sends no body for HEAD, and this app
    never ends, so in both cases the keep-alive connection stays busy; the only difference is our
    anti-buffering header."""
    for server, ours in ((wrapped, True), (bare, False)):  # control: the same app without us
        with httpx.Client(timeout=1.5) as client:
            response = client.head(server.url + "/forever")
            assert response.status_code == 200 and ("x-accel-buffering" in response.headers) is ours
            with pytest.raises(httpx.ReadTimeout):  # the connection is still the endless response's
                client.get(server.url + "/tasks")


# -- graceful shutdown -----------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_ends_open_streams_with_a_reconnect_event(marks: Path, sig: int) -> None:
    names = [f"sig-{uuid.uuid4().hex}" for _ in range(3)]
    with serve(marks, shutdown_grace=1) as server:
        readers = [
            Reader(server.url + f"{path}?mark={name}")
            for path, name in zip(("/forever", "/forever", "/raw"), names, strict=True)
        ]
        assert all(r.started_streaming.wait(10) for r in readers)
        server.proc.send_signal(sig)
        server.proc.wait(15)  # the grace (1 s) plus uvicorn's own steps; without us, never (below)
        for reader in readers:
            reader.join(5)
    for reader in readers:
        assert reader.error is None and reader.shutdown_event() is not None  # a clean end, then the hint
    assert all((marks / name).exists() for name in names)
    assert clean_log(server)


def test_without_the_middleware_open_streams_hold_the_shutdown(marks: Path) -> None:
    """The control for the test above."""
    with serve(marks, wrap=False) as server:
        reader = Reader(server.url + "/forever")
        assert reader.started_streaming.wait(10)
        server.proc.send_signal(signal.SIGTERM)
        with pytest.raises(Exception, match="timed out"):
            server.proc.wait(3)
        count = len(reader.events)
        time.sleep(0.3)
        assert len(reader.events) > count and reader.shutdown_event() is None  # still streaming
        server.proc.kill()


@pytest.mark.parametrize("wrap", [True, False], ids=["ours", "control"])
def test_uvicorn_graceful_timeout_cancellation_still_sends_the_reconnect_event(
    marks: Path, wrap: bool
) -> None:
    """uvicorn cancels the request after --timeout-graceful-shutdown (our grace is longer here), then
    re-raises SIGTERM a couple of loop turns later, which ends the process."""
    with serve(marks, "--timeout-graceful-shutdown", "1", wrap=wrap, shutdown_grace=30) as server:
        readers = [Reader(server.url + path) for path in ("/forever", "/raw")]
        assert all(r.started_streaming.wait(10) for r in readers)
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(10)
        for reader in readers:
            reader.join(5)
    for reader in readers:
        if wrap:
            assert reader.error is None and reader.shutdown_event() is not None
        else:  # control: cut mid-stream, the client sees a broken response and no reason
            assert isinstance(reader.error, httpx.RemoteProtocolError) and reader.shutdown_event() is None


def test_workers_each_drain_their_streams(marks: Path) -> None:
    """With --workers, uvicorn's parent passes SIGTERM to each worker, whose own handlers we chain."""
    with serve(marks, "--workers", "2", shutdown_grace=1) as server:
        readers: list[Reader] = []
        while len({r.worker for r in readers}) < 2 and len(readers) < 24:  # the kernel picks the worker
            readers.append(Reader(server.url + "/forever"))
            assert readers[-1].started_streaming.wait(15)
        assert len({r.worker for r in readers}) == 2, "both workers hold open streams"
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(15)
        for reader in readers:
            reader.join(5)
    assert all(r.error is None and r.shutdown_event() is not None for r in readers)
