"""Crash-proof streams with real parts: two uvicorn hosts share a real redis-server, the host producing
an answer is SIGKILLed mid-answer (as an OOM kill or a lost node does it), and the client resumes on the
other host with ``Last-Event-ID``. The clients are a raw SSE reader (httpx) and the official openai SDK.
The app is ``tests/support/apps_resume.py``'s OpenAI chat route, which records every run of it.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionChunk

from sse_middleware._core.sse import Event, Parser

from ..support.apps_resume import words
from ..support.redis import redis_server
from ..support.servers import Server, uvicorn

pytestmark = pytest.mark.timeout(300)
APP = "tests.support.apps_resume:app"
KEY = "sk-test"  # the SDK sends it as Authorization: the caller a resume is bound to
LEASE = 1.0
N, EVERY = 12, 0.08
MESSAGES = [{"role": "user", "content": "count"}]


@contextlib.contextmanager
def two_hosts(marks: Path, **settings: object) -> Iterator[tuple[Server, Server]]:
    """Two uvicorn hosts sharing one real redis-server, resumable streams with a short lease."""
    with redis_server() as redis, contextlib.ExitStack() as stack:
        env = {
            "TEST_MARKS": str(marks),
            "SSE_MIDDLEWARE_RESUME": "true",
            "SSE_MIDDLEWARE_RESUME_STORE": redis.url,
            "SSE_MIDDLEWARE_RESUME_LEASE": str(LEASE),
            **{f"SSE_MIDDLEWARE_{k.upper()}": str(v) for k, v in settings.items()},
        }
        a, b = (stack.enter_context(uvicorn(APP, {**env, "TEST_HOST": name})) for name in "ab")
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
    ``got``; with ``stop_after``, return after that many events, the connection still open."""
    headers = {"Authorization": f"Bearer {KEY}", **({"Last-Event-ID": last_id} if last_id else {})}
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    parser, seen = Parser(), 0
    client = httpx.Client(timeout=30)
    response = client.send(client.build_request("POST", target, json=body, headers=headers), stream=True)
    assert response.status_code == 200
    for chunk in response.iter_bytes():
        for event in parser.feed(chunk):
            got.take(event)  # type: ignore[arg-type]
            seen += 1
            if stop_after is not None and seen >= stop_after:
                return  # left open: the host dies under it
    response.close()
    client.close()


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
