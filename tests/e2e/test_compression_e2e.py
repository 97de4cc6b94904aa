"""Compressed streams (``compress="auto"``) through real parts: uvicorn serving the test apps with the
middleware (``SSE_MIDDLEWARE_COMPRESS=auto``) and without it (the control, the bare app), read by the
official OpenAI and Anthropic SDKs (httpx decodes gzip), curl ``--compressed``, the AI SDK's chat
transport in Node (undici's fetch), ``EventSource`` and the AI SDK's ``useChat`` in Chromium, and behind
a real nginx with ``gzip on``. Each client reads the same answer as from the bare app; the bytes were
compressed; and a frame is readable the moment it is written, not when the next one is."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from sse_middleware._core.sse import Event, Parser

from ..support.browser import chromium
from ..support.chat_page import ChatPage, answer
from ..support.clients import read_stream
from ..support.harness import text_of_events
from ..support.node import run_node
from ..support.servers import Server, nginx, require, uvicorn

if TYPE_CHECKING:
    from playwright.sync_api import Response

APP = "tests.support.apps:app"
MESSAGES = [{"role": "user", "content": "hi"}]
SILENT = "/sse?n=2&delay=2.5"  # tick 0, 2.5 s of silence, tick 1


@pytest.fixture(scope="module")
def gz() -> Iterator[Server]:
    env = {"SSE_MIDDLEWARE_COMPRESS": "auto", "SSE_MIDDLEWARE_HEARTBEAT_INTERVAL": "0"}
    with uvicorn(APP, env) as server:
        yield server


@pytest.fixture(scope="module")
def bare() -> Iterator[Server]:
    with uvicorn(APP, {"TEST_WRAP": "0"}) as server:
        yield server


class Encodings:
    """An httpx response hook: the Content-Encoding of every response the SDK got."""

    def __init__(self) -> None:
        self.seen: list[str | None] = []

    def __call__(self, response: Any) -> None:
        self.seen.append(response.headers.get("content-encoding"))

    def client(self, module: Any = httpx) -> Any:
        return module.Client(event_hooks={"response": [self]})


def openai_text(server: Server, encodings: Encodings) -> str:
    client = openai.OpenAI(
        base_url=server.url + "/v1", api_key="test", max_retries=0, http_client=encodings.client()
    )
    stream: Any = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
    return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


def anthropic_text(server: Server, encodings: Encodings) -> str:
    client = anthropic.Anthropic(
        base_url=server.url, api_key="test", max_retries=0, http_client=encodings.client(httpx2)
    )
    with client.messages.stream(model="m", max_tokens=10, messages=MESSAGES) as stream:  # type: ignore[arg-type]
        return "".join(stream.text_stream)


@pytest.mark.parametrize("read", [openai_text, anthropic_text], ids=["openai", "anthropic"])
def test_the_official_sdks_read_the_same_answer(gz: Server, bare: Server, read: object) -> None:
    ours, theirs = Encodings(), Encodings()
    text = read(gz, ours)  # type: ignore[operator]
    assert text and text == read(bare, theirs)  # type: ignore[operator]
    assert ours.seen == ["gzip"] and theirs.seen == [None]


def test_curl_compressed_reads_the_same_answer(gz: Server, bare: Server) -> None:
    curl = require(shutil.which("curl"), "curl")

    def get(url: str, *flags: str) -> bytes:
        return subprocess.run([curl, "-sSN", *flags, url], capture_output=True, check=True, timeout=30).stdout

    def text(body: bytes) -> str:
        return text_of_events([e for e in Parser().feed(body) if isinstance(e, Event)], "openai")

    answer = get(bare.url + "/openai?n=30")
    assert answer.endswith(b"data: [DONE]\n\n") and text(answer)
    got = get(gz.url + "/openai?n=30", "--compressed")
    assert text(got) == text(answer) and got.endswith(b"data: [DONE]\n\n")
    raw = get(gz.url + "/openai?n=30", "-H", "Accept-Encoding: gzip")  # what went over the wire
    assert text(zlib.decompress(raw, 16 + zlib.MAX_WBITS)) == text(answer) and len(raw) < len(answer) / 2
    plain = get(gz.url + "/openai?n=30")  # no Accept-Encoding: not compressed
    assert text(plain) == text(answer)


def test_a_frame_decodes_before_the_next_is_written(gz: Server) -> None:
    """tick 0, then 2.5 s of silence: the bytes that arrived during the silence decode to tick 0."""
    seen = read_stream(gz.url + SILENT, headers={"accept-encoding": "gzip"})
    assert seen.headers["content-encoding"] == "gzip"
    assert [e.data for e in seen.events] == ["tick 0", "tick 1"]
    assert seen.first() < seen.total - 1.5  # tick 0 long before the end


def test_the_check_command_reports_the_encoding_and_whole_frames(gz: Server) -> None:
    """``python -m sse_middleware check URL``: gzip, every read decoded to whole events, healthy.
    Killed by the compressor flushing by size rather than per frame (split_reads > 0, a warning)."""
    done = subprocess.run(
        [sys.executable, "-m", "sse_middleware", "check", gz.url + "/sse?n=4&delay=0.2", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    result = json.loads(done.stdout)
    assert result["encoding"] == "gzip" and result["split_reads"] == 0 and result["events"] == 4
    assert done.returncode == 0 and not result["warnings"] and not result["problems"]


@pytest.mark.slow
def test_behind_nginx_with_gzip_one_encoding_and_no_wait(gz: Server, bare: Server) -> None:
    """nginx ``gzip on; gzip_types text/event-stream``: the stream is compressed once (by us: nginx
    leaves a response with a Content-Encoding alone) and tick 0 arrives during the silence. Control: the
    bare app behind the same nginx, whose gzip holds everything to the end."""
    with nginx(gz.port, gzip=True) as proxy:
        headers = {"accept-encoding": "gzip"}
        with httpx.Client(timeout=30) as c, c.stream("GET", proxy + SILENT, headers=headers) as response:
            raw = b"".join(response.iter_raw())
            encoding = response.headers.get_list("content-encoding")
        assert encoding == ["gzip"] and zlib.decompress(raw, 16 + zlib.MAX_WBITS).startswith(b"id: 0\n")
        seen = read_stream(proxy + SILENT, headers={"accept-encoding": "gzip"})
        assert seen.first() < seen.total - 1.5
    with nginx(bare.port, gzip=True) as proxy:
        control = read_stream(proxy + SILENT, headers={"accept-encoding": "gzip"})
    assert control.headers["content-encoding"] == "gzip"
    assert control.first() > control.total - 0.5  # held to the end


# -- JavaScript clients ----------------------------------------------------------------------------------

FORMATS = "tests.support.apps_formats:app"
ENCODING = "content-encoding"
CHAT = "/ai-sdk/api/chat?n=40&delay=0.003"


@pytest.fixture(scope="module")
def gz_formats() -> Iterator[Server]:
    with uvicorn(FORMATS, {"SSE_MIDDLEWARE_COMPRESS": "auto"}) as server:
        yield server


@pytest.fixture(scope="module")
def bare_formats() -> Iterator[Server]:
    with uvicorn(FORMATS, {"TEST_WRAP": "0"}) as server:
        yield server


@pytest.mark.slow
def test_the_ai_sdk_in_node_reads_the_same_message(gz_formats: Server, bare_formats: Server) -> None:
    """DefaultChatTransport (what useChat uses) over Node's fetch, which asks for gzip and decodes it."""
    mine = run_node("read_ui_stream.mjs", gz_formats.url + CHAT)
    theirs = run_node("read_ui_stream.mjs", bare_formats.url + CHAT)
    assert mine["error"] is None and mine["parts"] == theirs["parts"] and mine["parts"]
    assert run_node("fetch_encoding.mjs", gz_formats.url + CHAT)["encoding"] == "gzip"
    assert run_node("fetch_encoding.mjs", bare_formats.url + CHAT)["encoding"] is None


@pytest.mark.slow
def test_eventsource_in_chromium_reads_the_stream(gz: Server, bare: Server) -> None:
    def read(server: Server) -> tuple[list[str], str | None]:
        with chromium() as browser:
            page = browser.new_page()
            seen: dict[str, str | None] = {}

            def record(response: Response) -> None:
                seen.setdefault(response.url.split("?")[0], response.headers.get(ENCODING))

            page.on("response", record)
            page.goto(server.url + "/json")  # any page of the same origin
            data = page.evaluate(EVENTSOURCE)
        return data, seen[server.url + "/sse"]

    assert read(gz) == (["tick 0", "tick 1", "tick 2"], "gzip")
    assert read(bare) == (["tick 0", "tick 1", "tick 2"], None)


EVENTSOURCE = """() => new Promise((resolve, reject) => {
    const seen = [];
    const source = new EventSource("/sse?n=3&delay=0.2");
    source.onmessage = (e) => {
        seen.push(e.data);
        if (seen.length === 3) { source.close(); resolve(seen); }
    };
    setTimeout(() => reject(new Error("no 3 events in 15 s: " + JSON.stringify(seen))), 15000);
})"""


@pytest.mark.slow
def test_use_chat_in_chromium_reads_the_same_message(gz_formats: Server, bare_formats: Server) -> None:
    """The AI SDK's React hook in a page (tests/support/chat_page.py) sends one message; the assistant
    message's parts are the bare app's, and the hook's POST came gzip-compressed (bare: not at all).
    Killed by the compressor's last frame left unflushed (no finish part: the hook's status is not
    ``ready``, or the message short), or by a Content-Encoding that is not the body's (Chromium fails the
    fetch)."""

    def chat(server: Server) -> tuple[dict[str, Any], list[str | None]]:
        page = ChatPage(browser, server.url)
        page.open(id="chat-gz", api=CHAT)
        page.send("hi")
        state = page.wait()
        posts = [r for r in page.responses if r["method"] == "POST"]
        return state, [r["headers"].get(ENCODING) for r in posts]

    with chromium() as browser:
        mine, encodings = chat(gz_formats)
        theirs, bare_encodings = chat(bare_formats)
    assert mine["status"] == theirs["status"] == "ready" and not mine["error"], mine
    assert [m["role"] for m in mine["messages"]] == ["user", "assistant"]
    assert mine["messages"][1]["parts"] == theirs["messages"][1]["parts"] and answer(mine)
    assert encodings == ["gzip"] and bare_encodings == [None]
