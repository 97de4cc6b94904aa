"""AG-UI: a pydantic-ai agent streaming to its frontend through the middleware, with no API key.

Run::

    python examples/agui.py [--port 8000]

then run the agent from any AG-UI client, e.g. ``@ag-ui/client`` in node::

    import { HttpAgent } from "@ag-ui/client";
    const agent = new HttpAgent({ url: "http://127.0.0.1:8000/agui",
      initialMessages: [{ id: "u1", role: "user", content: "What does the middleware do to AG-UI?" }] });
    await agent.runAgent({}, { onTextMessageContentEvent: ({ event }) => process.stdout.write(event.delta) });

or look at the raw events::

    curl -N http://127.0.0.1:8000/agui -H 'content-type: application/json' -d '{"threadId": "t",
      "runId": "r", "state": {}, "messages": [{"id": "u1", "role": "user", "content": "hi"}],
      "tools": [], "context": [], "forwardedProps": {}}'

The agent is pydantic-ai's ``Agent`` on a ``FunctionModel`` that streams a canned answer at about 100
tokens per second (set ``OPENAI_API_KEY`` and ``AGUI_MODEL=openai:gpt-4o-mini`` to use a real model
instead); ``AGUIAdapter.dispatch_request`` turns the run into AG-UI events, one ``TEXT_MESSAGE_CONTENT``
per token. The middleware reads the stream as AG-UI: it merges neighbouring text (and tool-argument)
deltas into fewer events (a frontend re-renders less; the text is the same), keeps proxies from
buffering the stream, sends heartbeats through long tool calls, and ends a run that fails after its
start with ``RUN_ERROR``, the way an AG-UI client expects.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator

import anyio
import uvicorn
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sse_middleware import StreamingMiddleware

CANNED = (
    "Your frontend gets the same answer, in fewer events: the middleware merges neighbouring "
    "`TEXT_MESSAGE_CONTENT` deltas of one message, never inside a code fence line, a word or an emoji:\n\n"
    "```python\napp = StreamingMiddleware(app)\n```\n\nThat is all it takes. 你好 👋"
)


async def canned(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    """A stand-in model: the canned answer, a few characters at a time, ~100 tokens per second."""
    for start in range(0, len(CANNED), 4):
        await anyio.sleep(0.01)
        yield CANNED[start : start + 4]


def model() -> Model | str:
    named = os.environ.get("AGUI_MODEL")
    return named if named and os.environ.get("OPENAI_API_KEY") else FunctionModel(stream_function=canned)


agent = Agent(model(), instructions="Answer in a few sentences.")


async def run(request: Request) -> Response:
    return await AGUIAdapter.dispatch_request(request, agent=agent)


app = StreamingMiddleware(Starlette(routes=[Route("/agui", run, methods=["POST"])]))


def main() -> None:
    parser = argparse.ArgumentParser(description="AG-UI example: pydantic-ai behind the middleware")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    print(f"AG-UI endpoint: http://{args.host}:{args.port}/agui", flush=True)
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
