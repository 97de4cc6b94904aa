"""What the middleware knows of each stream format: detection, text deltas to merge, telemetry, errors.

A *delta* is a whole raw event the coalescer may merge with the next ones of the same key; merging keeps
the first event's bytes and splices the concatenated text into its text field, so the rest of the
envelope (ids, model, extra fields) reaches the client as the app wrote it. Anything that is not a
delta is forwarded untouched. Generic SSE never yields deltas: a spec parser must see the app's events.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Hashable
from typing import Any, Final

from .errors import ErrorInfo
from .sse import Event, Parser, encode

Envelope = tuple[bytes, bytes]
"""Bytes before and after the escaped text of a delta event: a merged frame is ``before + text + after``."""
Delta = tuple[Hashable, Envelope, str]


def _loads(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def _escape(text: str) -> bytes:
    """JSON string contents, compact; U+2028/9 escaped because JavaScript parsers of old choke on them."""
    out = json.dumps(text, ensure_ascii=False)[1:-1]
    if "\u2028" in out or "\u2029" in out:
        out = out.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return out.encode("utf-8")


def _simple(raw: bytes) -> tuple[bytes | None, bytes] | None:
    """(event name, data) of an LF-framed event made of at most one ``event`` and one ``data`` line."""
    if b"\r" in raw:
        return None
    lines = raw.rstrip(b"\n").split(b"\n")
    name: bytes | None = None
    if len(lines) == 2 and lines[0].startswith(b"event:"):
        name = lines[0][6:].lstrip(b" ")
        lines = lines[1:]
    if len(lines) != 1 or not lines[0].startswith(b"data:"):
        return None
    data = lines[0][5:]
    return name, data[1:] if data[:1] == b" " else data


def read_event(raw: bytes) -> Event | None:
    """The (last) event in ``raw`` by the full parser, for the rare event ``_simple`` cannot read."""
    parser = Parser()
    events = [e for e in parser.feed(raw) if isinstance(e, Event)]
    return events[-1] if events else None


def _name_and_data(raw: bytes) -> tuple[str | None, bytes]:
    simple = _simple(raw)
    if simple is not None:
        name, data = simple
        return (name.decode("utf-8", "replace") if name is not None else None), data
    event = read_event(raw)
    if event is None:
        return None, b""
    return event.event, event.data.encode("utf-8")


def _span_of(field: bytes) -> re.Pattern[bytes]:
    return re.compile(rb'"' + field + rb'":\s*"((?:[^"\\]|\\.)*)"')


class Dialect:
    """Generic SSE: events pass whole and unchanged; an error is ``event: error``."""

    name = "sse"
    provider = "sse"
    operation = "stream"
    merges = False

    def delta(self, raw: bytes) -> Delta | None:
        return None

    def build(self, envelope: Envelope, text: str) -> bytes:
        return envelope[0] + _escape(text) + envelope[1]

    def content(self, raw: bytes) -> bool:
        """Whether this event carries output (for TTFT / inter-chunk timing)."""
        return True

    def info(self, raw: bytes) -> dict[str, Any] | None:
        """Model, response id, finish reason, usage, when this event carries them."""
        return None

    def wants_info(self, raw: bytes) -> bool:
        """A cheap byte check: whether :meth:`info` is worth parsing this event for."""
        return False

    def error_event(self, info: ErrorInfo) -> bytes:
        body = {"error": {"type": info.type, "message": info.message, "id": info.id}}
        if info.code is not None:
            body["error"]["code"] = info.code
        return _with_retry(info, encode(Event(_dumps(body), "error")))


def _dumps(obj: Any) -> str:
    return (
        json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _with_retry(info: ErrorInfo, frame: bytes) -> bytes:
    return frame if info.retry_ms is None else b"retry: %d\n" % info.retry_ms + frame


def _with_id(info: ErrorInfo) -> str:
    return f"{info.message} (error id: {info.id})"


class OpenAIChat(Dialect):
    """Chat Completions chunks; merges content-only deltas per (id, choice index)."""

    name = "openai"
    provider = "openai"
    operation = "chat"
    merges = True
    _content = _span_of(b"content")

    def delta(self, raw: bytes) -> Delta | None:
        simple = _simple(raw)
        if simple is None or simple[0] is not None or b'"content"' not in simple[1]:
            return None
        obj = _loads(simple[1])
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
        matches = list(self._content.finditer(raw))
        if len(matches) != 1:
            return None
        match = matches[0]
        return (
            (obj.get("id"), choice.get("index")),
            (raw[: match.start(1)], raw[match.end(1) :]),
            delta["content"],
        )

    def content(self, raw: bytes) -> bool:
        if b'"content":"' in raw:
            return b'"content":""' not in raw
        return b'"tool_calls"' in raw or b'"reasoning' in raw

    def info(self, raw: bytes) -> dict[str, Any] | None:
        _, data = _name_and_data(raw)
        obj = _loads(data) if data[:1] == b"{" else None
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
        return b'"finish_reason":"' in raw or b'"usage":{' in raw

    def error_event(self, info: ErrorInfo) -> bytes:
        kind = "server_error" if info.type == "internal_error" else info.type  # OpenAI's word for a 5xx
        body = {"error": {"message": _with_id(info), "type": kind, "param": None, "code": info.code}}
        return _with_retry(info, encode(Event(_dumps(body))))


class OpenAIResponses(Dialect):
    """Responses API events; merges ``response.output_text.delta`` per (item, output, content index)."""

    name = "openai-responses"
    provider = "openai"
    operation = "responses"
    merges = True
    _delta = _span_of(b"delta")

    def delta(self, raw: bytes) -> Delta | None:
        simple = _simple(raw)
        if simple is None or simple[0] != b"response.output_text.delta":
            return None
        obj = _loads(simple[1])
        if not isinstance(obj, dict) or not isinstance(obj.get("delta"), str) or obj.get("logprobs"):
            return None
        matches = list(self._delta.finditer(raw))
        if len(matches) != 1:
            return None
        key = (obj.get("item_id"), obj.get("output_index"), obj.get("content_index"))
        match = matches[0]
        return key, (raw[: match.start(1)], raw[match.end(1) :]), obj["delta"]

    def content(self, raw: bytes) -> bool:
        return b".delta" in raw[:80]

    def info(self, raw: bytes) -> dict[str, Any] | None:
        _, data = _name_and_data(raw)
        obj = _loads(data)
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
            "message": _with_id(info),
            "param": None,
            "sequence_number": 0,
        }
        return _with_retry(info, encode(Event(_dumps(body), "error")))


class Anthropic(Dialect):
    """Messages API events; merges ``content_block_delta`` text/thinking deltas per (index, delta type)."""

    name = "anthropic"
    provider = "anthropic"
    operation = "chat"
    merges = True
    _fields: Final = {"text_delta": _span_of(b"text"), "thinking_delta": _span_of(b"thinking")}
    _types: Final = {"text_delta": "text", "thinking_delta": "thinking"}
    _errors: Final = {
        "internal_error": "api_error",
        "timeout": "timeout_error",
        "server_shutdown": "overloaded_error",
    }

    def delta(self, raw: bytes) -> Delta | None:
        simple = _simple(raw)
        if simple is None or simple[0] != b"content_block_delta":
            return None
        obj = _loads(simple[1])
        delta = obj.get("delta") if isinstance(obj, dict) else None
        if not isinstance(delta, dict) or len(delta) != 2:
            return None
        kind = delta.get("type")
        if not isinstance(kind, str) or kind not in self._types:
            return None
        field = self._types[kind]
        if not isinstance(delta.get(field), str):
            return None
        matches = list(self._fields[kind].finditer(raw))
        if len(matches) != 1:
            return None
        match = matches[0]
        return (obj.get("index"), kind), (raw[: match.start(1)], raw[match.end(1) :]), delta[field]

    def content(self, raw: bytes) -> bool:
        return raw.startswith(b"event: content_block_delta")

    def info(self, raw: bytes) -> dict[str, Any] | None:
        _, data = _name_and_data(raw)
        obj = _loads(data)
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
        body = {"type": "error", "error": {"type": kind, "message": _with_id(info)}}
        return _with_retry(info, encode(Event(_dumps(body), "error")))


class Text(Dialect):
    """Opt-in: generic SSE whose data is plain text tokens. Merges data of consecutive same-name events.

    A UTF-8 character that a byte-level tokenizer split across two events is rejoined before merging.
    """

    name = "text"
    provider = "sse"
    merges = True

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def delta(self, raw: bytes) -> Delta | None:
        simple = _simple(raw)
        if simple is None:
            return None
        name, data = simple
        text = self._decoder.decode(data)
        head = b"event: " + name + b"\n" if name is not None else b""
        return name, (head, b"\n\n"), text

    def build(self, envelope: Envelope, text: str) -> bytes:
        lines = re.split("\r\n|\r|\n", text)
        return envelope[0] + b"".join(b"data: " + line.encode() + b"\n" for line in lines) + b"\n"


class PlainText(Dialect):
    """A text/plain byte stream: merged as text; no in-band error channel (the response is cut instead)."""

    name = "plain"
    provider = "text"
    merges = True

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def delta(self, raw: bytes) -> Delta | None:
        return None, (b"", b""), self._decoder.decode(raw)

    def build(self, envelope: Envelope, text: str) -> bytes:
        return text.encode("utf-8")

    def tail(self) -> str:
        return self._decoder.decode(b"", True)


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
    name, data = _name_and_data(raw)
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
