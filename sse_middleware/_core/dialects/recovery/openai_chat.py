"""OpenAI Chat Completions: ``data:`` chunks, ``data: [DONE]`` at the end, ``{"error": ...}`` on failure.

The client knows the answer by the first chunk's ``id`` (and ``created``); its role came in the first
chunk. A re-run's chunks take that id, lose the role the client already has and the text it already has
(see :class:`~.common.Matcher`), and its usage chunk counts the failed attempts too.

A prefilled re-run's request ends with a final assistant message holding the client's text with
``"prefix": true`` (what DeepSeek's and Mistral's chat APIs read), plus ``continue_final_message: true,
add_generation_prompt: false`` (what vLLM's OpenAI-compatible server reads) under the body's
``extra_body`` key: a relay that forwards the body with the official SDK (``create(**body)``) hands them
to it as ``extra_body``, which it merges into the request's JSON (as top-level keys they are a
``TypeError`` in the SDK). An anchored re-run's turns go in ``messages``.
"""

from __future__ import annotations

from typing import Any, Final

from .base import REQUEST_FAULTS, Format, Splicer, Transcript
from .common import DONE, Failure, Read, write
from .request import Prefilled, append_turn, dump_body, turns_of

_KINDS: Final = {"content": "text", "reasoning_content": "reasoning", "reasoning": "reasoning"}
_VLLM: Final = {"continue_final_message": True, "add_generation_prompt": False}


def _is_done(event: Read) -> bool:
    return event.name is None and event.data == b"[DONE]"


class ChatTranscript(Transcript):
    end_event = DONE
    turns = "messages"

    @classmethod
    def prefilled(cls, request: dict[str, Any], text: str) -> Prefilled | None:
        messages = turns_of(request, "messages")
        if messages is None:
            return None
        append_turn(messages, text, {"prefix": True})
        extra = request.get("extra_body")
        extra = {**(extra if isinstance(extra, dict) else {}), **_VLLM}
        return Prefilled(dump_body({**request, "messages": messages, "extra_body": extra}), "")

    def __init__(self, dialect: Format) -> None:
        super().__init__(dialect)
        self.id: Any = None
        self.created: Any = None
        self.roles: set[Any] = set()  # the choices whose role the client has

    def error(self, event: Read) -> Failure | None:
        obj = event.obj
        error = obj.get("error") if obj is not None and "choices" not in obj else None
        if not isinstance(error, dict):
            return None
        kind = error.get("type") or error.get("code")
        if kind in REQUEST_FAULTS:
            return None
        return Failure("upstream_error", event.raw, str(error.get("message") or kind))

    def see(self, event: Read) -> None:
        obj = event.obj
        if obj is None:
            return
        if "error" in obj and "choices" not in obj:
            self.ends()
        if self.id is None and isinstance(obj.get("id"), str):
            self.id, self.created = obj["id"], obj.get("created")
        for choice in obj.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                if delta.get("role") is not None:
                    self.roles.add(choice.get("index"))
                for field, kind in _KINDS.items():
                    if isinstance(delta.get(field), str):
                        self.add(kind, delta[field])
                if delta.get("tool_calls") or delta.get("function_call"):
                    self.tool = self.content = True
            if choice.get("finish_reason") is not None:
                self.finished = True
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self.usage.input, self.usage.output = usage.get("prompt_tokens"), usage.get("completion_tokens")

    def splicer(self, strip: bool, attempt: int) -> Splicer:
        return ChatSplicer(self, strip)


class ChatSplicer(Splicer):
    def __init__(self, had: ChatTranscript, strip: bool) -> None:
        super().__init__(had, strip)
        self._id, self._created, self._roles = had.id, had.created, set(had.roles)

    def feed(self, event: Read) -> list[bytes] | Failure:
        obj = event.obj
        if _is_done(event):
            return self.short() or [event.raw]
        if obj is None:
            return [event.raw]
        out = dict(obj)
        if self._id is not None and "id" in out:
            out["id"] = self._id
            if self._created is not None and "created" in out:
                out["created"] = self._created
        choices = out.get("choices")
        if isinstance(choices, list) and choices:
            kept: list[Any] = []
            for choice in choices:
                spliced = self._choice(choice)
                if isinstance(spliced, Failure):
                    return spliced
                if spliced is not None:
                    kept.append(spliced)
            if not kept and not out.get("usage"):
                return []  # all of it is what the client has (a role chunk, a repeated text)
            out["choices"] = kept
        usage = out.get("usage")
        if isinstance(usage, dict):
            out["usage"] = self.summed(usage, "prompt_tokens", "completion_tokens")
        return [event.raw if out == obj else write(out)]

    def _choice(self, choice: Any) -> dict[str, Any] | Failure | None:
        """A choice with what the client has taken out; None when nothing is left of it."""
        if not isinstance(choice, dict) or not isinstance(choice.get("delta"), dict):
            return choice if isinstance(choice, dict) else None
        delta = dict(choice["delta"])
        index = choice.get("index")
        if delta.get("role") is not None:
            if index in self._roles:
                del delta["role"]
            else:
                self._roles.add(index)  # the client had no chunk of this choice yet: it needs the role
        for field, kind in _KINDS.items():
            value = delta.get(field)
            if isinstance(value, str) and value:
                new = self.text(kind, value)
                if new is None:
                    return Failure("diverged", None, "the re-run departed from the text the client has")
                if new:
                    delta[field] = new
                else:
                    del delta[field]
        finish = choice.get("finish_reason")
        if finish is not None:
            held = self.matchers["text"].finish()  # what an anchored re-run held is decided at its end
            if held is None:
                return Failure("diverged", None, "the re-run's continuation could not be placed")
            if held:
                delta["content"] = (delta.get("content") or "") + held
            short = self.short()
            if short is not None:
                return short
        if (
            finish is None
            and choice.get("logprobs") is None
            and not any(value not in (None, "", []) for value in delta.values())
        ):
            return None
        return {**choice, "delta": delta}
