"""The Vercel AI SDK's own resume: ``GET <chat route>/<chatId>/stream``, answered without the app.

``useChat({ resume: true })`` sends it when a page mounts, with no ``Last-Event-ID``. With ``resume`` on,
a resumable AI SDK stream started by a POST whose JSON body has an ``id`` is indexed by that chat (see
:mod:`.._core.chat`: bound to its caller). Then, for the same caller:

- ``GET``: while the chat's stream is being generated, ``200`` with the UI message stream headers, the
  stream from its first part, then live until its end (the SDK's transport treats a resume as a replay:
  it resets the message at the first ``start`` part). Once the stream's end marker is in the log,
  ``204``: the SDK's own flow has the finished message already (its ``onFinish`` persisted it), and a
  replay would show it twice. ``204`` too when the log no longer holds the stream's first part. A
  stream that ended cut (its producer died) is followed like a live one: taken over, or it ends with
  its error part (see :mod:`.takeover`), never a ``204`` that the SDK would read as the whole answer.
- ``DELETE``: stops the chat's live stream, on whichever host produces it (the app is cancelled, the
  stream ends cleanly, later ``GET``s answer ``204``); ``204`` either way. The SDK's ``stop()`` only
  aborts its fetch, which a resumable stream outlives: send this ``DELETE`` beside it.

When no chat of this caller is known here, the request goes to the app as if we were not there (an
app's own resume route keeps working), except that a ``404`` from the app (no such route) becomes
``204``: the SDK throws on any other non-2xx, so a page that mounts with ``resume: true`` on a new chat
would show an error for a stream that simply does not exist.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any, Final, Protocol

import anyio

from .._core import chat
from .._core.dialects.ai_sdk import AISDK
from .._core.resume import Position
from .._core.resume import same_caller as _same_caller
from .._resume.store import StoreError
from .._types import Message, Send
from .resume import FIND_SECONDS, Resumption

if TYPE_CHECKING:
    from .._core.pipeline import Pipeline
    from .._resume.log import StreamLog

_METHODS: Final = frozenset(("GET", "DELETE"))
_UI_HEADER: Final = AISDK.hint
_SSE: Final = (b"content-type", b"text/event-stream")
NO_CONTENT: Final[Message] = {"type": "http.response.start", "status": 204, "headers": []}
_EMPTY: Final[Message] = {"type": "http.response.body", "body": b"", "more_body": False}

ChatRequest = tuple[bytes, bytes, bytes]  # (path, caller, body) of the POST that started a chat's stream


class Stoppable(Protocol):
    """What a chat's ``DELETE`` asks of its stream."""

    def end_on_delete(self) -> None: ...


class ChatResume:
    """Per middleware, beside :class:`~.resume.Resumption` (its store, caller binding and telemetry)."""

    def __init__(self, resumption: Resumption) -> None:
        self._resumption = resumption
        self._on = resumption.settings.resume

    def wanted(self, scope: MutableMapping[str, Any]) -> bool:
        """Whether a request may be the AI SDK's resume or stop of a chat's stream (no await: asked of
        every request)."""
        return self._on and scope.get("method") in _METHODS

    async def answer(self, scope: MutableMapping[str, Any], receive: Any, send: Send) -> tuple[bool, Send]:
        """(True, _) when answered here; else (False, the send the app's response should go through).
        Only for a request :meth:`wanted` lets through."""
        raw = scope.get("raw_path") or scope.get("path", "").encode("utf-8", "surrogateescape")
        named = chat.stream_request(raw)
        if named is None:
            return False, send
        owner = self._resumption
        who = owner.identity(scope)
        key = chat.chat_key(*named, who)
        if time.monotonic() < owner.rest_until:
            return False, send
        try:
            with anyio.fail_after(FIND_SECONDS):
                stream = await owner.store.chat_stream(key)
                found = await owner.store.find(stream) if stream is not None else None
                if stream is None or (found is not None and not _same_caller(stream, who, found.info.caller)):
                    return False, _NoContentFor404(send)
                if found is not None and scope["method"] == "DELETE" and found.end is None:
                    await owner.store.stop(stream, key)
        except (StoreError, TimeoutError) as exc:
            owner.rest("unavailable for a chat's resume", exc)
            return False, send
        if scope["method"] == "GET" and found is not None and found.end is not True and found.first <= 1:
            # Live, or cut (its producer died: taken over, or its error part at the end; never a 204,
            # which the SDK reads as a whole answer).
            headers = _ui_headers(found.info.headers)
            found = dataclasses.replace(found, info=dataclasses.replace(found.info, headers=headers))
            await owner.follow(scope, receive, send, Position(stream, 0), found)
            return True, send
        await send(NO_CONTENT)  # stopped, finished, expired, or its first parts no longer kept
        await send(_EMPTY)
        return True, send


def _ui_headers(headers: tuple[tuple[bytes, bytes], ...]) -> tuple[tuple[bytes, bytes], ...]:
    names = {name.lower() for name, _ in headers}
    extra = [h for h in (_SSE, _UI_HEADER) if h[0] not in names]
    return (*headers, *extra)


class _NoContentFor404:
    """The app's answer to a chat resume we know nothing of, but a ``404`` is ``204`` (see above)."""

    __slots__ = ("_replaced", "_send")

    def __init__(self, send: Send) -> None:
        self._send = send
        self._replaced = False

    async def __call__(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start" and message.get("status") == 404:
            self._replaced = True
            await self._send(NO_CONTENT)
        elif not self._replaced:
            await self._send(message)
        elif kind == "http.response.body" and not message.get("more_body", False):
            await self._send(_EMPTY)


class ChatIndex:
    """The producer's side: a resumable stream started by a POST to ``path`` with ``body``. Once the
    stream is known to be the AI SDK's UI message stream (hinted at its start, or detected from its first
    part), its log is indexed by the body's chat id (see :mod:`.._core.chat`); then a ``DELETE`` of it
    ends the stream (its ``end_on_delete``). Called by the writer after each frame the log takes, until
    it returns True. ``stream``: a weak proxy (the stream holds its writer, which holds this)."""

    __slots__ = ("_log", "_pipe", "_request", "_stream")

    def __init__(self, pipe: Pipeline, log: StreamLog, request: ChatRequest, stream: Stoppable) -> None:
        self._pipe = pipe
        self._log = log
        self._request = request
        self._stream = stream

    def __call__(self) -> bool:
        """Index the log if the format is known by now; whether that question is settled."""
        dialect = self._pipe.dialect
        if dialect.detecting:
            return False
        path, who, body = self._request
        ident = chat.chat_id(body) if dialect.chat_resume else None
        if ident is not None:
            self._log.index(chat.chat_key(path, ident, who))
            self._log.on_stop(self._stream.end_on_delete)
        return True
