"""Load: 1,000 concurrent streams through one uvicorn process, each read by a real HTTP client (httpx),
every one complete and in order; afterwards no stream, task or responder is left and memory is back at
its steady-state baseline. The control (an app that leaks per stream) shows the memory check can fail.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from sse_middleware._core.sse import Event, Parser

from ..support.apps_reliability import text_of
from ..support.clients import read_stream
from ..support.servers import Server, raise_fd_limit, serve, settle

pytestmark = pytest.mark.timeout(240)
N = 1000
TOKENS = 12


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    raise_fd_limit(4 * N + 512)  # inherited by the server process
    with serve("uvicorn-httptools") as srv:
        yield srv


async def _read(client: httpx.AsyncClient, url: str) -> list[Event]:
    parser, events = Parser(), []
    async with client.stream("GET", url) as response:
        assert response.status_code == 200
        async for chunk in response.aiter_raw():
            events += [e for e in parser.feed(chunk) if isinstance(e, Event)]
    return events


def check(sid: int, kind: str, events: list[Event]) -> None:
    """Complete and in order: every token of this stream, none of another's, nothing twice."""
    want = "".join(text_of(sid, k) for k in range(TOKENS))
    if kind == "sse":  # generic SSE: the very same events
        assert [e.data for e in events] == [text_of(sid, k) for k in range(TOKENS)], sid
        return
    assert events[-1].data == "[DONE]", sid
    text = "".join(json.loads(e.data)["choices"][0]["delta"]["content"] for e in events[:-1])
    assert text == want, sid  # merged or not, the same text


async def wave(url: str, n: int, *, gate: bool) -> tuple[list[list[Event]], dict[str, Any]]:
    """``n`` streams at once; with ``gate`` they all hold after their first token until every one is
    open, so the server really carries ``n`` at the same time. Returns the events and the stats then."""
    limits = httpx.Limits(max_connections=n + 8, max_keepalive_connections=8)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        kinds = ["openai" if i % 2 else "sse" for i in range(n)]
        tasks = [
            asyncio.create_task(_read(client, f"{url}/stream?id={i}&n={TOKENS}&kind={kind}&gate={int(gate)}"))
            for i, kind in enumerate(kinds)
        ]
        peak: dict[str, Any] = {}
        if gate:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                peak = (await client.get(url + "/stats?fast=1")).json()
                if peak["started"] - peak["finalized"] >= n or all(t.done() for t in tasks):
                    break
                await asyncio.sleep(0.2)
            await client.post(url + "/gate?open=1")
        results = await asyncio.gather(*tasks)
        if gate:
            await client.post(url + "/gate")
    for i, (kind, events) in enumerate(zip(kinds, results, strict=True)):
        check(i, kind, events)
    return results, peak


@pytest.mark.slow
def test_thousand_concurrent_streams_complete_in_order_and_memory_returns(server: Server) -> None:
    asyncio.run(wave(server.url, 50, gate=False))  # warm-up: imports, caches, first arenas
    base = settle(server)
    _, peak = asyncio.run(wave(server.url, N, gate=True))
    assert peak["started"] - peak["finalized"] >= N  # all 1,000 were open at the same time
    first = settle(server)
    _, _ = asyncio.run(wave(server.url, N, gate=True))
    second = settle(server)
    per_stream_kib = (peak["VmRSS"] - base["VmRSS"]) / N
    print(
        f"\nRSS KiB: base {base['VmRSS']}, 1,000 open {peak['VmRSS']} ({per_stream_kib:.1f} KiB/stream), "
        f"after {first['VmRSS']}, after a second wave {second['VmRSS']}; tasks {base['tasks']} -> "
        f"{peak['tasks']} -> {second['tasks']}; "
        f"blocks {base['blocks']} -> {first['blocks']} -> {second['blocks']}"
    )
    for after in (first, second):
        assert after["finalized"] == after["started"]  # every generator finalized
        assert after["tasks"] == base["tasks"]  # no task left behind
        assert after["responders"] == base["responders"]  # no responder kept alive (just /stats' own)
    assert_no_growth(base, first, second)


def assert_no_growth(base: dict[str, Any], first: dict[str, Any], second: dict[str, Any]) -> None:
    """Memory back at baseline: Python allocations return to the warm baseline (up to caches), and a second
    wave of the same load grows the RSS no further (RSS itself is high-water: freed arenas stay mapped)."""
    assert second["blocks"] - base["blocks"] < 20_000, (
        base["blocks"],
        second["blocks"],
    )  # < ~1 MiB of objects
    assert second["VmRSS"] - first["VmRSS"] < 8 * 1024, (first["VmRSS"], second["VmRSS"])


def test_control_a_leak_of_a_quarter_mebibyte_per_stream_is_caught() -> None:
    """The control: the same checks on an app that leaks 256 KiB per stream must fail."""
    with serve("uvicorn-httptools", env={"TEST_LEAK": "1"}) as leaky:
        asyncio.run(wave(leaky.url, 20, gate=False))
        base = settle(leaky)
        asyncio.run(wave(leaky.url, 60, gate=False))
        first = settle(leaky)
        asyncio.run(wave(leaky.url, 60, gate=False))
        second = settle(leaky)
    with pytest.raises(AssertionError):
        assert_no_growth(base, first, second)


# -- bad output from the app on a real server, next to good streams ----------------------------------------

BAD = ["str_body", "second_start", "endless", "invalid_utf8", "after_final"]


def test_bad_streams_never_disturb_good_ones_on_a_real_server() -> None:
    """Every bad case of tests/unit/test_bad_output.py twice at once, while good streams run on the same
    uvicorn: the good ones arrive whole, every bad one (both rounds) ends as defined, the server keeps
    serving, and every stream is finalized."""
    with serve("uvicorn-httptools") as server, ThreadPoolExecutor(16) as pool:
        good = [
            pool.submit(read_stream, f"{server.url}/stream?id={i}&n=10&delay=0.03&kind=sse") for i in range(6)
        ]
        bad = [(case, pool.submit(read_stream, f"{server.url}/bad?case={case}")) for case in BAD * 2]
        for i, future in enumerate(good):
            assert [e.data for e in future.result().events] == [f"<{i}:{k}>" for k in range(10)]
        results = [(case, future.result()) for case, future in bad]
        end = settle(server)
        log = server.output()
    assert end["started"] == end["finalized"]
    for case, seen in results:
        if case == "invalid_utf8":
            assert seen.body == b"data: ok\n\ndata: \xff\xfe\n\n" and seen.error is None, case
        elif case == "endless":
            assert seen.error is not None and len(seen.body) > 40 * 65536, case  # cut, not clean
        elif case == "after_final":
            assert seen.error is None and [e.data for e in seen.events] == ["ok"], case  # late one dropped
        else:  # str_body, second_start: the error event, a clean end
            assert seen.error is None and seen.events[-1].event == "error", case
    # Nothing reached the server as a crash but the late messages of "after_final", which go to the server
    # as they would without us, and which uvicorn refuses with its own error (once per such request).
    refused = "Unexpected ASGI message 'http.response.body' sent, after response already completed"
    assert log.count("Exception in ASGI application") == log.count(refused) == 2
