"""The resume store is opened with the middleware, not inside the first stream's store deadline.

Each case runs in a fresh interpreter, where redis-py is not imported yet (as on a host that just
started). A redis store's first use imports it; done inside a stream's ``STORE_SECONDS`` on a loaded
host, that import made the store count as down, so the first stream on each host (and those of the rest
after it) ran without resume: the AI SDK's resume then found no chat (a CI run saw it). Mutation: open
the store lazily again (``Resumption._store = None`` at construction) -> the slow-import case has no ids.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ..support.redis import redis_server

ROOT = Path(__file__).resolve().parents[2]
SLOW = 1.5  # seconds the import of redis-py takes here: over the stream start's STORE_SECONDS (1.0)

_SCRIPT = """
import importlib.abc, json, sys, time

class SlowRedis(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "redis":
            time.sleep({slow})  # a loaded host: importing redis-py takes this long
        return None

sys.meta_path.insert(0, SlowRedis())
import anyio
from sse_middleware import StreamingMiddleware, StreamingSettings
from tests.support.harness import Wire, scope

async def app(scope, receive, send):
    await send({{"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]}})
    await send({{"type": "http.response.body", "body": b"data: one\\n\\n", "more_body": False}})

settings = StreamingSettings(resume=True, resume_store={url!r}, heartbeat_interval=0)
began = time.monotonic()
mw = StreamingMiddleware(app, settings)
built = time.monotonic() - began

async def main():
    client = Wire()
    await mw(scope(), client.receive, client.send)
    return [e.id for e in client.events()]

print(json.dumps({{"ids": anyio.run(main), "built": built}}))
"""


def run(url: str) -> dict[str, object]:
    code = textwrap.dedent(_SCRIPT).format(slow=SLOW, url=url)
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.splitlines()[-1])
    return result


@pytest.mark.slow  # a real redis-server and a fresh interpreter: the full run
def test_a_slow_import_of_the_store_does_not_cost_the_first_stream_its_resume() -> None:
    with redis_server() as redis:
        got = run(redis.url)
    assert isinstance(got["built"], float) and got["built"] >= SLOW  # the import was paid at start-up
    ids = got["ids"]
    assert isinstance(ids, list) and len(ids) == 1 and ids[0]  # the first stream is resumable
