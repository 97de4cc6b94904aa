"""The AI SDK's React hook as the second client of a chat whose host died: ``useChat({ resume: true })``
in a page in headless Chromium (tests/support/chat_page.py). Two uvicorn hosts share a real
redis-server behind one real nginx (round robin, the next host on a refused connection), so the page
has one origin and either host behind it, and the app stays as it is (tests/support/apps_chat.py, a
POST route and nothing else). The page sends a message; once it shows a few words, the host answering
is SIGKILLed; the page is loaded again with the same chat id and ``resume: true``, whose GET on mount
reaches the other host."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ..support.browser import chromium
from ..support.chat_page import ChatPage, answer
from ..support.redis import redis_server
from ..support.servers import Server, nginx, uvicorn

pytestmark = pytest.mark.timeout(180)
APP = "tests.support.apps_chat:app"
WHOLE = "".join(f"word{i} " for i in range(30))  # apps_chat's answer, a word every 0.1 s
LEASE = 1.0
# The page shows the assistant's message with at least five words.
A_FEW_WORDS = """() => {
    const mine = (window.__chat?.messages ?? []).find((m) => m.role === "assistant");
    return mine?.parts.some((p) => p.type === "text" && p.text.split(" ").length > 5) ?? false;
}"""


@contextlib.contextmanager
def behind_nginx(**settings: str) -> Iterator[tuple[str, dict[str, Server]]]:
    """nginx's URL and the two hosts behind it by address (``127.0.0.1:port``, as nginx names them)."""
    with redis_server() as store, contextlib.ExitStack() as stack:
        env = {
            "TEST_WRAP": "1",
            "SSE_MIDDLEWARE_RESUME": "1",
            "SSE_MIDDLEWARE_RESUME_STORE": store.url,
            "SSE_MIDDLEWARE_RESUME_LEASE": str(LEASE),
            **{f"SSE_MIDDLEWARE_{k.upper()}": v for k, v in settings.items()},
        }
        hosts = [stack.enter_context(uvicorn(APP, env)) for _ in range(2)]
        proxy = stack.enter_context(nginx([h.port for h in hosts], gzip=False))
        yield proxy, {f"127.0.0.1:{h.port}": h for h in hosts}


def upstream(response: dict[str, Any]) -> str:
    """The host that answered (nginx lists each it tried: a dead one first, then the next)."""
    return str(response["headers"]["x-upstream"]).split(",")[-1].strip()


def kill_and_resume(
    proxy: str, hosts: dict[str, Server], chat: str
) -> tuple[dict[str, Any], ChatPage, Server]:
    """Send, kill the host answering once the page shows a few words, load the page again with
    ``resume: true``; the hook's state once its resume ended, the page, and the host that lived."""
    with chromium() as browser:
        page = ChatPage(browser, proxy)
        page.open(id=chat)
        page.send("count")
        page.wait(A_FEW_WORDS)
        (post,) = [r for r in page.responses if r["method"] == "POST"]
        dead = hosts.pop(upstream(post))
        dead.proc.kill()  # SIGKILL: no shutdown, no end marker, the lease left to run out
        dead.proc.wait(10)
        page.open(id=chat, resume="1")  # a reload: useChat({ resume: true }) GETs the stream on mount
        state = page.wait()
    (alive,) = hosts.values()
    return state, page, alive


@pytest.mark.slow
def test_use_chat_resume_reads_the_whole_answer_once_from_the_host_that_took_it_over() -> None:
    """With ``recover="continue"`` the other host takes the stream over: the page shows the whole
    answer, each word once, and the hook ends ``ready``; the GET went to the host that lived, which ran
    the app once (the takeover). Control, the test below: ``recover`` off."""
    with behind_nginx(recover="continue") as (proxy, hosts):
        state, page, alive = kill_and_resume(proxy, hosts, "chat-page-killed")
        assert answer(state) == WHOLE and state["status"] == "ready" and not state["error"], state
        assert state["statuses"] == ["ready", "submitted", "streaming", "ready"], state
        (resume,) = [r for r in page.responses if r["method"] == "GET" and r["url"].endswith("/stream")]
        assert resume["status"] == 200 and upstream(resume) == f"127.0.0.1:{alive.port}"
        with httpx.Client(timeout=10) as client:
            assert [r["chat"] for r in client.get(alive.url + "/runs").json()] == ["chat-page-killed"]


@pytest.mark.slow
def test_control_without_takeover_use_chat_ends_with_an_error_not_a_short_answer() -> None:
    """``recover`` off: nothing to re-run the app with, so the other host sends what the log held and
    then the AI SDK's ``error`` part: the hook ends in ``error`` with part of the answer, never
    ``ready`` with a short one."""
    with behind_nginx() as (proxy, hosts):
        state, _, alive = kill_and_resume(proxy, hosts, "chat-page-lost")
        assert state["status"] == "error" and state["error"], state
        assert WHOLE.startswith(answer(state)) and len(answer(state)) < len(WHOLE), state
        with httpx.Client(timeout=10) as client:
            assert client.get(alive.url + "/runs").json() == []  # the app never ran there
