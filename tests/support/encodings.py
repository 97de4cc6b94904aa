"""Every format's text, in the encodings the format allows, and each format's client's reading of it.

``draw(data, fmt)`` draws a stream of ``fmt`` (its events, and the dialect setting that reads it) whose
answer is a few parts (a message's text, reasoning, a tool call's arguments, a second choice or call),
each cut into pieces that travel in whichever of the format's equivalent forms the draw picks: an
OpenAI role chunk with content, a chunk with a finish reason, logprobs or usage, two choices in one
chunk; a Responses delta with logprobs; an Anthropic block that starts with text; an AI SDK part with
``providerMetadata``; AG-UI's START/CONTENT/END or ``*_CHUNK`` forms (an opening chunk with text,
named or id-less continuations); a relay event whose envelope changes; an ``id:`` line or several
``data:`` lines. ``client(fmt, body)`` is the text per part a client of the format accumulates from the
bytes it got (the SDKs' own rules: per choice and tool index, per block, per message id)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from hypothesis import strategies as st

from sse_middleware._core.sse import parse

Data = Any  # hypothesis' st.data() object
Parts = dict[object, str]

piece = st.text(alphabet=st.sampled_from(list('ab SECRET"\\é😀\n{}:,\u2028')), max_size=8)
pieces = st.lists(piece, min_size=1, max_size=5)


def _sse(obj: object, name: str | None = None, *, ident: bool = False, spaced: bool = False) -> bytes:
    data = json.dumps(obj, ensure_ascii=False, separators=None if spaced else (",", ":"))
    head = ("id: 7\n" if ident else "") + (f"event: {name}\n" if name else "")
    return f"{head}data: {data}\n\n".encode()


def _interleave(data: Data, parts: Mapping[Any, list[str]]) -> list[tuple[Any, str]]:
    """The parts' pieces in one order, each part's own in its order."""
    left = {key: list(texts) for key, texts in parts.items()}
    out = []
    while left:
        key = data.draw(st.sampled_from(sorted(left, key=repr)))
        out.append((key, left[key].pop(0)))
        if not left[key]:
            del left[key]
    return out


# -- OpenAI chat ----------------------------------------------------------------------------------------
def _chat(data: Data) -> tuple[list[bytes], dict[str, Any]]:
    parts: dict[Any, list[str]] = {(0, "content"): data.draw(pieces)}
    for optional in ((0, "reasoning_content"), (1, "content"), (0, "tool", 0), (0, "tool", 1)):
        if data.draw(st.booleans()):
            parts[optional] = data.draw(pieces)
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    first = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
    out = [_sse({**head, "choices": [first]})]
    named: set[object] = set()
    groups: list[list[tuple[Any, str]]] = []
    for key, text in _interleave(data, parts):
        group = groups[-1] if groups else None
        if group is None or any(k == key for k, _ in group) or not data.draw(st.booleans()):
            groups.append([(key, text)])
        else:
            group.append((key, text))
    for group in groups:
        choices: dict[int, dict[str, Any]] = {}
        for key, text in group:
            delta = choices.setdefault(key[0], {})
            if key[1] == "tool":
                call: dict[str, Any] = {"index": key[2], "function": {"arguments": text}}
                if key not in named:  # the call's head, carrying its first arguments
                    named.add(key)
                    call.update(id=f"call_{key[2]}", type="function")
                    call["function"]["name"] = f"tool_{key[2]}"
                delta.setdefault("tool_calls", []).append(call)
            else:
                delta[key[1]] = text
        if data.draw(st.booleans()):
            choices.setdefault(0, {})["role"] = "assistant"
        finish = data.draw(st.sampled_from([None, None, "stop"]))
        logprobs = data.draw(st.sampled_from([None, {"content": []}]))
        body: dict[str, Any] = {
            **head,
            "choices": [
                {"index": i, "delta": d, "logprobs": logprobs, "finish_reason": finish}
                for i, d in sorted(choices.items())
            ],
        }
        if data.draw(st.booleans()):
            body["usage"] = {"prompt_tokens": 1, "completion_tokens": 2}
        out.append(_sse(body, ident=data.draw(st.booleans()), spaced=data.draw(st.booleans())))
    return [*out, b"data: [DONE]\n\n"], {}


def _chat_client(events: list[Any]) -> Parts:
    out: Parts = {}
    for obj in events:
        for choice in obj.get("choices", []):
            delta = choice.get("delta") or {}
            for field in ("content", "reasoning_content", "reasoning"):
                if isinstance(delta.get(field), str):
                    _add(out, (choice["index"], field), delta[field])
            for call in delta.get("tool_calls") or []:
                _add(out, (choice["index"], "tool", call["index"]), call["function"].get("arguments") or "")
    return out


# -- OpenAI Responses -----------------------------------------------------------------------------------
_RESPONSES = {
    "text": ("response.output_text.delta", {"item_id": "msg_1", "output_index": 1, "content_index": 0}),
    "summary": (
        "response.reasoning_summary_text.delta",
        {"item_id": "rs_1", "output_index": 0, "summary_index": 0},
    ),
    "args": ("response.function_call_arguments.delta", {"item_id": "fc_1", "output_index": 2}),
}


def _responses(data: Data) -> tuple[list[bytes], dict[str, Any]]:
    parts = {key: data.draw(pieces) for key in _RESPONSES if key == "text" or data.draw(st.booleans())}
    created = {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1"}}
    out = [_sse(created, "response.created")]
    item = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "get_weather", "arguments": ""}
    added = {"type": "response.output_item.added", "sequence_number": 1, "output_index": 2, "item": item}
    out.append(_sse(added, "response.output_item.added"))
    for n, (key, text) in enumerate(_interleave(data, parts), start=2):
        name, places = _RESPONSES[str(key)]
        body: dict[str, Any] = {"type": name, "sequence_number": n, **places, "delta": text}
        if data.draw(st.booleans()):
            body["logprobs"] = [{"token": text, "logprob": -0.1}]
        if data.draw(st.booleans()):
            body["extra"] = 1
        if data.draw(st.booleans()):
            del body["item_id"]
        out.append(_sse(body, name, ident=data.draw(st.booleans())))
    done = {"type": "response.completed", "sequence_number": 999, "response": {"id": "resp_1"}}
    return [*out, _sse(done, "response.completed")], {}


def _responses_client(events: list[tuple[str | None, Any]]) -> Parts:
    out: Parts = {}
    for name, obj in events:
        if name is not None and name.endswith(".delta"):
            place = (obj.get("output_index"), obj.get("content_index", obj.get("summary_index")))
            _add(out, (name, *place), obj["delta"])
    return out


# -- Anthropic ------------------------------------------------------------------------------------------
_BLOCKS = (("text", "text_delta", "text"), ("thinking", "thinking_delta", "thinking"))


def _anthropic(data: Data) -> tuple[list[bytes], dict[str, Any]]:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": []}
    out = [_sse({"type": "message_start", "message": message}, "message_start")]
    kinds = [*_BLOCKS, ("tool_use", "input_json_delta", "partial_json")]
    for index, (block_type, delta_type, field) in enumerate(kinds):
        if index and not data.draw(st.booleans()):
            continue
        texts = data.draw(pieces)
        block: dict[str, Any] = {"type": block_type}
        if block_type == "tool_use":
            block.update(id="toolu_1", name="get_weather", input={})
        else:  # a block may start with text of its own
            block[field] = texts.pop(0) if data.draw(st.booleans()) else ""
        start = {"type": "content_block_start", "index": index, "content_block": block}
        out.append(_sse(start, "content_block_start", ident=data.draw(st.booleans())))
        for text in texts:
            delta: dict[str, Any] = {"type": delta_type, field: text}
            if data.draw(st.booleans()):
                delta["extra"] = None
            body = {"type": "content_block_delta", "index": index, "delta": delta}
            out.append(_sse(body, "content_block_delta", ident=data.draw(st.booleans())))
        out.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    return [*out, _sse({"type": "message_stop"}, "message_stop")], {}


def _anthropic_client(events: list[tuple[str | None, Any]]) -> Parts:
    out: Parts = {}
    for name, obj in events:
        if name == "content_block_start":
            block = obj["content_block"]
            _add(out, obj["index"], block.get("text") or block.get("thinking") or "")
        elif name == "content_block_delta":
            delta = obj["delta"]
            _add(
                out,
                obj["index"],
                delta.get("text") or delta.get("thinking") or delta.get("partial_json") or "",
            )
    return out


# -- The AI SDK's UI message stream ---------------------------------------------------------------------
_UI = {"t": ("text-delta", "id", "delta"), "r": ("reasoning-delta", "id", "delta")}
_UI_TOOL = ("tool-input-delta", "toolCallId", "inputTextDelta")


def _ui(data: Data) -> tuple[list[bytes], dict[str, Any]]:
    parts = {key: data.draw(pieces) for key in ("t", "r", "c") if key == "t" or data.draw(st.booleans())}
    out = [_sse({"type": "start", "messageId": "m1"}), _sse({"type": "start-step"})]
    out.append(_sse({"type": "text-start", "id": "t"}))
    if "r" in parts:
        out.append(_sse({"type": "reasoning-start", "id": "r"}))
    if "c" in parts:
        out.append(_sse({"type": "tool-input-start", "toolCallId": "c", "toolName": "get_weather"}))
    for key, text in _interleave(data, parts):
        kind, field, text_field = _UI.get(str(key), _UI_TOOL)
        body: dict[str, Any] = {"type": kind, field: key, text_field: text}
        if data.draw(st.booleans()):
            body["providerMetadata"] = {"x": {}}
        out.append(_sse(body, ident=data.draw(st.booleans())))
    out += [_sse({"type": "text-end", "id": "t"}), _sse({"type": "finish-step"}), _sse({"type": "finish"})]
    return [*out, b"data: [DONE]\n\n"], {}


def _ui_client(events: list[Any]) -> Parts:
    out: Parts = {}
    for obj in events:
        for kind, field, text_field in (*_UI.values(), _UI_TOOL):
            if obj.get("type") == kind:
                _add(out, (kind, obj[field]), obj[text_field])
    return out


# -- AG-UI ----------------------------------------------------------------------------------------------
# group -> (START, CONTENT, END, CHUNK type, id field, what the start names)
_AGUI = {
    "text": ("TEXT_MESSAGE", "messageId", {"role": "assistant"}),
    "reasoning": ("REASONING_MESSAGE", "messageId", {"role": "reasoning"}),
    "tool": ("TOOL_CALL", "toolCallId", {"toolCallName": "get_weather"}),
}


def _agui(data: Data) -> tuple[list[bytes], dict[str, Any]]:
    out = [_sse({"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"})]
    runs = [("text", "m1"), ("reasoning", "th1"), ("tool", "c1"), ("tool", "c2"), ("text", "m2")]
    for n, (group, ident) in enumerate(runs):
        if n and not data.draw(st.booleans()):
            continue
        prefix, field, names = _AGUI[group]
        texts = data.draw(pieces)
        if data.draw(st.booleans()):  # the START / CONTENT (ARGS) / END form
            content = "TOOL_CALL_ARGS" if group == "tool" else f"{prefix}_CONTENT"
            out.append(_sse({"type": f"{prefix}_START", field: ident, **names}))
            for text in texts:
                body: dict[str, Any] = {"type": content, field: ident, "delta": text}
                extra = data.draw(st.sampled_from(["", "rawEvent", "subagentRunId"]))
                if extra:  # an event of its own (rawEvent), or a merge key of its own (subagentRunId)
                    body[extra] = {"x": 1} if extra == "rawEvent" else "sub1"
                out.append(_sse(body, ident=data.draw(st.booleans())))
            out.append(_sse({"type": f"{prefix}_END", field: ident}))
            continue
        chunk = f"{prefix}_CHUNK"
        opening = texts.pop(0) if data.draw(st.booleans()) else ""  # an opening chunk may carry text
        out.append(
            _sse({"type": chunk, field: ident, **names, "delta": opening}, ident=data.draw(st.booleans()))
        )
        for text in texts:
            named = {field: ident} if data.draw(st.booleans()) else {}
            if data.draw(st.booleans()):
                named["subagentRunId"] = "sub1"
            out.append(_sse({"type": chunk, **named, "delta": text}, ident=data.draw(st.booleans())))
    return [*out, _sse({"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"})], {}


def _agui_client(events: list[Any]) -> Parts:
    out: Parts = {}
    last: dict[str, str] = {}  # chunk type -> the id its last named chunk gave
    for obj in events:
        kind = obj.get("type", "")
        for group, (prefix, field, _) in _AGUI.items():
            if kind in (f"{prefix}_CONTENT", "TOOL_CALL_ARGS" if group == "tool" else "", f"{prefix}_CHUNK"):
                ident = obj.get(field) or last.get(kind)
                if kind.endswith("_CHUNK") and obj.get(field):
                    last[kind] = obj[field]
                _add(out, (group, ident), obj.get("delta") or "")
    return out


# -- JSON relays, text in SSE, generic SSE ---------------------------------------------------------------
def _relay(data: Data) -> tuple[list[bytes], dict[str, Any]]:
    out = []
    for n, text in enumerate(data.draw(pieces)):
        body: dict[str, Any] = {"text": text}
        shape = data.draw(st.sampled_from(["plain", "numbered", "nested"]))
        if shape == "numbered":  # an envelope of its own: never merged with the last
            body["n"] = n
        elif shape == "nested":  # the field's name twice: no splice
            body["meta"] = {"text": "not the answer"}
        out.append(_sse(body, ident=data.draw(st.booleans())))
    return out, {"dialect": "json", "json_text_field": "text"}


def _lines(data: Data, text: str) -> bytes:
    head = "id: 7\n" if data.draw(st.booleans()) else ""
    return (head + "".join(f"data: {line}\n" for line in text.split("\n")) + "\n").encode()


def _text(data: Data) -> tuple[list[bytes], dict[str, Any]]:
    return [_lines(data, t) for t in data.draw(pieces)], {"dialect": "text"}


def _generic(data: Data) -> tuple[list[bytes], dict[str, Any]]:
    return [b"data: hello\n\n", *(_lines(data, t) for t in data.draw(pieces))], {}


def _sse_client(events: list[tuple[str | None, str]]) -> Parts:
    return {"all": "".join(text for _, text in events)}


def _add(out: Parts, key: object, text: str) -> None:
    out[key] = out.get(key, "") + text


def _json(body: bytes) -> list[Any]:
    return [json.loads(e.data) for e in parse(body) if e.data != "[DONE]"]


def _named(body: bytes) -> list[tuple[str | None, Any]]:
    return [(e.event, json.loads(e.data)) for e in parse(body)]


Draw = Callable[[Data], "tuple[list[bytes], dict[str, Any]]"]
FORMATS: dict[str, tuple[Draw, Callable[[bytes], Parts]]] = {
    "openai": (_chat, lambda b: _chat_client(_json(b))),
    "openai-responses": (_responses, lambda b: _responses_client(_named(b))),
    "anthropic": (_anthropic, lambda b: _anthropic_client(_named(b))),
    "ai-sdk": (_ui, lambda b: _ui_client(_json(b))),
    "ag-ui": (_agui, lambda b: _agui_client(_json(b))),
    "json": (_relay, lambda b: {"all": "".join(o["text"] for o in _json(b))}),
    "text": (_text, lambda b: _sse_client([(e.event, e.data) for e in parse(b)])),
    "sse": (_generic, lambda b: _sse_client([(e.event, e.data) for e in parse(b)])),
}


def draw(data: Data, fmt: str) -> tuple[list[bytes], dict[str, Any]]:
    """A stream of ``fmt`` in encodings the draw picks: (its events, the core settings that read it)."""
    return FORMATS[fmt][0](data)


def client(fmt: str, body: bytes) -> Parts:
    """The text per part a client of ``fmt`` accumulates from ``body`` (parts with no text left out)."""
    return {key: text for key, text in FORMATS[fmt][1](body).items() if text}
