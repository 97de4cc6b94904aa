"""The LLM providers' stream formats: OpenAI Chat Completions, OpenAI Responses, Anthropic Messages."""

from __future__ import annotations

import re
from typing import Any, Final

from .dialects import Delta, Dialect, Text
from .errors import ErrorInfo
from .sse import Event, encode
from .wire import (
    Envelope,
    dumps,
    loads,
    name_and_data,
    simple,
    splice,
    string_field,
    unescape,
    with_id,
    with_retry,
)

# Fast paths: the compact shapes real servers send, matched in C so the per-token path parses no JSON.
# Each matches only what the slow path (a full parse) would also merge; anything else takes the slow path.
_SCALAR: Final = rb'"\w+":(?:"[^"\\\r\n]*"|-?\d+|null|true|false)'
_OPENAI_FAST: Final = re.compile(
    rb'data: ?\{"id":"([^"\\\r\n]*)",(?:' + _SCALAR + rb",)*"
    rb'"choices":\[\{"index":(\d+),"delta":\{"content":"((?:[^"\\\r\n]|\\.)*)"\}'
    rb'(?:,"logprobs":null)?,"finish_reason":null\}\](?:,' + _SCALAR + rb")*\}\n\n"
)
_ANTHROPIC_FAST: Final = re.compile(
    rb'event: ?content_block_delta\ndata: ?\{"type":"content_block_delta","index":(\d+),'
    rb'"delta":\{"type":"(text|thinking)_delta","\2":"((?:[^"\\\r\n]|\\.)*)"\}\}\n\n'
)


def _same_envelope(last: tuple[bytes, bytes, Any] | None, raw: bytes) -> tuple[Any, Envelope, str] | None:
    """The previous fast-path match's envelope again, with new text that needs no unescaping: what the
    regex would return for ``raw``, without running it (consecutive deltas differ only in their text)."""
    if last is None:
        return None
    before, after, key = last
    if not (raw.startswith(before) and raw.endswith(after)):
        return None
    end = len(raw) - len(after)
    if end < len(before):
        return None
    contents = raw[len(before) : end]
    if 34 in contents or 92 in contents or 10 in contents or 13 in contents:  # " \ LF CR: int needles
        return None  # quotes or escapes: the regex (and unescape) decide
    try:
        return key, (before, after), contents.decode("utf-8")
    except UnicodeDecodeError:
        return None


class OpenAIChat(Dialect):
    """Chat Completions chunks; merges content-only deltas per (id, choice index)."""

    name = "openai"
    provider = "openai"
    operation = "chat"
    merges = True
    _content = string_field(b"content")

    _last: tuple[bytes, bytes, Any] | None = None  # the last fast match: (before, after, key)

    def delta(self, raw: bytes) -> Delta | None:
        same = _same_envelope(self._last, raw)
        if same is not None:
            return same
        fast = _OPENAI_FAST.fullmatch(raw)
        if fast is not None:
            text = unescape(fast.group(3))
            if text is not None:
                before, after = raw[: fast.start(3)], raw[fast.end(3) :]
                key = (fast.group(1).decode(), int(fast.group(2)))
                self._last = (before, after, key)
                return key, (before, after), text
        event = simple(raw)
        if event is None or event[0] is not None or b'"content"' not in event[1]:
            return None
        obj = loads(event[1])
        if not isinstance(obj, dict) or obj.get("usage"):
            return None
        choices = obj.get("choices")
        if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
            return None
        choice = choices[0]
        delta = choice.get("delta")
        if choice.get("finish_reason") is not None or choice.get("logprobs") is not None:
            return None
        if not isinstance(delta, dict) or set(delta) != {"content"} or not isinstance(delta["content"], str):
            return None
        envelope = splice(self._content, raw)
        return (
            None if envelope is None else ((obj.get("id"), choice.get("index")), envelope, delta["content"])
        )

    def content(self, raw: bytes) -> bool:
        # find(), not `in`: a bytes needle in `in` costs ~200 ns more on CPython 3.11 (it is first tried
        # as an int, and the TypeError raised and cleared).
        if raw.find(b'"content":"') >= 0:
            return raw.find(b'"content":""') < 0
        return raw.find(b'"tool_calls"') >= 0 or raw.find(b'"reasoning') >= 0

    def info(self, raw: bytes) -> dict[str, Any] | None:
        _, data = name_and_data(raw)
        obj = loads(data) if data[:1] == b"{" else None
        if not isinstance(obj, dict):
            return None
        out: dict[str, Any] = {"model": obj.get("model"), "response_id": obj.get("id")}
        for choice in obj.get("choices") or ():
            if isinstance(choice, dict) and choice.get("finish_reason"):
                out["finish_reason"] = choice["finish_reason"]
        usage = obj.get("usage")
        if isinstance(usage, dict):
            out["input_tokens"] = usage.get("prompt_tokens")
            out["output_tokens"] = usage.get("completion_tokens")
        return out

    def wants_info(self, raw: bytes) -> bool:
        return raw.find(b'"finish_reason":"') >= 0 or raw.find(b'"usage":{') >= 0

    def error_event(self, info: ErrorInfo) -> bytes:
        kind = "server_error" if info.type == "internal_error" else info.type  # OpenAI's word for a 5xx
        body = {"error": {"message": with_id(info), "type": kind, "param": None, "code": info.code}}
        return with_retry(info, encode(Event(dumps(body))))


class OpenAIResponses(Dialect):
    """Responses API events; merges ``response.output_text.delta`` per (item, output, content index)."""

    name = "openai-responses"
    provider = "openai"
    operation = "responses"
    merges = True
    _delta = string_field(b"delta")

    def delta(self, raw: bytes) -> Delta | None:
        event = simple(raw)
        if event is None or event[0] != b"response.output_text.delta":
            return None
        obj = loads(event[1])
        if not isinstance(obj, dict) or not isinstance(obj.get("delta"), str) or obj.get("logprobs"):
            return None
        envelope = splice(self._delta, raw)
        key = (obj.get("item_id"), obj.get("output_index"), obj.get("content_index"))
        return None if envelope is None else (key, envelope, obj["delta"])

    def content(self, raw: bytes) -> bool:
        return b".delta" in raw[:80]

    def info(self, raw: bytes) -> dict[str, Any] | None:
        _, data = name_and_data(raw)
        obj = loads(data)
        response = obj.get("response") if isinstance(obj, dict) else None
        if not isinstance(response, dict):
            return None
        out: dict[str, Any] = {"model": response.get("model"), "response_id": response.get("id")}
        if response.get("status") in ("completed", "incomplete", "failed"):
            out["finish_reason"] = response["status"]
        usage = response.get("usage")
        if isinstance(usage, dict):
            out["input_tokens"] = usage.get("input_tokens")
            out["output_tokens"] = usage.get("output_tokens")
        return out

    def wants_info(self, raw: bytes) -> bool:
        return raw.startswith(
            (
                b"event: response.created",
                b"event: response.completed",
                b"event: response.incomplete",
                b"event: response.failed",
            )
        )

    def error_event(self, info: ErrorInfo) -> bytes:
        body = {
            "type": "error",
            "code": info.code or info.type,
            "message": with_id(info),
            "param": None,
            "sequence_number": 0,
        }
        return with_retry(info, encode(Event(dumps(body), "error")))


class Anthropic(Dialect):
    """Messages API events; merges ``content_block_delta`` text/thinking deltas per (index, delta type)."""

    name = "anthropic"
    provider = "anthropic"
    operation = "chat"
    merges = True
    _fields: Final = {"text_delta": string_field(b"text"), "thinking_delta": string_field(b"thinking")}
    _types: Final = {"text_delta": "text", "thinking_delta": "thinking"}
    _errors: Final = {
        "internal_error": "api_error",
        "timeout": "timeout_error",
        "server_shutdown": "overloaded_error",
    }

    _last: tuple[bytes, bytes, Any] | None = None  # the last fast match: (before, after, key)

    def delta(self, raw: bytes) -> Delta | None:
        same = _same_envelope(self._last, raw)
        if same is not None:
            return same
        fast = _ANTHROPIC_FAST.fullmatch(raw)
        if fast is not None:
            text = unescape(fast.group(3))
            if text is not None:
                before, after = raw[: fast.start(3)], raw[fast.end(3) :]
                key = (int(fast.group(1)), fast.group(2).decode() + "_delta")
                self._last = (before, after, key)
                return key, (before, after), text
        event = simple(raw)
        if event is None or event[0] != b"content_block_delta":
            return None
        obj = loads(event[1])
        delta = obj.get("delta") if isinstance(obj, dict) else None
        if not isinstance(delta, dict) or len(delta) != 2:
            return None
        kind = delta.get("type")
        if not isinstance(kind, str) or kind not in self._types:
            return None
        field = self._types[kind]
        if not isinstance(delta.get(field), str):
            return None
        envelope = splice(self._fields[kind], raw)
        return None if envelope is None else ((obj.get("index"), kind), envelope, delta[field])

    def content(self, raw: bytes) -> bool:
        return raw.startswith(b"event: content_block_delta")

    def info(self, raw: bytes) -> dict[str, Any] | None:
        _, data = name_and_data(raw)
        obj = loads(data)
        if not isinstance(obj, dict):
            return None
        out: dict[str, Any] = {}
        message = obj.get("message")
        if isinstance(message, dict):
            out.update(model=message.get("model"), response_id=message.get("id"))
            usage = message.get("usage") or {}
            out["input_tokens"] = usage.get("input_tokens")
        delta = obj.get("delta")
        if isinstance(delta, dict) and delta.get("stop_reason"):
            out["finish_reason"] = delta["stop_reason"]
        usage = obj.get("usage")
        if isinstance(usage, dict) and usage.get("output_tokens") is not None:
            out["output_tokens"] = usage["output_tokens"]
        return out or None

    def wants_info(self, raw: bytes) -> bool:
        return raw.startswith((b"event: message_start", b"event: message_delta"))

    def error_event(self, info: ErrorInfo) -> bytes:
        kind = self._errors.get(info.type, info.type)
        body = {"type": "error", "error": {"type": kind, "message": with_id(info)}}
        return with_retry(info, encode(Event(dumps(body), "error")))


_BY_NAME: Final[dict[str, type[Dialect]]] = {
    "sse": Dialect,
    "openai": OpenAIChat,
    "openai-responses": OpenAIResponses,
    "anthropic": Anthropic,
    "text": Text,
}
_ANTHROPIC_EVENTS: Final = (b"message_start", b"content_block_start", b"content_block_delta", b"ping")


def named(name: str) -> Dialect:
    return _BY_NAME[name]()


def detect(raw: bytes) -> Dialect | None:
    """The dialect of a stream from its first event with data; None while there is none yet."""
    name, data = name_and_data(raw)
    if not data and name is None:
        return None
    if name is not None:
        if name.startswith("response."):
            return OpenAIResponses()
        if name.encode() in _ANTHROPIC_EVENTS:
            return Anthropic()
        return Dialect()
    if b'"chat.completion.chunk"' in data[:400]:
        return OpenAIChat()
    return Dialect()
