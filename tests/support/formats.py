"""The stream formats of issue 13 as an app writes them, and readers that take a stream apart by merge key.

``stream(fmt, tokens)`` builds a whole stream whose text, reasoning and tool-call arguments are cut from
``tokens``; ``read(fmt, body)`` returns what a client must see identically before and after merging:
the text per key, and every other event in order with the text each key had before it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from sse_middleware._core.sse import Event, parse

# A tool call's arguments, as the model streams them: a JSON document cut anywhere.
TOOL_ARGS: dict[str, Any] = {"city": "Paris", "days": 3, "units": "metric", "note": 'a "quoted" word, é 😀'}
ARGS_TEXT = json.dumps(TOOL_ARGS, ensure_ascii=False)


def pieces(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def ascii_json(stream: bytes) -> bytes:
    """The same JSON events as ``json.dumps``' default (``ensure_ascii``) writes them: each non-ASCII
    character as a ``\\u`` escape, astral ones as a surrogate pair, whose halves a token may split."""
    text = stream.decode("utf-8", "surrogatepass")
    return re.sub("[^\x00-\x7f]", lambda m: json.dumps(m[0])[1:-1], text).encode()


def sse(obj: object, name: str | None = None, *, compact: bool = True) -> str:
    data = json.dumps(obj, separators=(",", ":") if compact else None, ensure_ascii=False)
    return (f"event: {name}\n" if name else "") + f"data: {data}\n\n"


DONE = "data: [DONE]\n\n"


# -- OpenAI chat: the full chunk, or the minimal one hand-written relays send ------------------------
def chat(delta: dict[str, Any], *, finish: str | None = None, minimal: bool = False, **extra: Any) -> str:
    if minimal:
        choice: dict[str, Any] = {"delta": delta, **({"finish_reason": finish} if finish else {})}
        return sse({"choices": [choice], **extra}, compact=False)
    body = {
        "id": "chatcmpl-9",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        **extra,
    }
    return sse(body)


def tool_head(index: int, name: str, arguments: str = "") -> dict[str, Any]:
    fn = {"name": name, "arguments": arguments}
    return {"tool_calls": [{"index": index, "id": f"call_{index}", "type": "function", "function": fn}]}


def tool_args(index: int, arguments: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "function": {"arguments": arguments}}]}


def chat_stream(tokens: list[str], *, minimal: bool = False, reasoning: str = "", tools: int = 0) -> str:
    """Role, reasoning (``reasoning`` names its field), content, ``tools`` tool calls, finish, [DONE]."""
    out = [chat({"role": "assistant", "content": ""}, minimal=minimal)]
    if reasoning:
        out += [chat({reasoning: t}, minimal=minimal) for t in tokens]
    out += [chat({"content": t}, minimal=minimal) for t in tokens]
    for i in range(tools):
        out.append(chat(tool_head(i, f"tool_{i}"), minimal=minimal))
        out += [chat(tool_args(i, piece), minimal=minimal) for piece in pieces(ARGS_TEXT, 2 + i)]
    out.append(chat({}, finish="tool_calls" if tools else "stop", minimal=minimal))
    return "".join(out) + DONE


def _chat_text(body: dict[str, Any]) -> tuple[object, str] | None:
    choice = (body.get("choices") or [{}])[0]
    delta = choice.get("delta") or {}
    if choice.get("finish_reason") or "role" in delta:
        return None
    for field in ("content", "reasoning_content", "reasoning"):
        if delta.get(field):
            return ("chat", choice.get("index"), field), delta[field]
    calls = delta.get("tool_calls") or []
    if len(calls) == 1 and set(calls[0]) == {"index", "function"} and calls[0]["function"].get("arguments"):
        return ("tool", calls[0]["index"]), calls[0]["function"]["arguments"]
    return None


# -- OpenAI Responses -------------------------------------------------------------------------------
def responses_stream(tokens: list[str], *, tools: int = 1) -> str:
    seq = iter(range(10_000))

    def event(name: str, body: dict[str, Any]) -> str:
        return sse({"type": name, "sequence_number": next(seq), **body}, name)

    out = [
        event(
            "response.created", {"response": {"id": "resp_1", "model": "gpt-test", "status": "in_progress"}}
        )
    ]
    out += [
        event(
            "response.reasoning_summary_text.delta",
            {
                "item_id": "rs_1",
                "output_index": 0,
                "summary_index": 0,
                "delta": t,
                "obfuscation": "x" * (i % 4),
            },
        )
        for i, t in enumerate(tokens)
    ]
    ids = {"item_id": "msg_1", "output_index": 1, "content_index": 0}
    out += [event("response.output_text.delta", {**ids, "delta": t, "logprobs": []}) for t in tokens]
    for i in range(tools):
        item = {
            "type": "function_call",
            "id": f"fc_{i}",
            "call_id": f"call_{i}",
            "name": "f",
            "arguments": "",
        }
        out.append(event("response.output_item.added", {"output_index": 2 + i, "item": item}))
        out += [
            event(
                "response.function_call_arguments.delta",
                {"item_id": f"fc_{i}", "output_index": 2 + i, "delta": p},
            )
            for p in pieces(ARGS_TEXT, 2 + i)
        ]
        out.append(
            event(
                "response.function_call_arguments.done",
                {"item_id": f"fc_{i}", "output_index": 2 + i, "arguments": ARGS_TEXT},
            )
        )
    return "".join(out) + event("response.completed", {"response": {"id": "resp_1", "status": "completed"}})


_RESPONSES_PLACES = {
    "response.output_text.delta": ("item_id", "output_index", "content_index"),
    "response.reasoning_summary_text.delta": ("item_id", "output_index", "summary_index"),
    "response.reasoning_text.delta": ("item_id", "output_index", "content_index"),
    "response.function_call_arguments.delta": ("item_id", "output_index"),
}


def _responses_text(body: dict[str, Any]) -> tuple[object, str] | None:
    places = _RESPONSES_PLACES.get(body.get("type", ""))
    if places is None:
        return None
    return (body["type"], *(body[p] for p in places)), body["delta"]


# -- Anthropic --------------------------------------------------------------------------------------
def anthropic_stream(tokens: list[str], *, tools: int = 1) -> str:
    def event(name: str, body: dict[str, Any]) -> str:
        return sse({"type": name, **body}, name)

    def block(index: int, kind: str, field: str, texts: list[str], start: dict[str, Any]) -> list[str]:
        return [
            event("content_block_start", {"index": index, "content_block": start}),
            *(
                event("content_block_delta", {"index": index, "delta": {"type": kind, field: t}})
                for t in texts
            ),
            event("content_block_stop", {"index": index}),
        ]

    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": []}
    message["usage"] = {"input_tokens": 7, "output_tokens": 1}
    out = [event("message_start", {"message": message})]
    out += block(
        0, "thinking_delta", "thinking", tokens, {"type": "thinking", "thinking": "", "signature": ""}
    )
    out += block(1, "text_delta", "text", tokens, {"type": "text", "text": ""})
    for i in range(tools):
        start = {"type": "tool_use", "id": f"toolu_{i}", "name": "f", "input": {}}
        out += block(2 + i, "input_json_delta", "partial_json", ["", *pieces(ARGS_TEXT, 2 + i)], start)
    out.append(
        event(
            "message_delta",
            {"delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 9}},
        )
    )
    return "".join(out) + event("message_stop", {})


def _anthropic_text(body: dict[str, Any]) -> tuple[object, str] | None:
    delta = body.get("delta") or {}
    field = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}.get(
        delta.get("type", "")
    )
    if body.get("type") != "content_block_delta" or field is None or not delta[field]:
        return None
    return (body["index"], delta["type"]), delta[field]


# -- The Vercel AI SDK's UI message stream ----------------------------------------------------------
def ui_stream(tokens: list[str], *, tools: int = 1) -> str:
    out = [sse({"type": "start", "messageId": "msg_1"}), sse({"type": "start-step"})]
    out += [sse({"type": "reasoning-start", "id": "r_0"})]
    out += [sse({"type": "reasoning-delta", "id": "r_0", "delta": t}) for t in tokens]
    out += [sse({"type": "reasoning-end", "id": "r_0"}), sse({"type": "text-start", "id": "t_0"})]
    out += [sse({"type": "text-delta", "id": "t_0", "delta": t}) for t in tokens]
    out += [sse({"type": "text-end", "id": "t_0"})]
    for i in range(tools):
        out.append(sse({"type": "tool-input-start", "toolCallId": f"call_{i}", "toolName": "f"}))
        out += [
            sse({"type": "tool-input-delta", "toolCallId": f"call_{i}", "inputTextDelta": p})
            for p in pieces(ARGS_TEXT, 2 + i)
        ]
        out.append(
            sse(
                {
                    "type": "tool-input-available",
                    "toolCallId": f"call_{i}",
                    "toolName": "f",
                    "input": TOOL_ARGS,
                }
            )
        )
    out += [sse({"type": "finish-step"}), sse({"type": "finish", "finishReason": "stop"})]
    return "".join(out) + DONE


def _ui_text(body: dict[str, Any]) -> tuple[object, str] | None:
    kind = body.get("type")
    if kind in ("text-delta", "reasoning-delta"):
        return (kind, body["id"]), body["delta"]
    if kind == "tool-input-delta":
        return (kind, body["toolCallId"]), body["inputTextDelta"]
    return None


# -- AG-UI: EventEncoder's shape, a millisecond timestamp on some events (pydantic-ai sets one on each) ----
def agui_stream(tokens: list[str]) -> str:
    def at(i: int) -> dict[str, int]:
        return {"timestamp": 1_700_000_000_000 + i} if i % 3 else {}

    out = [sse({"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"})]
    out += [sse({"type": "REASONING_START", "messageId": "th1"})]
    out += [sse({"type": "REASONING_MESSAGE_START", "messageId": "th1", "role": "reasoning"})]
    out += [
        sse({"type": "REASONING_MESSAGE_CONTENT", **at(i), "messageId": "th1", "delta": t})
        for i, t in enumerate(tokens)
    ]
    out += [
        sse({"type": "REASONING_MESSAGE_END", "messageId": "th1"}),
        sse({"type": "REASONING_END", "messageId": "th1"}),
    ]
    out += [sse({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"})]
    out += [
        sse({"type": "TEXT_MESSAGE_CONTENT", **at(i), "messageId": "m1", "delta": t})
        for i, t in enumerate(tokens)
    ]
    out += [sse({"type": "TEXT_MESSAGE_END", "messageId": "m1"})]
    out += [
        sse({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f", "parentMessageId": "m1"})
    ]
    out += [
        sse({"type": "TOOL_CALL_ARGS", **at(i), "toolCallId": "c1", "delta": p})
        for i, p in enumerate(pieces(ARGS_TEXT, 2))
    ]
    out += [
        sse({"type": "TOOL_CALL_END", "toolCallId": "c1"}),
        sse({"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"}),
    ]
    return "".join(out)


def _agui_text(body: dict[str, Any]) -> tuple[object, str] | None:
    kind = body.get("type")
    if kind in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"):
        return (kind, body["messageId"]), body["delta"]
    if kind == "TOOL_CALL_ARGS":
        return (kind, body["toolCallId"]), body["delta"]
    return None


# -- JSON relays ------------------------------------------------------------------------------------
def relay_stream(tokens: list[str]) -> str:
    """The classic FastAPI relay: ``json.dumps({"text": token})`` per token, then ``[DONE]``."""
    return "".join(sse({"text": t}, compact=False) for t in tokens) + DONE


def custom_stream(tokens: list[str]) -> str:
    """An app's own envelope, text in ``payload.t`` (``dialect="json"``, ``json_text_field="payload.t"``)."""
    events = [sse({"type": "token", "payload": {"t": t, "lang": "en"}, "v": 2}) for t in tokens]
    return sse({"type": "begin"}) + "".join(events) + sse({"type": "end"})


def _relay_text(body: dict[str, Any]) -> tuple[object, str] | None:
    text = body.get("text")
    return (("text",), text) if isinstance(text, str) else None


def _custom_text(body: dict[str, Any]) -> tuple[object, str] | None:
    payload = body.get("payload")
    return (("payload",), payload["t"]) if isinstance(payload, dict) else None


Reader = Callable[[dict[str, Any]], "tuple[object, str] | None"]
FORMATS: dict[str, tuple[Callable[[list[str]], str], Reader]] = {
    "openai": (lambda t: chat_stream(t, reasoning="reasoning_content", tools=2), _chat_text),
    "openai-minimal": (lambda t: chat_stream(t, minimal=True, reasoning="reasoning"), _chat_text),
    "openai-responses": (responses_stream, _responses_text),
    "anthropic": (anthropic_stream, _anthropic_text),
    "ai-sdk": (ui_stream, _ui_text),
    "ag-ui": (agui_stream, _agui_text),
    "relay": (relay_stream, _relay_text),
    "json": (custom_stream, _custom_text),
}


def stream(fmt: str, tokens: list[str]) -> bytes:
    return FORMATS[fmt][0](tokens).encode()


def read(fmt: str, body: bytes) -> tuple[dict[object, str], list[tuple[str, dict[object, str]]]]:
    """(text per key, every other event in order with the text per key so far): equal before and after
    merging when nothing was lost, nothing reordered, and no text crossed another event."""
    reader = FORMATS[fmt][1]
    texts: dict[object, str] = {}
    others: list[tuple[str, dict[object, str]]] = []
    for event in parse(body):
        found = _text_of(reader, event)
        if found is None or not found[1]:
            others.append((f"{event.event}|{event.data}", dict(texts)))
        else:
            texts[found[0]] = texts.get(found[0], "") + found[1]
    return texts, others


def events_per_key(fmt: str, body: bytes) -> dict[object, int]:
    """How many events carried text for each key."""
    reader = FORMATS[fmt][1]
    counts: dict[object, int] = {}
    for event in parse(body):
        found = _text_of(reader, event)
        if found is not None and found[1]:
            counts[found[0]] = counts.get(found[0], 0) + 1
    return counts


def _text_of(reader: Reader, event: Event) -> tuple[object, str] | None:
    try:
        body = json.loads(event.data)
    except ValueError:
        return None
    found = reader(body) if isinstance(body, dict) else None
    return found if found is not None and found[1] is not None else None
