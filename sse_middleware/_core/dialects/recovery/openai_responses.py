"""OpenAI Responses: named ``response.*`` events with sequence numbers, ``response.completed`` at the end.

Only a retry is spliced here: a Responses stream repeats its text in every ``*.done`` event and in the
final response object, so a continuation would have to rewrite each of those with text from two
attempts; until that is built, ``continue`` treats text that reached the client as not recoverable.
What a retry needs: the re-run's ``response.created`` / ``response.in_progress`` dropped, its response
id made the client's, and its sequence numbers carried on from the client's last.

The API takes no prefill; an anchored re-run's turns go in ``input`` (its text parts are
``output_text``).
"""

from __future__ import annotations

from typing import Any, Final

from .base import REQUEST_FAULTS, Format, Mode, Splicer, Transcript
from .common import Failure, Read, write

_PREAMBLE: Final = frozenset(("response.created", "response.in_progress"))
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
        if name in ("response.completed", "response.incomplete"):
            self.finished = True

    def blocked(self, mode: Mode) -> str | None:
        if self.content:
            return "a Responses stream is retried only before its text reaches the client"
        return super().blocked(mode)

    def splicer(self, strip: bool, attempt: int) -> Splicer:
        return ResponsesSplicer(self, strip)


class ResponsesSplicer(Splicer):
    def __init__(self, had: ResponsesTranscript, strip: bool) -> None:
        super().__init__(had, strip)
        self._id = had.id
        self._sequence = had.sequence

    def feed(self, event: Read) -> list[bytes] | Failure:
        obj, name = event.obj, event.name
        if name in _PREAMBLE and self._id is not None:
            return []
        if obj is None:
            return [event.raw]
        out = dict(obj)
        if "sequence_number" in out:
            self._sequence += 1
            out["sequence_number"] = self._sequence
        response = out.get("response")
        if isinstance(response, dict) and self._id is not None:
            out["response"] = response = {**response, "id": self._id}
        usage = response.get("usage") if isinstance(response, dict) else None
        if isinstance(response, dict) and isinstance(usage, dict):
            response["usage"] = self.summed(usage, "input_tokens", "output_tokens")
        return [write(out, name)]
