"""How a stream ends when we end it: the error event and the content-filter ending, per format.

A format's error event is its dialect's :meth:`~.base.Dialect.error_event`; its content-filter ending is
the :class:`Ending` subclass its dialect class names (``Dialect.ending``), each kept beside the format it
ends. An :class:`Ending` per guarded stream watches the events that go by for what its last frame needs
(the chunk id and model, the open content blocks, the response object) and builds that frame on a trip:

* OpenAI chat: a chunk with ``finish_reason: "content_filter"`` for every choice, then ``[DONE]``;
* OpenAI Responses: ``response.incomplete`` with ``incomplete_details.reason: "content_filter"``;
* Anthropic: the open blocks closed, ``message_delta`` with ``stop_reason: "refusal"``, ``message_stop``;
* the AI SDK's UI message stream: open parts ended, ``finish`` with ``finishReason: "content-filter"``;
* AG-UI: ``RUN_ERROR`` with ``code: "content_filter"`` (the protocol has no filtered-run ending);
* generic SSE, text in SSE and JSON relays: ``event: error`` with ``type: "content_filter"``;
* text/plain and NDJSON: nothing (the response is cut without its terminating chunk).

The guard's message, code and the error id ride along where the format lets an extra field through.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any, Final, Protocol

from ..errors import ErrorInfo
from ..sse import Event, encode
from ..wire import dumps, with_retry

CONTENT_FILTER: Final = "content_filter"


class Reads(Protocol):
    """What an ending asks of its stream's dialect: an event's JSON object, parsed once for all."""

    def data_object(self, raw: bytes, name: bytes | None = None) -> dict[str, Any] | None: ...


def sse_error(info: ErrorInfo) -> bytes:
    """Generic SSE's error event: ``event: error`` and ``{"error": {"type", "message", "id"}}``."""
    body: dict[str, Any] = {"type": info.type, "message": info.message, "id": info.id}
    if info.code is not None:
        body["code"] = info.code
    return with_retry(info, encode(Event(dumps({"error": body}), "error")))


def data_error(info: ErrorInfo, body: dict[str, Any], name: str | None = None) -> bytes:
    """An error event carrying ``body`` (which holds the message and its error id), under ``name``."""
    return with_retry(info, encode(Event(dumps(body), name)))


def detail(info: ErrorInfo) -> dict[str, Any]:
    """The guard's verdict, as the extra field a format's own ending carries it in."""
    return {"type": CONTENT_FILTER, "code": info.code, "message": info.message, "id": info.id}


class Ending:
    """Generic SSE: an error event of type ``content_filter``. ``dialect``: the stream's, whose parse of
    an event is shared with what the ending reads of it (each event is parsed once)."""

    def __init__(self, dialect: Reads) -> None:
        self._dialect = dialect

    def see(self, raw: bytes) -> None:
        """An event that went into the gate (cheap byte checks: called for every event)."""

    def frame(self, info: ErrorInfo, keys: Iterable[Hashable]) -> bytes | None:
        return sse_error(info)


class NoEnding(Ending):
    """A format with no in-band channel: the response is cut instead."""

    def frame(self, info: ErrorInfo, keys: Iterable[Hashable]) -> bytes | None:
        return None


class HasEnding(Protocol):
    @property
    def ending(self) -> type[Ending]: ...

    def data_object(self, raw: bytes, name: bytes | None = None) -> dict[str, Any] | None: ...


def ending_for(dialect: HasEnding) -> Ending:
    """A fresh content-filter ending for ``dialect``: the one its class names (subclasses, such as spaced
    OpenAI chunks, inherit it)."""
    return dialect.ending(dialect)
