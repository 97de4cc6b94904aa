"""A reconnect storm after a host dies: ``python bench/takeover_storm.py [--clients 200] [--n 40]``.

Two uvicorn hosts share a real redis-server (``resume_lease`` 1 s, ``recover="continue"``). ``--clients``
answers (OpenAI chat chunks, ``--n`` words, one every ``--every`` s) start on host A, each read by an
asyncio client; A is SIGKILLed mid-answer; then every client resumes at once on host B with its
``Last-Event-ID``. The app continues from ``recovery().text`` (``on_rerun=continue``), as an app that asks
its provider to continue does, so the figures are the middleware's and the store's, not a restart's.

Per client: the time from its resume request to its first resumed event with data (replayed from the
log, or the takeover's first), and to its end; whether it read the whole answer once, or ended with the
format's error (a client that had events the log lost: the host's last milliseconds). Printed as a
table (p50, p95, max) with the counts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sse_middleware._core.sse import Parser
from tests.support.apps_resume import words
from tests.support.redis import redis_server
from tests.support.servers import raise_fd_limit, uvicorn

APP = "tests.support.apps_resume:app"
AUTH = {"Authorization": "Bearer sk-storm"}


@dataclass
class Client:
    text: str = ""
    last_id: str = ""
    errors: int = 0
    finishes: int = 0
    first_s: float | None = None  # resume: to the first event with data
    end_s: float = 0.0
    texts: list[str] = field(default_factory=list)


def take(client: Client, data: str) -> None:
    if data == "[DONE]":
        return
    body = json.loads(data)
    if "error" in body:
        client.errors += 1
        return
    choice = body["choices"][0]
    client.text += choice["delta"].get("content") or ""
    client.finishes += bool(choice["finish_reason"])


async def read(
    http: httpx.AsyncClient, url: str, client: Client, last_id: str = "", delay: float = 0.0
) -> None:
    await asyncio.sleep(delay)
    headers = {**AUTH, **({"Last-Event-ID": last_id} if last_id else {})}
    body = {"model": "m", "messages": [{"role": "user", "content": "count"}], "stream": True}
    began, parser = time.monotonic(), Parser()
    try:
        async with http.stream("POST", url, json=body, headers=headers) as response:
            async for chunk in response.aiter_bytes():
                for event in parser.feed(chunk):
                    if event.id:  # type: ignore[union-attr]
                        client.last_id = event.id  # type: ignore[union-attr]
                    data = event.data  # type: ignore[union-attr]
                    if data is not None:
                        if client.first_s is None and last_id:
                            client.first_s = time.monotonic() - began
                        take(client, data)
    except httpx.HTTPError:
        pass  # the host killed under it
    client.end_s = time.monotonic() - began


def pct(values: list[float], q: float) -> float | None:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None


async def storm(clients: int, n: int, every: float) -> dict[str, object]:
    raise_fd_limit(4 * clients + 256)
    marks = Path(tempfile.mkdtemp(prefix="storm-"))
    limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=0)
    with redis_server() as store:
        env = {
            "TEST_MARKS": str(marks),
            "SSE_MIDDLEWARE_RESUME": "true",
            "SSE_MIDDLEWARE_RESUME_STORE": store.url,
            "SSE_MIDDLEWARE_RESUME_LEASE": "1",
            "SSE_MIDDLEWARE_RECOVER": "continue",
            # The app continues the text itself: told so, recovery compares nothing (the words all begin
            # alike, so a comparison could not tell a continuation from a restart).
            "SSE_MIDDLEWARE_RECOVER_BODY": "prefill",
        }
        with uvicorn(APP, {**env, "TEST_HOST": "a"}) as a, uvicorn(APP, {**env, "TEST_HOST": "b"}) as b:
            runs = [uuid.uuid4().hex for _ in range(clients)]
            path = f"/v1/chat/completions?n={n}&every={every}&on_rerun=continue&run="
            firsts = [Client() for _ in runs]
            async with httpx.AsyncClient(timeout=120, limits=limits) as http:
                # Starts spread over one token interval: the kill lands at every phase of a token.
                reading = [
                    asyncio.create_task(read(http, a.url + path + run, c, delay=random.uniform(0, every)))
                    for run, c in zip(runs, firsts, strict=True)
                ]
                began = time.monotonic()
                while not all(c.last_id for c in firsts) and time.monotonic() < began + 60:
                    await asyncio.sleep(0.01)
                await asyncio.sleep(every * 4)  # a few tokens more for each
                a.proc.kill()
                a.proc.wait(10)
                killed = time.monotonic()
                await asyncio.gather(*reading)
                rests = [Client() for _ in runs]
                resumed = time.monotonic()
                await asyncio.gather(
                    *(
                        read(http, b.url + path + run, r, f.last_id)
                        for run, f, r in zip(runs, firsts, rests, strict=True)
                    )
                )
            whole = "".join(words(n))
            cut = [i for i, f in enumerate(firsts) if not f.finishes]
            ok = [i for i in cut if firsts[i].text + rests[i].text == whole and not rests[i].errors]
            erred = [i for i in cut if rests[i].errors]
            takeovers = sum(1 for mark in marks.iterdir() if mark.read_text().startswith("takeover"))
            first = [rests[i].first_s or 0.0 for i in ok]
            ends = [rests[i].end_s for i in ok]
            return {
                "clients": clients,
                "cut_by_the_kill": len(cut),
                "whole_once": len(ok),
                "error_ending": len(erred),
                "other": len(cut) - len(ok) - len(erred),
                "takeovers": takeovers,
                "resume_after_kill_s": round(resumed - killed, 3),
                "first_event_s": {
                    k: None if v is None else round(v, 3)
                    for k, v in (
                        ("p50", pct(first, 0.5)),
                        ("p95", pct(first, 0.95)),
                        ("max", pct(first, 1.0)),
                    )
                },
                "end_s": {
                    k: None if v is None else round(v, 3)
                    for k, v in (
                        ("p50", pct(ends, 0.5)),
                        ("p95", pct(ends, 0.95)),
                        ("max", pct(ends, 1.0)),
                    )
                },
            }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--every", type=float, default=0.05)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(storm(args.clients, args.n, args.every)), indent=1))


if __name__ == "__main__":
    main()
