"""Anthropic Messages: ``message_start``, content blocks by index, ``message_delta``, ``message_stop``.

The client knows the answer by the ``message_start`` it got (the message id, the input usage) and by its
blocks' indices. A re-run's ``message_start`` is dropped. Its text and thinking blocks are held at their
``content_block_start`` until their text decides their fate: a block wholly inside what the client has
is dropped, start to stop; the block in which the re-run catches up with the client's text (or, for a
continuation, its first block of that kind, even an empty one) becomes the client's open block, under
its index; any later block is new, numbered on from the client's last index.

A prefilled re-run's request ends with a final assistant turn holding the client's text. The API rejects
a final assistant turn that ends in whitespace, so that is left out of it; the splice then drops the
whitespace again where the continuation repeats it. A request with extended thinking is not rewritten:
the API requires its final assistant turn to begin with a thinking block, which the middleware does not
have. An anchored re-run's turns go in ``messages``.
"""

from __future__ import annotations

from typing import Any, Final

from .base import Format, Splicer, Transcript
from .common import Failure, Read, write
from .request import Prefilled, append_turn, dump_body, turns_of

_DELTAS: Final = {"text_delta": ("text", "text"), "thinking_delta": ("thinking", "reasoning")}
_BLOCKS: Final = {"text": "text", "thinking": "reasoning"}
_TRIGGERS: Final = frozenset(("overloaded_error", "api_error"))
_UNKNOWN: Final = object()  # a held block whose fate its text has not decided yet


class AnthropicTranscript(Transcript):
    end_event = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    turns = "messages"

    @classmethod
    def prefilled(cls, request: dict[str, Any], text: str) -> Prefilled | None:
        messages, kept = turns_of(request, "messages"), text.rstrip()
        thinking = request.get("thinking")
        if messages is None or (thinking and (thinking or {}).get("type") != "disabled") or not kept:
            return None
        append_turn(messages, kept, {})
        return Prefilled(dump_body({**request, "messages": messages}), text[len(kept) :])

    def __init__(self, dialect: Format) -> None:
        super().__init__(dialect)
        self.open: tuple[int, str] | None = None  # the client's open block: (index, kind of text)
        self.last = -1  # the highest block index the client has

    def error(self, event: Read) -> Failure | None:
        error = event.obj.get("error") if event.name == "error" and event.obj is not None else None
        if not isinstance(error, dict) or error.get("type") not in _TRIGGERS:
            return None
        return Failure("upstream_error", event.raw, f"{error.get('type')}: {error.get('message')}")

    def see(self, event: Read) -> None:
        obj, name = event.obj, event.name
        if name == "error":
            self.ends()
        if obj is None:
            return
        index = obj.get("index")
        if name == "message_start" and isinstance(obj.get("message"), dict):
            usage = obj["message"].get("usage") or {}
            self.usage.input, self.usage.output = usage.get("input_tokens"), usage.get("output_tokens")
        elif name == "content_block_start" and isinstance(index, int):
            self.last = max(self.last, index)
            block = obj.get("content_block") or {}
            kind = _BLOCKS.get(str(block.get("type")))
            if kind is None:
                self.tool = self.tool or "tool" in str(block.get("type"))
                self.content = True
            self.open = (index, kind) if kind is not None else None
        elif name == "content_block_delta":
            delta = obj.get("delta") or {}
            found = _DELTAS.get(str(delta.get("type")))
            if found is not None and isinstance(delta.get(found[0]), str):
                self.add(found[1], delta[found[0]])
            elif delta.get("type") == "input_json_delta":
                self.tool = True
        elif name == "content_block_stop" and self.open is not None and self.open[0] == index:
            self.open = None
        elif name == "message_delta":
            if (obj.get("delta") or {}).get("stop_reason") is not None:
                self.finished = True
            usage = obj.get("usage") or {}
            if usage.get("output_tokens") is not None:
                self.usage.output = usage["output_tokens"]

    def splicer(self, strip: bool, attempt: int) -> Splicer:
        return AnthropicSplicer(self, strip)


class AnthropicSplicer(Splicer):
    def __init__(self, had: AnthropicTranscript, strip: bool) -> None:
        super().__init__(had, strip)
        self._open = had.open  # the client's open block, until a re-run block takes it over
        self._next = had.last + 1
        self._blocks: dict[int, Any] = {}  # re-run index -> client index, None (dropped) or _UNKNOWN
        self._held: dict[int, dict[str, Any]] = {}  # re-run index -> its held content_block_start
        self._texted: set[int] = set()  # held blocks that had a character (wholly the client's, so far)

    def feed(self, event: Read) -> list[bytes] | Failure:
        obj, name = event.obj, event.name
        if name == "message_start":
            usage = (obj or {}).get("message", {}).get("usage") or {}
            self.usage.input, self.usage.output = usage.get("input_tokens"), usage.get("output_tokens")
            return []
        if obj is None or not isinstance(obj.get("index"), int):
            if name == "message_delta" and obj is not None:
                return self.short() or [self._message_delta(obj)]
            return [event.raw]
        index = obj["index"]
        if name == "content_block_start":
            block = obj.get("content_block") or {}
            kind = _BLOCKS.get(str(block.get("type")))
            if kind is not None:
                self._blocks[index], self._held[index] = _UNKNOWN, obj
                return []
            self._blocks[index] = self._new()
            return [write({**obj, "index": self._blocks[index]}, name)]
        target = self._blocks.get(index)
        if name == "content_block_delta":
            return self._delta(index, obj, name)
        if name == "content_block_stop":
            out = self._flush(index) if target is _UNKNOWN else []
            if isinstance(out, Failure):
                return out
            self._held.pop(index, None)
            target = self._blocks.get(index)
            return out + ([] if target in (None, _UNKNOWN) else [write({**obj, "index": target}, name)])
        return [event.raw] if target in (None, _UNKNOWN) else [write({**obj, "index": target}, name)]

    def _delta(self, index: int, obj: dict[str, Any], name: str) -> list[bytes] | Failure:
        delta = obj.get("delta") or {}
        found = _DELTAS.get(str(delta.get("type")))
        text = delta.get(found[0]) if found is not None else None
        if found is None or not isinstance(text, str):  # a signature, citations, tool input
            target = self._blocks.get(index)
            return [] if target in (None, _UNKNOWN) else [write({**obj, "index": target}, name)]
        kind = found[1]
        self._texted.add(index)
        matcher = self.matchers[kind]
        was_matching = matcher.matching
        new = self.text(kind, text)
        if new is None:
            return Failure("diverged", None, "the re-run departed from the text the client has")
        out: list[bytes] = []
        if self._blocks.get(index) is _UNKNOWN:
            if new:
                out.extend(self._place(index, kind))
            elif was_matching and not matcher.matching and self._open is not None and self._open[1] == kind:
                out.extend(self._place(index, kind))  # caught up at its last character: the open block
        target = self._blocks.get(index)
        if new and target not in (None, _UNKNOWN):
            out.append(write({**obj, "index": target, "delta": {**delta, found[0]: new}}, name))
        return out

    def _flush(self, index: int) -> list[bytes] | Failure:
        """A held block stops: what an anchored re-run's matcher held until the text's end, or, with nothing
        held, the empty block's place (see :meth:`_empty`)."""
        start = self._held.get(index) or {}
        if (start.get("content_block") or {}).get("type") == "text":
            held = self.matchers["text"].finish()
            if held is None:
                return Failure("diverged", None, "the re-run's continuation could not be placed")
            if held:
                out = self._place(index, "text")
                delta = {"type": "content_block_delta", "index": self._blocks[index]}
                return [
                    *out,
                    write({**delta, "delta": {"type": "text_delta", "text": held}}, "content_block_delta"),
                ]
        return self._empty(index)

    def _empty(self, index: int) -> list[bytes]:
        """A held block that stops without a character: when the client's open block is of its kind, it
        is that block's continuation with nothing more to say (its stop closes the client's block);
        otherwise it is dropped."""
        kind = _BLOCKS[str((self._held[index].get("content_block") or {}).get("type"))]
        if self._open is None or self._open[1] != kind or index in self._texted:
            return []
        return self._place(index, kind)

    def _place(self, index: int, kind: str) -> list[bytes]:
        """Decide a held block: the client's open block of its kind, or a new one (its start sent)."""
        start = self._held.pop(index)
        if self._open is not None and self._open[1] == kind:
            self._blocks[index], self._open = self._open[0], None
            return []
        self._blocks[index] = self._new()
        return [write({**start, "index": self._blocks[index]}, "content_block_start")]

    def _new(self) -> int:
        self._next += 1
        return self._next - 1

    def _message_delta(self, obj: dict[str, Any]) -> bytes:
        usage = obj.get("usage")
        if not isinstance(usage, dict) or not isinstance(usage.get("output_tokens"), int):
            return write(obj, "message_delta")
        own_input = usage.get("input_tokens")
        final_input = own_input if isinstance(own_input, int) else self.usage.input
        inputs, outputs = self.earlier(final_input)
        self.usage.output = usage["output_tokens"]
        summed = {**usage, "output_tokens": usage["output_tokens"] + outputs}
        if isinstance(final_input, int):
            summed["input_tokens"] = final_input + inputs
        return write({**obj, "usage": summed}, "message_delta")
