"""OpenAI Chat Completions chunks, in full or minimal shape: content, reasoning and tool-call arguments.

Merged: a chunk with one choice whose delta carries exactly one non-empty piece of text, ``content``,
``reasoning_content`` / ``reasoning`` (vLLM, DeepSeek, OpenRouter) or one tool call's
``function.arguments``, and nothing else but nulls. Each kind merges under its own key (chunk id, choice
index, role, kind; tool calls also by tool index and call id), so text, reasoning and arguments never mix.
A chunk with a finish reason, usage, logprobs or any field this reader does not know goes out as it is,
and so does a role change: the role is part of the key. The text such a chunk carries, in any of its
choices, is still read for guards and the output check (:meth:`OpenAIChat.texts`), as the SDK
accumulates it: per choice, and per tool call in a choice.

A tool call's first fragment (with ``id``, ``type``, ``name``) starts its key: when it already carries
arguments it is the envelope the later fragments merge into; with empty arguments it goes out alone.

Recognized by a first event with ``"object": "chat.completion.chunk"``, or whose ``choices`` each hold
a ``delta`` object; it ends with ``data: [DONE]``. A guard's trip sends a chunk with ``finish_reason:
"content_filter"`` for every choice, then ``[DONE]``.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable
from typing import Any, Final

from ..errors import ErrorInfo
from ..sse import Event, encode
from ..wire import (
    REASONING,
    TEXT,
    Delta,
    Part,
    data_object,
    dumps,
    is_done,
    splice,
    string_field,
    token_counts,
    with_id,
)
from .base import Dialect, First, Spliced, data_text, matched, message_of
from .endings import CONTENT_FILTER, Ending, Reads, data_error, detail
from .recovery.openai_chat import ChatTranscript

# The compact shape real servers send, matched in C so the per-token path parses no JSON. It matches only
# what the full parse would also merge, with the same key; anything else takes the full parse.
_SCALAR: Final = rb'"\w+":(?:"[^"\\\r\n]*"|-?\d+|null|true|false)'
_FAST: Final = re.compile(
    rb'data: ?\{"id":"([^"\\\r\n]*)",(?:' + _SCALAR + rb",)*"
    rb'"choices":\[\{"index":(\d+),"delta":\{"content":"((?:[^"\\\r\n]|\\.)*)"\}'
    rb'(?:,"logprobs":null)?,"finish_reason":null\}\](?:,' + _SCALAR + rb")*\}\n\n"
)
# The same compact shape with no text to merge: a role chunk (``"role"`` and an empty ``"content"``), a
# finish chunk, and ``[DONE]``. The full read finds no delta in any event it matches (nothing but a role
# and an empty content in the delta, or a finish reason), so it answers for the parse on a stream's first
# and last events.
_BARE: Final = re.compile(
    rb'data: ?(?:\[DONE\]|\{"id":"[^"\\\r\n]*",(?:' + _SCALAR + rb",)*"
    rb'"choices":\[\{"index":\d+,"delta":\{(?:"role":"[^"\\\r\n]*"(?:,"content":"")?|"content":"")?\}'
    rb'(?:,"logprobs":null)?,"finish_reason":(?:null|"[^"\\\r\n]*")\}\](?:,' + _SCALAR + rb")*\})\n\n"
)
_TEXT_KINDS: Final = ("content", "reasoning_content", "reasoning")
_FIELDS: Final = {name: string_field(name.encode()) for name in (*_TEXT_KINDS, "arguments")}
_TOOL_KEYS: Final = frozenset(("index", "id", "type", "function"))
_FUNCTION_KEYS: Final = frozenset(("name", "arguments"))
_CHOICE_KEYS: Final = frozenset(("index", "delta"))
_SPACED: Final = re.compile(rb'\{"[^"\\]*": ')


def _scalar(value: object) -> bool:
    """Fit for a merge key (hashable, and what an id or index can sensibly be)."""
    return value is None or isinstance(value, (str, int))


def _tool_fragment(entry: object) -> tuple[int, Any, str] | None:
    """(tool index, call id or None, arguments) of one ``tool_calls`` entry that only adds arguments."""
    if not isinstance(entry, dict):
        return None
    index, function, call_id = entry.get("index"), entry.get("function"), entry.get("id")
    if not isinstance(index, int) or not isinstance(function, dict) or not _scalar(call_id):
        return None
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        return None
    if any(v is not None for k, v in entry.items() if k not in _TOOL_KEYS):
        return None
    if any(v is not None for k, v in function.items() if k not in _FUNCTION_KEYS):
        return None
    return index, call_id, arguments


def _mergeable(delta: dict[str, Any]) -> tuple[str, str, tuple[int, Any] | None] | None:
    """(kind, text, (tool index, call id) for arguments) of a delta with exactly one piece of text."""
    found: tuple[str, str, tuple[int, Any] | None] | None = None
    for name, value in delta.items():
        if name == "role" or value is None or value == "" or value == []:
            continue
        if found is not None:
            return None
        if name in _TEXT_KINDS and isinstance(value, str):
            found = (name, value, None)
        elif name == "tool_calls" and isinstance(value, list) and len(value) == 1:
            fragment = _tool_fragment(value[0])
            if fragment is None:
                return None
            found = ("arguments", fragment[2], fragment[:2])
        else:
            return None
    return found


class ChatEnding(Ending):
    """A chunk with ``finish_reason: "content_filter"`` for every choice the stream used, then
    ``[DONE]``; the chunk keeps the stream's id and model."""

    def __init__(self, dialect: Reads) -> None:
        super().__init__(dialect)
        self._head: dict[str, Any] | None = None

    def see(self, raw: bytes) -> None:
        if self._head is None and b'"id"' in raw:
            obj = self._dialect.data_object(raw)
            if obj is not None and isinstance(obj.get("id"), str):
                self._head = {k: obj[k] for k in ("id", "created", "model", "system_fingerprint") if k in obj}

    def frame(self, info: ErrorInfo, keys: Iterable[Hashable]) -> bytes | None:
        # A part's key is (choice index, kind, ...): see OpenAIChat.part_key.
        found = {key[0] for key in keys if isinstance(key, tuple) and key and isinstance(key[0], int)}
        choices = sorted(found) or [0]
        head = self._head or {"id": f"chatcmpl-{info.id}", "model": ""}
        chunk = {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": i, "delta": {}, "finish_reason": CONTENT_FILTER} for i in choices],
            # Not "error": the openai SDK raises on a chunk that has one. The SDKs let this through.
            CONTENT_FILTER: detail(info),
        }
        return encode(Event(dumps(chunk))) + b"data: [DONE]\n\n"


class OpenAIChat(Spliced):
    """Chat Completions chunks; see the module's docstring for what merges."""

    name = "openai"
    provider = "openai"
    operation = "chat"
    ending = ChatEnding
    end_marker = "data: [DONE]"
    recovery = ChatTranscript

    @classmethod
    def detect(cls, first: First) -> Dialect | None:
        if first.name is not None:
            return None
        if b'"chat.completion.chunk"' in first.data[:400]:  # the usual first chunk: no parse
            return for_chunk(first.data)
        obj = first.obj
        choices = obj.get("choices") if isinstance(obj, dict) else None
        if isinstance(choices, list) and choices and all(_has_delta(c) for c in choices):
            return for_chunk(first.data)
        return None

    @classmethod
    def is_end(cls, raw: bytes) -> bool:
        return is_done(raw)

    @classmethod
    def reported_error(cls, raw: bytes) -> str | None:
        obj = data_object(raw) if b'"error"' in raw else None
        if obj is not None and isinstance(obj.get("error"), (dict, str)):
            return message_of(obj) or data_text(raw)
        return None

    def __init__(self) -> None:
        super().__init__()
        self._calls: dict[tuple[Any, int], Any] = {}  # (choice, tool index) -> the call id its head gave
        self._names: dict[tuple[Any, int], str] = {}  # (choice, tool index) -> the function's name

    def part(self, key: Hashable) -> Part:
        if not isinstance(key, tuple) or len(key) < 4:
            return TEXT
        if key[3] == "arguments":
            return Part("tool_arguments", self._names.get((key[1], key[4])))
        return TEXT if key[3] == "content" else REASONING

    def part_key(self, key: Hashable) -> Hashable:
        # (chunk id, choice, role, kind[, tool index, call id]) -> (choice, kind[, tool index]): the SDK
        # adds a choice's text by its index alone, whatever the chunk's id or role.
        if not isinstance(key, tuple) or len(key) < 4:
            return key
        return (key[1], key[3], *key[4:5])

    def see(self, raw: bytes) -> None:
        obj = self.data_object(raw)
        if obj is not None:
            self._learn_names(obj)

    def texts(self, raw: bytes) -> list[tuple[Hashable, str]]:
        obj = self.event_json(raw)
        choices = obj.get("choices") if isinstance(obj, dict) else None
        if not isinstance(obj, dict) or not isinstance(choices, list):
            return []
        self._learn_names(obj)
        chunk = obj.get("id") if _scalar(obj.get("id")) else None
        out: list[tuple[Hashable, str]] = []
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                continue
            index, role = choice.get("index"), delta.get("role")
            head = (chunk, index if _scalar(index) else None, role if _scalar(role) else None)
            out += [((*head, k), delta[k]) for k in _TEXT_KINDS if isinstance(delta.get(k), str) and delta[k]]
            calls = delta.get("tool_calls")
            for call in calls if isinstance(calls, list) else ():
                function = call.get("function") if isinstance(call, dict) else None
                arguments = function.get("arguments") if isinstance(function, dict) else None
                if not isinstance(call, dict) or not isinstance(call.get("index"), int):
                    continue
                slot = (head[1], call["index"])
                if isinstance(call.get("id"), str):
                    self._calls[slot] = call["id"]
                if isinstance(arguments, str) and arguments:
                    out.append(((*head, "arguments", slot[1], self._calls.get(slot)), arguments))
        return out

    def _learn_names(self, obj: dict[str, Any]) -> None:
        """The function names a chunk's tool-call heads give, by (choice, tool index)."""
        choices = obj.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            delta = choice.get("delta") if isinstance(choice, dict) else None
            calls = delta.get("tool_calls") if isinstance(delta, dict) else None
            for call in calls if isinstance(calls, list) else ():
                function = call.get("function") if isinstance(call, dict) else None
                name = function.get("name") if isinstance(function, dict) else None
                if isinstance(name, str) and isinstance(call.get("index"), int):
                    self._names[(choice.get("index"), call["index"])] = name

    def read(self, raw: bytes) -> Delta | None:
        # find(), not `in` (see content()); a regex that fails costs as much as one that matches.
        if raw.find(b'"delta":{"content":"') >= 0:
            fast = _FAST.fullmatch(raw)
            if fast is not None:
                found = matched(fast, (fast.group(1).decode(), int(fast.group(2)), None, "content"))
                if found is not None:
                    return found
        elif raw is not self._parsed_raw and _BARE.fullmatch(raw) is not None:
            return None  # what the parse finds; an event parsed already (for telemetry) is read from it
        obj = self.data_object(raw)
        if obj is None or obj.get("usage") or not _scalar(obj.get("id")):
            return None
        choices = obj.get("choices")
        if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
            return None
        choice = choices[0]
        delta, index = choice.get("delta"), choice.get("index")
        if not isinstance(delta, dict) or not _scalar(index):
            return None
        if any(v is not None for k, v in choice.items() if k not in _CHOICE_KEYS):
            return None  # a finish reason, logprobs, or something this reader does not know
        role = delta.get("role")
        found_text = _mergeable(delta)
        if found_text is None or not _scalar(role):
            return None
        kind, text, tool = found_text
        key: tuple[Any, ...] = (obj.get("id"), index, role, kind)
        if tool is not None:
            self._learn_names(obj)
            slot = (index, tool[0])
            if tool[1] is not None:
                self._calls[slot] = tool[1]
            key += (tool[0], self._calls.get(slot))
        envelope = splice(_FIELDS[kind], raw)
        return None if envelope is None else Delta(key, envelope, text)

    def content(self, raw: bytes) -> bool:
        # find(), not `in`: `in` first tries a bytes needle as an int, and raises and clears a TypeError
        # on every call (this runs per event; bench/pipeline.py).
        if raw.find(b'"content":"') >= 0:
            return raw.find(b'"content":""') < 0
        return raw.find(b'"tool_calls"') >= 0 or raw.find(b'"reasoning') >= 0

    def info(self, raw: bytes) -> dict[str, Any] | None:
        obj = self.event_json(raw)
        if not isinstance(obj, dict):
            return None
        out: dict[str, Any] = {"model": obj.get("model"), "response_id": obj.get("id")}
        for choice in obj.get("choices") or ():
            if isinstance(choice, dict) and choice.get("finish_reason"):
                out["finish_reason"] = choice["finish_reason"]
        out.update(token_counts(obj.get("usage"), "prompt_tokens", "completion_tokens"))
        return out

    def wants_info(self, raw: bytes) -> bool:
        return raw.find(b'"finish_reason":"') >= 0 or raw.find(b'"usage":{') >= 0

    def error_event(self, info: ErrorInfo) -> bytes:
        kind = "server_error" if info.type == "internal_error" else info.type  # OpenAI's word for a 5xx
        body = {"error": {"message": with_id(info), "type": kind, "param": None, "code": info.code}}
        return data_error(info, body)


class SpacedOpenAIChat(OpenAIChat):
    """Chunks serialized with ``json.dumps``' default separators (``"key": value``), as hand-written
    relays send them: the same merging; telemetry's byte checks look for the spaced needles."""

    def content(self, raw: bytes) -> bool:
        if raw.find(b'"content": "') >= 0:
            return raw.find(b'"content": ""') < 0
        return raw.find(b'"tool_calls"') >= 0 or raw.find(b'"reasoning') >= 0

    def wants_info(self, raw: bytes) -> bool:
        return raw.find(b'"finish_reason": "') >= 0 or raw.find(b'"usage": {') >= 0


def _has_delta(choice: object) -> bool:
    return isinstance(choice, dict) and isinstance(choice.get("delta"), dict)


def for_chunk(data: bytes) -> OpenAIChat:
    """The reader for a stream whose first chunk is ``data``: spaced when its first key is."""
    return SpacedOpenAIChat() if _SPACED.match(data) else OpenAIChat()
