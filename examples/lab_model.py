"""A simulated chat model for the lab: no keys, no network, deterministic timing.

It speaks the OpenAI chat-completions protocol (``POST /v1/chat/completions``), one SSE event per token,
so the same app can be served three ways: buffered (``"stream": false``), streamed raw, and streamed
through :class:`sse_middleware.StreamingMiddleware`. Timing is planned up front from a seed, so the three
panels of the lab, started together with the same seed, finish at the same moment.

Not meant to be run directly; ``examples/lab.py`` serves it.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from sse_middleware import override, recovery

ANSWERS = Path(__file__).with_name("lab_answers")

_CJK = "\u3000-\u30ff\u3400-\u9fff\uac00-\ud7af\uff00-\uffef"
_EMOJI = "\U0001f000-\U0001faff\u2600-\u27bf\u200d\ufe0f"
# A toy tokenizer with the shape of a real one: ~4 characters per token, a leading space glued to
# the word, one token per CJK character, and emoji split into code points (a ZWJ family or a flag
# arrives in pieces, as byte-level BPE tokenizers produce them). lab.js mirrors this regex.
TOKEN_RE = re.compile(rf"\n+|[ \t]*(?:[{_CJK}]|[{_EMOJI}]|[^\s{_CJK}{_EMOJI}]{{1,4}})|[ \t]+")


def tokenize(text: str) -> list[str]:
    tokens = TOKEN_RE.findall(text)
    if "".join(tokens) != text:  # the regex must cover every character, or the model would lose text
        raise ValueError("tokenizer dropped characters")
    return tokens


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    label: str
    description: str
    answer: str
    ttft: float
    """Seconds before the first token (prefill)."""
    tpot: float
    """Mean seconds between tokens."""
    jitter: float = 0.5
    """Each gap is ``tpot * (1 ± jitter)``, uniformly."""
    pause_after: str | None = None
    """A tool call: the model goes silent for ``pause`` seconds after the token that ends this text."""
    pause: float = 0.0
    fail_at: float | None = None
    """Fraction of the answer after which the app raises (a crash mid-answer)."""
    drop_at: float | None = None
    """Fraction of the answer after which the page cuts its streams' connections (a network drop)."""
    offline: float = 1.0
    """Seconds the network stays down after a drop."""
    guarded: bool = False
    """The page asks the middleware for the lab's guard on this answer (the ``X-Lab-Guard`` header)."""
    recovers: bool = False
    """The provider fails on the first run only: the route turns the middleware's recovery on, and a
    re-run (``recovery()`` says so) continues the answer from the text the client already has."""

    def public(self) -> dict[str, Any]:
        return {
            "name": self.name, "label": self.label, "description": self.description,
            "ttft": self.ttft, "tpot": self.tpot, "jitter": self.jitter,
            "tokens": len(tokenize(self.answer)), "drop_at": self.drop_at, "offline": self.offline,
            "guarded": self.guarded, "recovers": self.recovers,
        }


def _answer(name: str) -> str:
    return (ANSWERS / f"{name}.md").read_text(encoding="utf-8")


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("short", "Short reply", "A two-paragraph answer: streaming barely matters.",
                 _answer("short"), ttft=0.5, tpot=0.03),
        Scenario("report", "Long report", "Markdown with a table, math, code, emoji and CJK: about 8 s.",
                 _answer("report"), ttft=0.8, tpot=0.015),
        Scenario("tool", "Tool-call silence", "The model goes quiet for 4 s while a tool runs.",
                 _answer("tool"), ttft=0.6, tpot=0.025,
                 pause_after="query_metrics(service=\"chat\", window=\"24h\")`…*\n\n", pause=4.0),
        Scenario("failure", "Failure mid-answer", "The app raises an exception halfway through.",
                 _answer("report"), ttft=0.8, tpot=0.015, fail_at=0.45),
        Scenario("drop", "Network drop", "The streams' connections drop for 1 s mid-answer; the middleware's "
                 "resumes with Last-Event-ID, the raw one has lost the rest.",
                 _answer("report"), ttft=0.8, tpot=0.015, drop_at=0.4),
        Scenario("recover", "Provider fails mid-answer", "The provider fails halfway. Without the "
                 "middleware the client keeps half an answer and an error; with it, the app runs again "
                 "and continues the same answer on the same stream.",
                 _answer("report"), ttft=0.8, tpot=0.015, fail_at=0.45, recovers=True),
        Scenario("guarded", "Guarded answer", "The answer leaks a credential halfway. A guard on the "
                 "middleware stops it there; the raw stream shows it.",
                 _answer("guarded"), ttft=0.5, tpot=0.025, guarded=True),
    )
}


class SimulatedCrash(RuntimeError):
    """What the model 'raises' in the failure scenario (a stand-in for a GPU or upstream error)."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """Which tokens go out when (seconds after the request), and whether the stream dies."""

    tokens: list[str]
    offsets: list[float]
    fail_after: int | None  # number of tokens sent before the crash

    @classmethod
    def make(
        cls, scenario: Scenario, *, ttft: float, tpot: float, jitter: float, seed: int, after: str = ""
    ) -> Plan:
        """``after``: the text the client already has (a re-run continues from there, and succeeds)."""
        rng = random.Random(seed)
        tokens = tokenize(scenario.answer)
        if after:
            skip, text = 0, ""
            while skip < len(tokens) and len(text) < len(after):
                text += tokens[skip]
                skip += 1
            tokens = tokens[skip:] if text == after else tokens
            return cls(tokens, [ttft / 4 + i * tpot for i in range(len(tokens))], None)
        offsets, t, text = [], ttft, ""
        for i, token in enumerate(tokens):
            if i:
                t += max(0.0, tpot * (1 + jitter * rng.uniform(-1, 1)))
            offsets.append(t)
            text += token
            if scenario.pause_after and text.endswith(scenario.pause_after):
                t += scenario.pause
        fail_after = None if scenario.fail_at is None else int(len(tokens) * scenario.fail_at)
        return cls(tokens, offsets, fail_after)


async def generate(plan: Plan) -> AsyncIterator[str]:
    """Yield tokens on schedule (absolute deadlines: no drift), raising where the plan says."""
    start = time.monotonic()
    for i, (token, offset) in enumerate(zip(plan.tokens, plan.offsets, strict=True)):
        await anyio.sleep(max(0.0, start + offset - time.monotonic()))
        if plan.fail_after is not None and i == plan.fail_after:
            raise SimulatedCrash("CUDA error: out of memory (simulated crash in the lab model)")
        yield token


def _float(body: dict[str, Any], key: str, default: float, lo: float, hi: float) -> float:
    value = body.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return default
    return min(hi, max(lo, float(value)))


def scenario_of(body: dict[str, Any]) -> Scenario:
    return SCENARIOS.get(str(body.get("scenario", "short")), SCENARIOS["short"])


def plan_from_request(body: dict[str, Any], after: str = "") -> Plan:
    """Lab extras in the request body: ``scenario``, ``ttft``, ``tpot``, ``jitter``, ``seed``."""
    scenario = scenario_of(body)
    seed = body.get("seed", 0)
    return Plan.make(
        scenario,
        ttft=_float(body, "ttft", scenario.ttft, 0.0, 30.0),
        tpot=_float(body, "tpot", scenario.tpot, 0.0, 2.0),
        jitter=_float(body, "jitter", scenario.jitter, 0.0, 1.0),
        seed=seed if isinstance(seed, int) else 0,
        after=after,
    )


def _chunk(cid: str, created: int, delta: dict[str, Any], finish: str | None = None) -> bytes:
    payload = {
        "id": cid, "object": "chat.completion.chunk", "created": created, "model": "lab-sim",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


async def _sse(
    plan: Plan, cid: str, created: int, include_usage: bool, note: str = ""
) -> AsyncIterator[bytes]:
    if note:  # a comment, which every client ignores: the lab's event log shows it
        yield f": lab note: {note}\n\n".encode()
    yield _chunk(cid, created, {"role": "assistant", "content": ""})
    count = 0
    async for token in generate(plan):
        count += 1
        yield _chunk(cid, created, {"content": token})
    yield _chunk(cid, created, {}, "stop")
    if include_usage:
        usage = {"prompt_tokens": 12, "completion_tokens": count, "total_tokens": 12 + count}
        payload = {"id": cid, "object": "chat.completion.chunk", "created": created,
                   "model": "lab-sim", "choices": [], "usage": usage}
        yield b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


async def chat_completions(request: Request) -> Response:
    try:
        body = await request.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        error = {"message": "body must be a JSON object", "type": "invalid_request_error",
                 "param": None, "code": None}
        return JSONResponse({"error": error}, status_code=400)
    found, note = recovery(request), ""
    if scenario_of(body).recovers:
        # This route asks for recovery (the middleware's own setting is off). Raw, nothing reads it.
        override(request.scope, recover="continue", recover_backoff=1.2)
        if found is not None:
            had = len(found.text)
            note = f"re-run {found.attempt} after {found.reason}: continuing from {had} characters"
    plan = plan_from_request(body, found.text if found is not None else "")
    created = int(time.time())
    cid = f"chatcmpl-lab-{created}-{random.randrange(1 << 32):08x}"
    if body.get("stream"):
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        stream = _sse(plan, cid, created, include_usage, note)
        return StreamingResponse(stream, media_type="text/event-stream")
    try:  # buffered: the whole answer, then one JSON document
        text = "".join([token async for token in generate(plan)])
    except SimulatedCrash as exc:
        error = {"message": str(exc), "type": "server_error", "param": None, "code": None}
        return JSONResponse({"error": error}, status_code=500)
    count = len(plan.tokens)
    usage = {"prompt_tokens": 12, "completion_tokens": count, "total_tokens": 12 + count}
    return JSONResponse({
        "id": cid, "object": "chat.completion", "created": created, "model": "lab-sim",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": usage,
    })


def build_model_app() -> Starlette:
    """The inner app: mounted once as-is and once wrapped in the middleware."""
    return Starlette(routes=[Route("/v1/chat/completions", chat_completions, methods=["POST"])])
