"""The app the resumable-stream tests serve (``tests/e2e/test_resume_e2e.py``), on one or two uvicorn hosts.

``GET /answer?run=R&n=N&every=S`` streams events ``1 w1`` … ``N wN``, one every S seconds, then ``[END]``.
Each run of it writes a file ``TEST_MARKS/R.<host>.<random>`` when it starts (``<host>`` is ``TEST_HOST``)
and appends ``finished`` to it when its generator ends: the test counts the files to see how often the
app ran for ``R``, and on which host. ``&resume=0`` turns resume off for that request (the control).
``POST /v1/chat/completions?n=N&every=S`` streams the same words as an OpenAI chat completion (a role
chunk, one chunk per word, a finish chunk, ``[DONE]``); a re-run (``recovery()``, e.g. a takeover) starts
over, as an app that replays the same request does (``&on_rerun=continue``: it sends only the words
after ``recovery().text``, as an app that asks its provider to continue does), and records the recovery
it was given.
``GET /page?…`` is a page whose own ``EventSource`` reads ``/answer?…`` and keeps what it got in
``window.got``. The middleware's settings come from ``SSE_MIDDLEWARE_*``.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route

from sse_middleware import StreamingMiddleware, override, recovery

MARKS = Path(os.environ.get("TEST_MARKS", "/tmp/sse-test-marks"))
HOST = os.environ.get("TEST_HOST", str(os.getpid()))
END = "[END]"


def expected(n: int) -> list[str]:
    """What a client of ``/answer?n=N`` dispatches, in order (``[END]`` aside)."""
    return [f"{i} w{i}" for i in range(1, n + 1)]


async def answer(request: Request) -> Response:
    query = request.query_params
    n, every = int(query.get("n", "40")), float(query.get("every", "0.05"))
    if query.get("resume") == "0":
        override(request.scope, resume=False)
    MARKS.mkdir(parents=True, exist_ok=True)
    record = MARKS / f"{query.get('run', 'run')}.{HOST}.{uuid.uuid4().hex}"
    record.write_text("started\n")

    async def events() -> AsyncIterator[str]:
        try:
            for line in expected(n):
                yield f"data: {line}\n\n"
                await anyio.sleep(every)
            yield f"data: {END}\n\n"
        finally:
            with record.open("a") as out:
                out.write("finished\n")

    return StreamingResponse(events(), media_type="text/event-stream")


def words(n: int) -> list[str]:
    """The text pieces of ``/v1/chat/completions?n=N``, in order: joined, the whole answer."""
    return [f"w{i} " for i in range(1, n + 1)]


def _chunk(ident: str, delta: dict[str, str], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    body = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [choice],
    }
    return f"data: {json.dumps(body)}\n\n"


async def chat(request: Request) -> Response:
    query = request.query_params
    n, every = int(query.get("n", "20")), float(query.get("every", "0.05"))
    await request.body()  # read whole: the body a re-run replays
    found = recovery(request)
    MARKS.mkdir(parents=True, exist_ok=True)
    tag = "first" if found is None else f"{found.reason}:{len(found.text)}"
    (MARKS / f"{query.get('run', 'run')}.{HOST}.{uuid.uuid4().hex}").write_text(tag)

    ident = f"chatcmpl-{uuid.uuid4().hex}"  # each run its own: a spliced re-run must carry the first's

    todo = words(n)
    if found is not None and query.get("on_rerun") == "continue":  # asks for the rest only
        todo = todo[len(found.text.split()) :]

    async def chunks() -> AsyncIterator[str]:
        yield _chunk(ident, {"role": "assistant", "content": ""})
        for word in todo:
            await anyio.sleep(every)
            yield _chunk(ident, {"content": word})
        yield _chunk(ident, {}, "stop")
        yield "data: [DONE]\n\n"

    return StreamingResponse(chunks(), media_type="text/event-stream")


PAGE = """<!doctype html><meta charset="utf-8"><title>resume</title>
<script>
window.got = []; window.opens = []; window.ended = false;
const source = new EventSource("/answer" + location.search);
source.onopen = () => { window.opens.push(window.got.length); };  // how far the text was at each (re)connect
source.onmessage = (e) => {
  if (e.data === "[END]") { window.ended = true; source.close(); } else window.got.push(e.data);
};
</script>"""


async def page(request: Request) -> Response:
    return HTMLResponse(PAGE, headers={"Cache-Control": "no-store"})


app = StreamingMiddleware(
    Starlette(
        routes=[
            Route("/answer", answer),
            Route("/page", page),
            Route("/v1/chat/completions", chat, methods=["POST"]),
        ]
    )
)
