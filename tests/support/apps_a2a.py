"""An A2A agent (the ``a2a-sdk``'s request handler and JSON-RPC routes on Starlette) that streams, for
tests/e2e/test_agent_a2a.py. ``TEST_WRAP=0`` serves it without the middleware (the control).

Asked with ``SendStreamingMessage``, it answers as a task: ``working`` with a status message, the
answer as an artifact in chunks (``append``, ``last_chunk``), then ``completed``. A message whose text is
``fail`` raises halfway (the SDK turns that into a ``failed`` task). Timestamps are fixed, so two runs'
wires differ only in the ids the SDK makes up (task, context, artifact).
"""

from __future__ import annotations

import os
from typing import Any

import anyio
from a2a.helpers.proto_helpers import new_task, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from starlette.applications import Starlette

from sse_middleware import StreamingMiddleware

CHUNKS = ["Agents ", "talk to ", "agents: ", "`A2A` ", "streams ", "tasks — ", "ünïcödé ", "😀 ", "你好."]
WHEN = "2026-01-01T00:00:00+00:00"


class Streamer(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await event_queue.enqueue_event(
            new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED)
        )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.update_status(
            TaskState.TASK_STATE_WORKING,
            new_text_message("thinking…", context_id=context.context_id, task_id=context.task_id),
            timestamp=WHEN,
        )
        fail = context.get_user_input() == "fail"
        for i, chunk in enumerate(CHUNKS):
            if fail and i == len(CHUNKS) // 2:
                raise RuntimeError("the agent failed halfway")
            await anyio.sleep(0.01)
            await updater.add_artifact(
                [new_text_part(chunk)],
                artifact_id="answer",
                name="answer",
                append=i > 0,
                last_chunk=i == len(CHUNKS) - 1,
            )
        await updater.update_status(TaskState.TASK_STATE_COMPLETED, timestamp=WHEN)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


CARD = AgentCard(
    name="streamer",
    description="Streams an answer as task artifacts",
    version="1.0.0",
    supported_interfaces=[
        AgentInterface(url="http://127.0.0.1/", protocol_binding="JSONRPC", protocol_version="1.0")
    ],
    capabilities=AgentCapabilities(streaming=True),
    default_input_modes=["text/plain"],
    default_output_modes=["text/plain"],
    skills=[AgentSkill(id="stream", name="stream", description="streams", tags=["test"])],
)


def build(wrap: bool) -> Any:
    handler = DefaultRequestHandler(
        agent_executor=Streamer(), task_store=InMemoryTaskStore(), agent_card=CARD
    )
    app = Starlette(routes=[*create_agent_card_routes(CARD), *create_jsonrpc_routes(handler, "/")])
    return StreamingMiddleware(app) if wrap else app


app = build(os.environ.get("TEST_WRAP", "1") == "1")
