"""The two AG-UI readers the agent-protocol tests use: the protocol's own Python models (``ag_ui.core``:
every event validated as the union ``Event``, then folded into messages and tool calls) and its
official client (``@ag-ui/client``'s ``HttpAgent``, tests/e2e/node/read_agui.mjs). Both give a
:class:`Run`: what a frontend ends up with, in a shape the two readers share, ids replaced by their
order of appearance (they are made up per run)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from ag_ui.core import Event
from httpx_sse import connect_sse
from pydantic import TypeAdapter

from .apps_agui import SHOW_CARD
from .node import NODE_DIR, run_node

EVENT: TypeAdapter[Any] = TypeAdapter(Event)


@dataclass
class Run:
    """What a reader made of one run."""

    texts: list[str] = field(default_factory=list)  # each assistant message's text, in order
    calls: list[tuple[str, str]] = field(default_factory=list)  # (tool name, arguments as sent)
    results: list[str] = field(default_factory=list)  # tool results, in order
    types: list[str] = field(default_factory=list)  # every event's type, in order
    error: dict[str, Any] | None = None  # the RUN_ERROR (message, code), if any
    failed: str | None = None  # the reader itself failed (a parse error, a cut connection)

    @property
    def events(self) -> int:
        return len(self.types)

    def same_content(self) -> tuple[Any, ...]:
        """What a user sees, for comparing two runs (not how many events carried it)."""
        return (self.texts, self.calls, self.results, self.error and self.error.get("message"))


def run_input(prompt: str) -> dict[str, Any]:
    return {
        "threadId": "thread-1",
        "runId": "run-1",
        "state": {},
        "messages": [{"id": "user-1", "role": "user", "content": prompt}],
        "tools": [SHOW_CARD],
        "context": [],
        "forwardedProps": {},
    }


def read_with_models(url: str, prompt: str) -> Run:
    """POST the input and read the stream with httpx-sse, every event validated by ``ag_ui.core``."""
    run = Run()
    texts: dict[str, str] = {}
    calls: dict[str, list[str]] = {}
    try:
        with (
            httpx.Client(timeout=30) as client,
            connect_sse(client, "POST", url, json=run_input(prompt)) as source,
        ):
            for sse in source.iter_sse():
                event = EVENT.validate_json(sse.data)
                kind = event.type.value if hasattr(event.type, "value") else str(event.type)
                run.types.append(kind)
                if kind in ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CHUNK"):
                    texts[event.message_id] = texts.get(event.message_id, "") + (
                        getattr(event, "delta", "") or ""
                    )
                elif kind in ("TOOL_CALL_START", "TOOL_CALL_CHUNK") and event.tool_call_id not in calls:
                    calls[event.tool_call_id] = [event.tool_call_name or "", ""]
                if kind in ("TOOL_CALL_ARGS", "TOOL_CALL_CHUNK"):
                    calls[event.tool_call_id][1] += event.delta or ""
                elif kind == "TOOL_CALL_RESULT":
                    run.results.append(event.content)
                elif kind == "RUN_ERROR":
                    run.error = {"message": event.message, "code": event.code}
    except (httpx.HTTPError, ValueError) as exc:
        run.failed = f"{type(exc).__name__}: {exc}"
    run.texts = [t for t in texts.values() if t]
    run.calls = [(name, args) for name, args in calls.values()]
    return run


def read_with_client(url: str, prompt: str) -> Run:
    """Run the agent with @ag-ui/client's HttpAgent (node), as a frontend does."""
    if not (NODE_DIR / "node_modules" / "@ag-ui" / "client").is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail("@ag-ui/client is not installed (.ci/run runs npm ci in tests/e2e/node)")
        pytest.skip("run `npm ci` in tests/e2e/node")
    got = run_node("read_agui.mjs", url, json.dumps(run_input(prompt)))
    run = Run(types=got["types"], error=got["runError"], failed=got["failed"])
    for message in got["messages"][1:]:  # the first is the user's input
        if message["role"] == "assistant":
            if message.get("content"):
                run.texts.append(message["content"])
            run.calls += [
                (c["function"]["name"], c["function"]["arguments"]) for c in message.get("toolCalls", [])
            ]
        elif message["role"] == "tool":
            run.results.append(message["content"])
    return run


READERS = {"ag-ui-client": read_with_client, "ag-ui-core": read_with_models}
