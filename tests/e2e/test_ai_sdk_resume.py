"""The Vercel AI SDK's own resume with the real ``ai`` package in Node (tests/e2e/node/resume_chat.mjs)
against real uvicorn hosts running a FastAPI app that has a POST route and nothing else
(tests/support/apps_chat.py): the client sends a message, reads a few words, aborts (a page reload), then
``DefaultChatTransport.reconnectToStream({ chatId })`` (what ``useChat({ resume: true })`` calls on
mount). With ``resume`` on, the resumed stream holds the whole answer exactly once, the app ran once;
``204`` (null) for an unknown chat and for a finished one; a ``DELETE`` of the chat's stream stops it (the
app is cancelled). The control, without ``resume``: the GET reaches the app, whose 404 the SDK throws on.
In one process (memory) and across two hosts sharing a redis-server (the POST on one, the resume on the
other)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ..support.node import run_node
from ..support.redis import redis_server
from ..support.servers import Server, uvicorn

pytestmark = pytest.mark.timeout(120)
APP = "tests.support.apps_chat:app"
WHOLE = "".join(f"word{i} " for i in range(30))


def node(post: Server, resume: Server, chat: str, mode: str) -> dict[str, Any]:
    return run_node("resume_chat.mjs", post.url, resume.url, chat, mode)


def runs(server: Server, chat: str, *, settled: bool = True) -> list[str | None]:
    deadline = time.monotonic() + 15
    while True:
        with httpx.Client(timeout=10) as client:
            found = [r["ended"] for r in client.get(server.url + "/runs").json() if r["chat"] == chat]
        if not settled or (found and all(found)) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


@contextlib.contextmanager
def hosts(store: str | None, count: int = 1, *, resume: bool = True) -> Iterator[list[Server]]:
    env = {"TEST_WRAP": "1", "SSE_MIDDLEWARE_RESUME": "1" if resume else "0"}
    if store:
        env["SSE_MIDDLEWARE_RESUME_STORE"] = store
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(uvicorn(APP, env)) for _ in range(count)]


@pytest.fixture(scope="module", params=["memory", "redis"])
def pair(request: pytest.FixtureRequest) -> Iterator[tuple[Server, Server]]:
    """(the host that gets the POST, the host that gets the resume): one process with memory://, two
    hosts sharing a redis-server."""
    if request.param == "memory":
        with hosts(None) as (one,):
            yield one, one
    else:
        with redis_server() as redis, hosts(redis.url, 2) as (a, b):
            yield a, b


def test_a_reload_mid_answer_resumes_the_whole_answer_once(pair: tuple[Server, Server]) -> None:
    post, resume = pair
    got = node(post, resume, "chat-reload", "resume")
    assert got["error"] is None and got["before"] and WHOLE.startswith(got["before"])
    assert got["resumed"] == WHOLE and got["starts"] == 1  # from its first part, exactly once
    assert runs(post, "chat-reload") == ["finished"]  # the app ran once, to its end
    # Finished: 204 (the SDK's own flow has the message already); an unknown chat: 204 as well.
    for chat in ("chat-reload", "no-such-chat"):
        again = node(post, resume, chat, "reconnect")
        assert again["error"] is None and again["resumed"] is None, again


def test_a_delete_stops_the_chat_stream(pair: tuple[Server, Server]) -> None:
    post, resume = pair
    got = node(post, resume, "chat-stop", "stop")
    assert got["error"] is None and got["resumed"] is None  # stopped: nothing to resume
    assert runs(post, "chat-stop") == ["cancelled"]  # the app was cancelled, its cleanup ran


def test_control_without_resume_the_reconnect_reaches_the_app() -> None:
    with hosts(None, resume=False) as (one,):
        got = node(one, one, "chat-off", "resume")
        assert got["error"] is not None and "Not Found" in got["error"]["message"]  # the app's 404
        assert runs(one, "chat-off") == ["cancelled"]  # the reload ended the answer: nothing to resume
