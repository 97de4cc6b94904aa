"""Crash-proof streams under gunicorn with uvicorn workers (the ``uvicorn-worker`` package, the
maintained home of ``uvicorn.workers.UvicornWorker``): the worker producing an answer is SIGKILLed (an
OOM kill takes one worker, not the server: gunicorn's arbiter starts another), and the client's resume
with ``Last-Event-ID``, the official openai SDK on the same port, lands on any worker. The workers share
a real redis-server. The app and the readers are tests/e2e/test_takeover.py's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..support.redis import redis_server
from ..support.servers import Server, free_port, launch
from .test_takeover import (
    APP,
    EVERY,
    TAKEOVER,
    Got,
    app_runs,
    check_whole,
    host_env,
    read_raw,
    read_sdk,
    url,
    whole,
)

pytestmark = pytest.mark.timeout(120)


@contextlib.contextmanager
def gunicorn(tmp: Path, **settings: object) -> Iterator[Server]:
    """``gunicorn -k uvicorn_worker.UvicornWorker -w 2`` serving the app, resumable streams in a real
    redis-server with a short lease; each worker records its pid with each run (the one to kill)."""
    with redis_server() as store:
        env = host_env(tmp, store.url, "", **settings)
        del env["TEST_HOST"]
        port = free_port()
        cmd = [sys.executable, "-m", "gunicorn", APP, "-k", "uvicorn_worker.UvicornWorker", "-w", "2",
               "-b", f"127.0.0.1:{port}", "--graceful-timeout", "2"]  # fmt: skip
        with launch("gunicorn", cmd, port, env, timeout=30) as server:
            yield server


def cut(server: Server, tmp: Path) -> tuple[str, Got]:
    """Read the first five events of an answer, then SIGKILL the worker producing it."""
    run, got = uuid.uuid4().hex, Got()
    read_raw(url(server, run), got, stop_after=5)
    (record,) = tmp.glob(f"{run}.*")
    time.sleep(EVERY / 2)  # between two tokens: the 5th event is in the store (test_takeover.py)
    os.kill(int(record.name.split(".")[1]), signal.SIGKILL)
    return run, got


@pytest.mark.slow
def test_a_killed_gunicorn_worker_has_its_answer_taken_over(tmp_path: Path) -> None:
    with gunicorn(tmp_path, **TAKEOVER) as server:
        run, got = cut(server, tmp_path)
        rest = Got()
        read_sdk(server, run, got.last_id, rest)
        check_whole(got, rest, raw=False)
        assert app_runs(tmp_path, run) == sorted(["first", f"takeover:{len(got.text)}"])


@pytest.mark.slow
def test_without_takeover_a_killed_gunicorn_workers_answer_ends_with_the_formats_error(
    tmp_path: Path,
) -> None:
    """The control: recover off, nothing takes the stream over; the SDK raises APIError after what the
    log held, never a clean short answer."""
    with gunicorn(tmp_path, coalesce="false") as server:
        run, got = cut(server, tmp_path)
        rest = Got()
        read_sdk(server, run, got.last_id, rest)
        assert rest.errors and "stopped before it ended" in rest.errors[0], rest
        assert not rest.finishes and whole().startswith(got.text + rest.text)
        assert app_runs(tmp_path, run) == ["first"]
