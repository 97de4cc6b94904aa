"""Crash-proof streams with real parts: two uvicorn hosts share a real redis-server, the host producing
an answer is SIGKILLed mid-answer (as an OOM kill or a lost node does it), and the client resumes on the
other host with ``Last-Event-ID``. The clients are a raw SSE reader (httpx), the official openai SDK and
the AI SDK's own resume (the ``ai`` package in Node). The app is ``tests/support/apps_resume.py``'s
OpenAI chat route, which records every run of it (and ``tests/support/apps_chat.py`` for the AI SDK).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import openai
import pytest
import redis
from openai.types.chat import ChatCompletionChunk

from sse_middleware._core.sse import Event, Parser

from ..support.apps_resume import words
from ..support.node import run_node
from ..support.redis import redis_server
from ..support.servers import Server, uvicorn

pytestmark = pytest.mark.timeout(300)
APP = "tests.support.apps_resume:app"
CHAT_APP = "tests.support.apps_chat:app"
CHAT_WHOLE, CHAT_EVERY = "".join(f"word{i} " for i in range(30)), 0.1  # apps_chat's answer
KEY = "sk-test"  # the SDK sends it as Authorization: the caller a resume is bound to
LEASE = 1.0
N, EVERY = 12, 0.15
MESSAGES = [{"role": "user", "content": "count"}]


def host_env(marks: Path, store: str, name: str, **settings: object) -> dict[str, str]:
    return {
        "TEST_MARKS": str(marks),
        "TEST_HOST": name,
        "SSE_MIDDLEWARE_RESUME": "true",
        "SSE_MIDDLEWARE_RESUME_STORE": store,
        "SSE_MIDDLEWARE_RESUME_LEASE": str(LEASE),
        **{f"SSE_MIDDLEWARE_{k.upper()}": str(v) for k, v in settings.items()},
    }


@contextlib.contextmanager
def two_hosts(marks: Path, **settings: object) -> Iterator[tuple[Server, Server]]:
    """Two uvicorn hosts sharing one real redis-server, resumable streams with a short lease."""
    with redis_server() as store, contextlib.ExitStack() as stack:
        a, b = (
            stack.enter_context(uvicorn(APP, host_env(marks, store.url, name, **settings))) for name in "ab"
        )
        yield a, b


@dataclass
class Got:
    text: str = ""
    ids: set[str] = field(default_factory=set)
    finishes: list[str] = field(default_factory=list)
    done: int = 0
    errors: list[str] = field(default_factory=list)
    last_id: str = ""

    def take(self, event: Event) -> None:
        if event.id:
            self.last_id = event.id
        if event.data == "[DONE]":
            self.done += 1
            return
        body = json.loads(event.data)
        if "error" in body:
            self.errors.append(body["error"]["message"])
            return
        self.ids.add(body["id"])
        choice = body["choices"][0]
        self.text += choice["delta"].get("content") or ""
        if choice["finish_reason"]:
            self.finishes.append(choice["finish_reason"])


def url(server: Server, run: str) -> str:
    return f"{server.url}/v1/chat/completions?n={N}&every={EVERY}&run={run}"


def read_raw(target: str, got: Got, *, last_id: str = "", stop_after: int | None = None) -> None:
    """A raw SSE reader: POST the request (with ``Last-Event-ID`` to resume), parse every event into
    ``got``, until the stream ends, the connection breaks (its host killed), or ``stop_after`` events."""
    headers = {"Authorization": f"Bearer {KEY}", **({"Last-Event-ID": last_id} if last_id else {})}
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    parser, seen = Parser(), 0
    with (
        contextlib.suppress(httpx.HTTPError),  # the host killed under it
        httpx.Client(timeout=30) as client,
        client.stream("POST", target, json=body, headers=headers) as response,
    ):
        assert response.status_code == 200
        for chunk in response.iter_bytes():
            for event in parser.feed(chunk):
                got.take(event)  # type: ignore[arg-type]
                seen += 1
                if stop_after is not None and seen >= stop_after:
                    return


def read_sdk(server: Server, run: str, last_id: str, got: Got) -> None:
    """The official openai SDK resuming: the same request again, with ``Last-Event-ID``."""
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0, timeout=30)
    try:
        stream = client.chat.completions.create(
            model="m",
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=True,
            extra_headers={"Last-Event-ID": last_id},
            extra_query={"n": N, "every": EVERY, "run": run},
        )
        for chunk in stream:
            assert isinstance(chunk, ChatCompletionChunk)
            got.ids.add(chunk.id)
            choice = chunk.choices[0]
            got.text += choice.delta.content or ""
            if choice.finish_reason:
                got.finishes.append(choice.finish_reason)
    except openai.APIError as exc:
        got.errors.append(str(exc))


def whole() -> str:
    return "".join(words(N))


@pytest.mark.slow
def test_a_resume_of_a_killed_hosts_stream_ends_with_the_formats_error(tmp_path: Path) -> None:
    """recover off: no takeover. The other host answers with what the log held, then the openai format's
    error, so the SDK raises APIError: never a short answer that reads as success."""
    with two_hosts(tmp_path) as (a, b):
        run = uuid.uuid4().hex
        got = Got()
        read_raw(url(a, run), got, stop_after=4)
        a.proc.kill()  # SIGKILL: no shutdown, no end marker, the lease left to run out
        a.proc.wait(10)
        assert got.text and not got.errors
        rest = Got()
        read_sdk(b, run, got.last_id, rest)
        assert rest.errors and "stopped before it ended" in rest.errors[0]
        assert not rest.finishes and whole().startswith(got.text + rest.text)
        # Control: the same resume of a producer that lives reads the whole answer, with no error.
        run = uuid.uuid4().hex
        got = Got()
        read_raw(url(b, run), got, stop_after=4)
        rest = Got()
        read_sdk(b, run, got.last_id, rest)
        assert not rest.errors and rest.finishes == ["stop"] and got.text + rest.text == whole()


TAKEOVER = {"recover": "continue", "coalesce": "false"}  # frames leave as the app sends them: see below
ROUNDS, STREAMS = 2, 10  # 20 trials: each round kills one host under 10 answers at random tokens


def app_runs(marks: Path, run: str) -> list[str]:
    """How the app ran for ``run``: ``first``, or ``<reason>:<characters of text>`` for a re-run."""
    return sorted(path.read_text() for path in marks.glob(f"{run}.*"))


def check_whole(before: Got, after: Got, raw: bool) -> None:
    """One trial's client: the whole answer, each character once, one id, one finish, no error; a raw
    reader also sees one end marker."""
    assert not before.errors and not after.errors, (before, after)
    assert before.text + after.text == whole(), (before, after)
    assert len(before.ids | after.ids) == 1 and before.finishes + after.finishes == ["stop"], (before, after)
    if raw:
        assert after.done == 1


def position(event_id: str) -> int:
    return int(event_id.rpartition(".")[2])


def log_last(url: str, event_id: str) -> int:
    """The last position the store holds of the stream ``event_id`` belongs to."""
    stream = event_id.rpartition(".")[0]
    client = redis.Redis.from_url(url)
    try:
        newest = client.xrevrange(f"sse_middleware:{{{stream}}}", count=1)
    finally:
        client.close()
    if not newest:
        return 0
    entry_id = newest[0][0]  # "<position>-0": the log's entry ids are its positions
    assert isinstance(entry_id, bytes), entry_id
    return int(entry_id.split(b"-")[0])


def first_part(delay: float, target: str, got: Got) -> None:
    time.sleep(delay)
    read_raw(target, got)


@pytest.mark.slow
def test_killed_at_random_tokens_every_answer_finishes_once_on_the_other_hosts(tmp_path: Path) -> None:
    """Host a is SIGKILLed under 10 answers, each at a random token; each is resumed at once on b (the
    openai SDK or a raw reader) and on c (a raw reader): the two race for the takeover, one wins, and
    both clients read the whole answer once. Twice (a restarted), so 20 trials. The control (recover
    off: the format's error, no takeover) is the test above.

    The kill lands between two tokens (coalescing off, so a token leaves when the app sends it): an event
    sent in the host's last milliseconds may reach its client before its log reaches the store (the log
    is written in batches, off the send path), and a client ahead of the log cannot be continued
    exactly: it gets the format's error (docs/resume.md)."""
    rng, ahead = random.Random(), 0
    with redis_server() as store, contextlib.ExitStack() as stack:
        b, c = (
            stack.enter_context(uvicorn(APP, host_env(tmp_path, store.url, name, **TAKEOVER)))
            for name in "bc"
        )
        for _ in range(ROUNDS):
            with (
                uvicorn(APP, host_env(tmp_path, store.url, "a", **TAKEOVER)) as a,
                ThreadPoolExecutor(STREAMS * 2) as pool,
            ):
                runs = [uuid.uuid4().hex for _ in range(STREAMS)]
                firsts = [Got() for _ in runs]
                # Each answer starts a whole number of token intervals after the others, so the kill
                # lands at a different token of each, and between two tokens of all of them: see the
                # docstring for the events a host sends in its last milliseconds.
                starts = [rng.randrange(N // 2) * EVERY for _ in runs]
                began = time.monotonic()
                reading = [
                    pool.submit(first_part, starts[i], url(a, runs[i]), firsts[i]) for i in range(STREAMS)
                ]
                kill_at = began + (N * 3 // 4 + 0.75) * EVERY
                while not all(got.last_id for got in firsts) and time.monotonic() < began + 20:
                    time.sleep(0.01)  # a loaded machine may be slow to start them: each has begun
                while kill_at < time.monotonic():
                    kill_at += EVERY  # still between two tokens
                time.sleep(kill_at - time.monotonic())
                a.proc.kill()  # SIGKILL: every answer on a cut at once, each at another token
                a.proc.wait(10)
                for future in reading:
                    future.result()
                logged = [log_last(store.url, got.last_id) for got in firsts]
                on_b, on_c = [Got() for _ in runs], [Got() for _ in runs]
                resuming = []
                for i, run in enumerate(runs):
                    if i % 2:
                        resuming.append(
                            pool.submit(read_raw, url(b, run), on_b[i], last_id=firsts[i].last_id)
                        )
                    else:
                        resuming.append(pool.submit(read_sdk, b, run, firsts[i].last_id, on_b[i]))
                    resuming.append(pool.submit(read_raw, url(c, run), on_c[i], last_id=firsts[i].last_id))
                for future in resuming:
                    future.result()
            for i, run in enumerate(runs):
                assert firsts[i].last_id and not firsts[i].done, "cut before its end"
                if position(firsts[i].last_id) > logged[i]:  # it had events the store never got
                    for rest in (on_b[i], on_c[i]):
                        assert rest.errors and not rest.text, rest  # never a short success
                    ahead += 1
                    continue
                check_whole(firsts[i], on_b[i], raw=bool(i % 2))
                check_whole(firsts[i], on_c[i], raw=True)
                runs_of = app_runs(tmp_path, run)
                assert runs_of == sorted(["first", f"takeover:{len(firsts[i].text)}"]), runs_of  # one re-run
    print(f"{ROUNDS * STREAMS} trials, {ahead} with the client ahead of the log (the format's error)")
    assert ahead <= ROUNDS * STREAMS // 2  # the kill between tokens: most trials test the takeover


@pytest.mark.slow
def test_a_killed_worker_of_uvicorn_workers_2_has_its_answer_taken_over(tmp_path: Path) -> None:
    """``uvicorn --workers 2``: the worker producing an answer is SIGKILLed (an OOM kill takes one worker,
    not the server); the resume, on the same port, lands on any worker and reads the whole answer once."""
    with redis_server() as store:
        env = host_env(tmp_path, store.url, "", **TAKEOVER)
        del env["TEST_HOST"]  # each worker records its pid: the one to kill
        with uvicorn(APP, env, "--workers", "2") as server:
            run = uuid.uuid4().hex
            got = Got()
            read_raw(url(server, run), got, stop_after=5)
            (record,) = tmp_path.glob(f"{run}.*")
            worker = int(record.name.split(".")[1])
            time.sleep(EVERY / 2)  # between two tokens: the 5th event is in the store (see above)
            os.kill(worker, signal.SIGKILL)
            rest = Got()
            read_sdk(server, run, got.last_id, rest)
            check_whole(got, rest, raw=False)
            assert app_runs(tmp_path, run) == sorted(["first", f"takeover:{len(got.text)}"])


@pytest.mark.slow
def test_the_ai_sdks_resume_of_a_chat_whose_host_died_reads_the_whole_answer_once(tmp_path: Path) -> None:
    """The real ``ai`` package (tests/e2e/node/resume_chat.mjs): ``DefaultChatTransport`` sends a message
    to host a, reads a few words and aborts (a page reload); a is SIGKILLed; ``reconnectToStream`` (what
    ``useChat({ resume: true })`` calls on mount) against host b gets the whole answer once, from its
    first part, the app re-run once on b as a takeover."""
    with redis_server() as store:
        env = {
            "TEST_WRAP": "1",
            "SSE_MIDDLEWARE_RESUME": "1",
            "SSE_MIDDLEWARE_RESUME_STORE": store.url,
            "SSE_MIDDLEWARE_RESUME_LEASE": str(LEASE),
            "SSE_MIDDLEWARE_RECOVER": "continue",
        }
        with uvicorn(CHAT_APP, env) as a, uvicorn(CHAT_APP, env) as b:
            sent = run_node("resume_chat.mjs", a.url, a.url, "chat-killed", "send")
            assert sent["error"] is None and sent["before"], sent
            time.sleep(CHAT_EVERY / 2)  # between two words (see the 20 trials)
            a.proc.kill()
            a.proc.wait(10)
            got = run_node("resume_chat.mjs", a.url, b.url, "chat-killed", "reconnect")
            assert got["error"] is None and got["resumed"] == CHAT_WHOLE and got["starts"] == 1, got
            with httpx.Client(timeout=10) as client:
                assert [r["chat"] for r in client.get(b.url + "/runs").json()] == ["chat-killed"]
