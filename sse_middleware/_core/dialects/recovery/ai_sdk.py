"""The Vercel AI SDK's UI message stream: ``start``, steps, text and reasoning parts by id, ``finish``.

Parts are placed as Anthropic's blocks are (see :mod:`.anthropic`), by id instead of index: a re-run's
``start`` is dropped, so is its ``start-step`` while the client's step is open, and a part that continues
the client's open part of its kind takes that part's id. A new part keeps its own id unless the client
already knows that id for another part.

The request of an AI SDK chat (its UI messages) is the app's own shape: it is never rewritten for a
continuation.
"""

from __future__ import annotations

from typing import Any, Final

from .base import Format, Splicer, Transcript
from .common import Failure, Read, write

_STARTS: Final = {"text-start": "text", "reasoning-start": "reasoning"}
_DELTAS: Final = {"text-delta": "text", "reasoning-delta": "reasoning"}
_ENDS: Final = {"text-end": "text", "reasoning-end": "reasoning"}
_UNKNOWN: Final = object()


def _type(event: Read) -> Any:
    return event.obj.get("type") if event.obj is not None else None


class UITranscript(Transcript):
    def __init__(self, dialect: Format) -> None:
        super().__init__(dialect)
        self.open: dict[str, str] = {}  # id -> kind, for the client's parts started and not ended
        self.ids: set[str] = set()
        self.step = False  # the client has a step started and not finished

    def error(self, event: Read) -> Failure | None:
        if _type(event) != "error" or event.obj is None:
            return None
        return Failure("upstream_error", event.raw, str(event.obj.get("errorText")))

    def see(self, event: Read) -> None:
        kind, obj = _type(event), event.obj
        if obj is None:
            return
        ident = obj.get("id")
        if kind in _STARTS and isinstance(ident, str):
            self.open[ident] = _STARTS[kind]
            self.ids.add(ident)
        elif kind in _DELTAS and isinstance(obj.get("delta"), str):
            self.add(_DELTAS[kind], obj["delta"])
        elif kind in _ENDS and isinstance(ident, str):
            self.open.pop(ident, None)
        elif kind in ("start-step", "finish-step"):
            self.step = kind == "start-step"
        elif isinstance(kind, str) and kind.startswith("tool-"):
            self.tool = self.content = True
        elif kind == "error":
            self.ends()
        elif kind == "finish":
            self.finished = True

    def splicer(self, strip: bool, attempt: int) -> Splicer:
        return UISplicer(self, strip, attempt)


class UISplicer(Splicer):
    def __init__(self, had: UITranscript, strip: bool, attempt: int) -> None:
        super().__init__(had, strip)
        self._open = dict(had.open)  # the client's open parts no re-run part has taken over yet
        self._ids = set(had.ids)
        self._step = had.step
        self._suffix = f"-r{attempt}"
        self._parts: dict[str, Any] = {}  # re-run id -> client id, or _UNKNOWN while held
        self._held: dict[str, dict[str, Any]] = {}
        self._texted: set[str] = set()  # held parts that had a character (wholly the client's, so far)

    def feed(self, event: Read) -> list[bytes] | Failure:
        kind, obj = _type(event), event.obj
        if obj is None:
            return [event.raw]
        ident = obj.get("id")
        if kind == "start":
            return []
        if kind == "start-step" and self._step:
            self._step = False  # the client's open step goes on
            return []
        if kind == "finish":
            return self.short() or [event.raw]
        if kind in _STARTS and isinstance(ident, str):
            self._parts[ident], self._held[ident] = _UNKNOWN, obj
            return []
        if kind in _DELTAS and isinstance(ident, str) and isinstance(obj.get("delta"), str):
            return self._delta(ident, _DELTAS[kind], obj)
        if kind in _ENDS and isinstance(ident, str):
            empty = ident in self._held and ident not in self._texted
            if empty and self._claimable(_ENDS[kind]) is not None:
                self._place(ident, _ENDS[kind])  # nothing more to say: the end of the client's open part
            self._held.pop(ident, None)
            target = self._parts.get(ident, ident)
            return [] if target is _UNKNOWN else [write({**obj, "id": target})]
        return [event.raw]

    def _delta(self, ident: str, kind: str, obj: dict[str, Any]) -> list[bytes] | Failure:
        self._texted.add(ident)
        matcher = self.matchers[kind]
        was_matching = matcher.matching
        new = self.text(kind, obj["delta"])
        if new is None:
            return Failure("diverged", None, "the re-run departed from the text the client has")
        out: list[bytes] = []
        caught_up = was_matching and not matcher.matching and self._claimable(kind) is not None
        if self._parts.get(ident) is _UNKNOWN and (new or caught_up):
            out.extend(self._place(ident, kind))
        target = self._parts.get(ident, ident)
        if new and target is not _UNKNOWN:
            out.append(write({**obj, "id": target, "delta": new}))
        return out

    def _claimable(self, kind: str) -> str | None:
        """The client's open part of ``kind`` (the last started), if no re-run part took it yet."""
        return next((i for i, k in reversed(self._open.items()) if k == kind), None)

    def _place(self, ident: str, kind: str) -> list[bytes]:
        start = self._held.pop(ident)
        claimed = self._claimable(kind)
        if claimed is not None:
            del self._open[claimed]
            self._parts[ident] = claimed
            return []
        target = ident + self._suffix if ident in self._ids else ident
        self._ids.add(target)
        self._parts[ident] = target
        return [write({**start, "id": target})]
