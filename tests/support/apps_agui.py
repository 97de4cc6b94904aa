"""AG-UI apps for tests/e2e/test_agent_agui.py: pydantic-ai's ``AGUIAdapter`` over a scripted
``FunctionModel`` (no API key), and a hand-written producer on ``ag_ui.encoder.EventEncoder``.

``POST /agui`` takes a ``RunAgentInput``; the last user message picks the script:

- ``text``: a markdown answer with a code fence, CJK and emoji, one token at a time;
- ``tool``: a call of the agent's own tool ``lookup`` with its arguments streamed, its result, an answer;
- ``frontend ok`` / ``frontend bad``: a call of the frontend tool ``show_card`` (declared by the client
  in ``tools[]``), with arguments that fit its ``parameters`` schema, or that do not;
- ``fail``: part of an answer, then the model raises (pydantic-ai ends the run with its own RUN_ERROR);
- ``guard``: an answer with the word the guard blocks (``forbidden``) halfway.

``POST /crash`` is an AG-UI stream written by hand, as the protocol's Python SDK shows it, whose
generator raises mid-answer: an exception after the response started, which only the middleware can
turn into a ``RUN_ERROR``. With the prompt ``after the end`` it raises only after its ``RUN_FINISHED``
(a cleanup that fails once the run is over).

``TEST_WRAP=0`` serves it without the middleware; its settings come from ``SSE_MIDDLEWARE_*``;
``TEST_AGUI_GUARD=1`` adds the guard. Tokens are ``TEST_AGUI_PACE`` seconds apart (default 0.01: 100
tokens per second).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
from ag_ui.core import (
    EventType,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from ag_ui.encoder import EventEncoder
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from sse_middleware import Blocked, Check, StreamingMiddleware

PACE = float(os.environ.get("TEST_AGUI_PACE", "0.01"))

ANSWER = [
    "Here", " is", " the", " plan", ":", "\n\n", "```py", "thon\n", "print", "(", "'", "hi", "'", ")",
    "\n```", "\n\n", "Then", " 你", "好", "\uff0c", "世", "界", "。", " Done", " ", "👩\u200d💻", " ✅", "\n",
]  # fmt: skip
TOOL_ARGS = ['{"to', 'pic": ', '"wea', "ther in", ' Paris"', "}"]
GOOD_CARD = ['{"title', '": "Wea', 'ther", "st', 'ars": 4}']
BAD_CARD = ['{"title', '": 5, "st', 'ars": "ma', 'ny"}']
GUARDED = ["This", " answer", " goes", " on", " until", " a", " forbidden", " word", " and", " more", "."]
SHOW_CARD = {  # the frontend tool a client declares in tools[]
    "name": "show_card",
    "description": "Show a card in the page",
    "parameters": {
        "type": "object",
        "properties": {"title": {"type": "string"}, "stars": {"type": "integer", "minimum": 0, "maximum": 5}},
        "required": ["title", "stars"],
        "additionalProperties": False,
    },
}


def _prompt(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content.strip()
    return ""


def _returned(messages: list[ModelMessage]) -> str | None:
    last = messages[-1]
    if isinstance(last, ModelRequest):
        for part in last.parts:
            if isinstance(part, ToolReturnPart):
                return str(part.content)
    return None


async def _tokens(tokens: list[str]) -> AsyncIterator[str]:
    for token in tokens:
        await anyio.sleep(PACE)
        yield token


async def _call(name: str, pieces: list[str], call_id: str) -> AsyncIterator[DeltaToolCalls]:
    yield {0: DeltaToolCall(name=name, tool_call_id=call_id)}
    for piece in pieces:
        await anyio.sleep(PACE)
        yield {0: DeltaToolCall(json_args=piece)}


async def script(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    prompt = _prompt(messages)
    returned = _returned(messages)
    if prompt == "tool":
        if returned is None:
            async for delta in _call("lookup", TOOL_ARGS, "call-lookup"):
                yield delta
        else:
            async for token in _tokens(["The", " tool", " said", ": ", returned, "."]):
                yield token
    elif prompt.startswith("frontend"):
        async for delta in _call("show_card", BAD_CARD if prompt.endswith("bad") else GOOD_CARD, "call-card"):
            yield delta
    elif prompt == "fail":
        async for token in _tokens(ANSWER[:12]):
            yield token
        raise RuntimeError("the model failed mid-answer")
    elif prompt == "guard":
        async for token in _tokens(GUARDED):
            yield token
    else:
        async for token in _tokens(ANSWER):
            yield token


agent = Agent(FunctionModel(stream_function=script), name="scripted")


@agent.tool_plain
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"sunny ({topic})"


async def agui(request: Request) -> Response:
    return await AGUIAdapter.dispatch_request(request, agent=agent)


async def crash(request: Request) -> Response:
    """AG-UI written by hand with the protocol's own encoder; the generator fails after some text."""
    run = RunAgentInput.model_validate(json.loads(await request.body()))
    encoder = EventEncoder(accept=request.headers.get("accept"))
    after_end = run.messages[-1].content == "after the end"

    async def events() -> AsyncIterator[str]:
        yield encoder.encode(
            RunStartedEvent(type=EventType.RUN_STARTED, thread_id=run.thread_id, run_id=run.run_id)
        )
        yield encoder.encode(
            TextMessageStartEvent(type=EventType.TEXT_MESSAGE_START, message_id="m1", role="assistant")
        )
        for token in ANSWER[:10]:
            await anyio.sleep(PACE)
            yield encoder.encode(
                TextMessageContentEvent(type=EventType.TEXT_MESSAGE_CONTENT, message_id="m1", delta=token)
            )
        if after_end:
            yield encoder.encode(TextMessageEndEvent(type=EventType.TEXT_MESSAGE_END, message_id="m1"))
            yield encoder.encode(
                RunFinishedEvent(type=EventType.RUN_FINISHED, thread_id=run.thread_id, run_id=run.run_id)
            )
        raise RuntimeError("database password is hunter2")  # never to reach the client

    return StreamingResponse(events(), media_type=encoder.get_content_type())


def no_forbidden(check: Check) -> None:
    if "forbidden" in check.text:
        raise Blocked("that word is not allowed here", code="forbidden_word")


def build(wrap: bool, guard: bool) -> Any:
    app = Starlette(routes=[Route("/agui", agui, methods=["POST"]), Route("/crash", crash, methods=["POST"])])
    if not wrap:
        return app
    return StreamingMiddleware(app, guards=[no_forbidden] if guard else ())


app = build(os.environ.get("TEST_WRAP", "1") == "1", os.environ.get("TEST_AGUI_GUARD") == "1")
