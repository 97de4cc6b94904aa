"""OpenAI Responses streams as the API writes them (every ``*.added`` and ``*.done`` event, the final
response with its output), and a reader as strict as the openai SDK's accumulator about what a spliced
stream must keep: one response id, one message and one text part opened once, sequence numbers in order,
and every event that repeats the text repeating what the deltas wrote."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sse_middleware._core.sse import parse

from .upstream_streams import sse

MIDDLE = 4  # events before the first text delta: created, in_progress, the message, its text part


def responses_events(
    parts: Sequence[str], ident: str, *, usage: tuple[int, int] | None = None, status: str = "completed"
) -> list[bytes]:
    """A whole Responses stream of one message with one text part (``status``: the final event's)."""
    response: dict[str, Any] = {
        "id": ident,
        "object": "response",
        "created_at": 1700000000,
        "model": "fake-gpt",
        "status": "in_progress",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": None,
    }
    message = {"id": f"msg_{ident}", "type": "message", "status": "in_progress", "role": "assistant"}
    where = {"item_id": message["id"], "output_index": 0, "content_index": 0}
    text = "".join(parts)
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    done = {**message, "status": "completed", "content": [{**part, "text": text}]}
    counts = usage or (10, len(parts))
    final = {
        **response,
        "status": status,
        "output": [done],
        "usage": {"input_tokens": counts[0], "output_tokens": counts[1], "total_tokens": sum(counts)},
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": response}),
        ("response.in_progress", {"response": response}),
        ("response.output_item.added", {"output_index": 0, "item": {**message, "content": []}}),
        ("response.content_part.added", {**where, "part": part}),
        *(("response.output_text.delta", {**where, "delta": p, "logprobs": []}) for p in parts),
        ("response.output_text.done", {**where, "text": text, "logprobs": []}),
        ("response.content_part.done", {**where, "part": {**part, "text": text}}),
        ("response.output_item.done", {"output_index": 0, "item": done}),
        (f"response.{status}", {"response": final}),
    ]
    return [sse({"type": name, "sequence_number": i, **body}, name) for i, (name, body) in enumerate(events)]


def responses_error() -> bytes:
    return sse({"type": "error", "code": "server_error", "message": "boom", "param": None}, "error")


def responses_read(body: bytes) -> dict[str, Any]:
    """The text the deltas wrote, and each text its ``*.done`` events and final response repeat; it
    raises on a second message or part, a delta for one not open, sequence numbers out of order."""
    ids, items, parts, errors, sequence = set(), [], [], [], []
    text, repeats, final = "", [], None
    for event in parse(body):
        obj = json.loads(event.data)
        assert obj["type"] == event.event
        if "sequence_number" in obj:
            sequence.append(obj["sequence_number"])
        name = event.event
        if isinstance(obj.get("response"), dict):
            ids.add(obj["response"]["id"])
        if name == "error":
            errors.append(obj)
        elif name == "response.output_item.added":
            items.append(obj["item"]["id"])
        elif name == "response.content_part.added":
            assert obj["item_id"] in items, "a part for an item that was not added"
            parts.append((obj["item_id"], obj["content_index"]))
        elif name == "response.output_text.delta":
            assert (obj["item_id"], obj["content_index"]) in parts, "a delta for a part that was not added"
            text += obj["delta"]
        elif name == "response.output_text.done":
            repeats.append(obj["text"])
        elif name == "response.content_part.done":
            repeats.append(obj["part"]["text"])
        elif name == "response.output_item.done":
            assert obj["item"]["id"] in items
            repeats += [part["text"] for part in obj["item"]["content"]]
        elif name in ("response.completed", "response.incomplete"):
            final = obj["response"]
            repeats += [part["text"] for item in final["output"] for part in item["content"]]
            assert [item["id"] for item in final["output"]] == items
    assert sequence == list(range(len(sequence))), sequence
    assert len(items) <= 1 and len(parts) <= 1, (items, parts)
    return {"ids": ids, "text": text, "repeats": repeats, "final": final, "errors": errors}
