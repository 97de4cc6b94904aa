"""OpenAI Responses: named ``response.*`` events with sequence numbers, ``response.completed`` at the end.

The client knows the answer by its response id, its sequence numbers and its open message: the output
item (``item_id``, ``output_index``) and the ``output_text`` part (``content_index``) its text deltas
went to. A re-run's ``response.created`` / ``response.in_progress`` are dropped, its response id made the
client's and its sequence numbers carried on from the client's last. Its message becomes the client's
open one: its ``output_item.added`` and its first ``content_part.added`` are dropped, its events take the
client's ids, its text deltas lose the text the client has (see :class:`~.common.Matcher`), and every
event that repeats the part's whole text (``output_text.done``, ``content_part.done``,
``output_item.done``, the final response's ``output``) carries what the client got from the deltas: its
text and the continuation.

Text is continued only while the client's one output item is that message, its one part open: a
reasoning item, a second message or a part that had ended is not continued (a re-run writes its own
reasoning, which cannot follow the client's). A re-run whose output begins with anything but a message
fails its attempt.

The API takes no prefill; an anchored re-run's turns go in ``input`` (its text parts are
``output_text``).
"""

from __future__ import annotations

from typing import Any, Final

from .base import REQUEST_FAULTS, Format, Mode, Splicer, Transcript
from .common import Failure, Read, write

_PREAMBLE: Final = frozenset(("response.created", "response.in_progress"))
_FINAL: Final = frozenset(("response.completed", "response.incomplete"))
_ENDS: Final = frozenset(
    ("response.output_text.done", "response.content_part.done", "response.output_item.done", *_FINAL)
)  # the first of them to come ends the text of the client's part
_TEXT: Final = {
    "response.output_text.delta": "text",
    "response.reasoning_text.delta": "reasoning",
    "response.reasoning_summary_text.delta": "reasoning",
}


def _tool(name: str, obj: dict[str, Any]) -> bool:
    """Whether an event is a tool call's: its arguments, or an output item that is not a message."""
    if name.startswith(("response.function_call", "response.mcp_call", "response.custom_tool_call")):
        return True
    item = obj.get("item") if name == "response.output_item.added" else None
    return isinstance(item, dict) and item.get("type") not in ("message", "reasoning")


class ResponsesTranscript(Transcript):
    turns = "input"
    text_part = "output_text"

    def __init__(self, dialect: Format) -> None:
        super().__init__(dialect)
        self.id: Any = None
        self.sequence = -1  # the last sequence number the client has
        self.item: Any = None  # the id of the client's open message, its only output item so far
        self.part = False  # that message's one part, an ``output_text``, is open
        self.others = False  # an item other than that message, a second part, or text elsewhere went out

    def error(self, event: Read) -> Failure | None:
        obj = event.obj
        if obj is None:
            return None
        if event.name == "error":
            kind = obj.get("code") or obj.get("type")
            if kind in REQUEST_FAULTS:
                return None
            return Failure("upstream_error", event.raw, str(obj.get("message")))
        if event.name == "response.failed":
            error = (obj.get("response") or {}).get("error") or {}
            return Failure("upstream_error", event.raw, str(error.get("message")))
        return None

    def see(self, event: Read) -> None:
        obj, name = event.obj, event.name
        if obj is None or name is None:
            return
        if name in ("error", "response.failed"):
            self.ends()
        if isinstance(obj.get("sequence_number"), int):
            self.sequence = max(self.sequence, obj["sequence_number"])
        response = obj.get("response")
        if isinstance(response, dict):
            if self.id is None:
                self.id = response.get("id")
            usage = response.get("usage") or {}
            self.usage.input, self.usage.output = usage.get("input_tokens"), usage.get("output_tokens")
        if name in _TEXT and isinstance(obj.get("delta"), str):
            self.add(_TEXT[name], obj["delta"])
        elif _tool(name, obj):
            self.tool = self.content = True
        self._structure(name, obj)
        if name in _FINAL:
            self.finished = True

    def _structure(self, name: str, obj: dict[str, Any]) -> None:
        """Which message and part are open, and whether anything else went out."""
        item = obj.get("item")
        if name == "response.output_item.added" and isinstance(item, dict):
            first = self.item is None and not self.others and obj.get("output_index") == 0
            if first and item.get("type") == "message":
                self.item = item.get("id")
            else:
                self.item, self.part, self.others = None, False, True
        elif name == "response.content_part.added":
            first = obj.get("item_id") == self.item and not self.part and obj.get("content_index") == 0
            if first and (obj.get("part") or {}).get("type") == "output_text":
                self.part = True
            else:
                self.item, self.part, self.others = None, False, True
        elif name in ("response.output_text.done", "response.content_part.done"):
            self.part = False
        elif name == "response.output_item.done":
            self.item, self.part = None, False
        elif name in _TEXT:
            placed = name == "response.output_text.delta" and self.part and obj.get("item_id") == self.item
            if not placed:  # text the splice could not place
                self.item, self.part, self.others = None, False, True

    def blocked(self, mode: Mode) -> str | None:
        why = super().blocked(mode)
        if why is not None:
            return why
        if self.content and not self.part:
            return (
                "a Responses stream's text is continued only while its one output item, a message, has "
                "its one text part open"
            )
        return None

    def splicer(self, strip: bool, attempt: int) -> Splicer:
        return ResponsesSplicer(self, strip)


class ResponsesSplicer(Splicer):
    def __init__(self, had: ResponsesTranscript, strip: bool) -> None:
        super().__init__(had, strip)
        self._id = had.id
        self._sequence = had.sequence
        self._item = had.item  # the client's open message (None: the re-run's events are all new)
        self._part = had.part  # and its text part is open
        self._theirs: Any = None  # the re-run's message id, once it took the client's over
        self._text = had.text("text") if had.part else ""  # what the client has of that part's text
        self._open = had.part  # the part's text goes on in the re-run: it has not ended yet

    def feed(self, event: Read) -> list[bytes] | Failure:
        obj, name = event.obj, event.name
        if name in _PREAMBLE and self._id is not None:
            return []
        if obj is None:
            return [event.raw]
        out = self._message(str(name), obj) if self._item is not None else [obj]
        if isinstance(out, Failure):
            return out
        # The one event of the splice's own (the text an anchored re-run held) is named by its type.
        return [
            self._write(piece, name if piece.get("type") == obj.get("type") else piece["type"])
            for piece in out
        ]

    def _message(self, name: str, obj: dict[str, Any]) -> list[dict[str, Any]] | Failure:
        """A re-run's event rewritten to continue the client's open message (none: it is the client's)."""
        item = obj.get("item")
        if name == "response.output_item.added" and self._theirs is None:
            if not isinstance(item, dict) or item.get("type") != "message" or obj.get("output_index") != 0:
                return Failure("diverged", None, "the re-run's output does not begin with a message")
            self._theirs = item.get("id")
            return []
        ours = self._theirs is not None and obj.get("item_id") == self._theirs
        first = ours and obj.get("content_index") == 0
        out = {**obj, "item_id": self._item} if ours else dict(obj)
        if name == "response.content_part.added" and first:
            if self._part and (obj.get("part") or {}).get("type") != "output_text":
                return Failure("diverged", None, "the re-run's message does not begin with its text")
            self._open = True
            return [] if self._part else [out]
        if name == "response.output_text.delta" and first and self._open:
            return self._delta(out)
        pieces: list[dict[str, Any]] = []
        if name in _ENDS and self._open:
            closed = self._close()
            if isinstance(closed, Failure):
                return closed
            pieces = closed
        if name in _FINAL and self._theirs is None:
            return Failure("diverged", None, "the re-run's answer has no message to continue the client's")
        if name == "response.output_text.done" and first:
            out["text"] = self._text
        elif name == "response.content_part.done" and first and isinstance(obj.get("part"), dict):
            out["part"] = {**obj["part"], "text": self._text}
        elif isinstance(item, dict) and _is(item, self._theirs):
            out["item"] = self._item_of(item)
        response = out.get("response")
        if isinstance(response, dict) and isinstance(response.get("output"), list):
            output = [self._item_of(i) if _is(i, self._theirs) else i for i in response["output"]]
            out["response"] = {**response, "output": output}
        return [*pieces, out]

    def _delta(self, out: dict[str, Any]) -> list[dict[str, Any]] | Failure:
        new = self.text("text", str(out.get("delta") or ""))
        if new is None:
            return Failure("diverged", None, "the re-run departed from the text the client has")
        self._text += new
        return [{**out, "delta": new}] if new else []

    def _close(self) -> list[dict[str, Any]] | Failure:
        """The part's text ended: what an anchored re-run's matcher held goes out as its last delta."""
        self._open = False
        held = self.matchers["text"].finish()
        if held is None:
            return Failure("diverged", None, "the re-run's continuation could not be placed")
        short = self.short()
        if short is not None:
            return short
        self._text += held
        where = {"item_id": self._item, "output_index": 0, "content_index": 0}
        delta = {"type": "response.output_text.delta", "sequence_number": 0, **where, "delta": held}
        return [{**delta, "logprobs": []}] if held else []

    def _item_of(self, item: dict[str, Any]) -> dict[str, Any]:
        """The re-run's message as the client's: its id, and its first part's text the client's whole."""
        content = item.get("content")
        if isinstance(content, list) and content and isinstance(content[0], dict):
            content = [{**content[0], "text": self._text}, *content[1:]]
        return {**item, "id": self._item, "content": content}

    def _write(self, obj: dict[str, Any], name: str | None) -> bytes:
        """An event with the client's sequence numbers, response id, and usage over every attempt."""
        obj = dict(obj)
        if "sequence_number" in obj:
            self._sequence += 1
            obj["sequence_number"] = self._sequence
        response = obj.get("response")
        if isinstance(response, dict) and self._id is not None:
            obj["response"] = response = {**response, "id": self._id}
        usage = response.get("usage") if isinstance(response, dict) else None
        if isinstance(response, dict) and isinstance(usage, dict):
            response["usage"] = self.summed(usage, "input_tokens", "output_tokens")
        return write(obj, name)


def _is(item: Any, ident: Any) -> bool:
    return isinstance(item, dict) and ident is not None and item.get("id") == ident
