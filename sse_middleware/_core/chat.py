"""The Vercel AI SDK's own resume, sans-I/O: which chat a stream answers, and which chat a request names.

``useChat({ resume: true })`` (the AI SDK's ``DefaultChatTransport.reconnectToStream``) asks
``GET {api}/{encodeURIComponent(chatId)}/stream`` when a page mounts; the POST that started the chat's
stream carried the chat id as ``id`` in its JSON body. A chat is named in the store by :func:`chat_key`:
an HMAC of the caller's identity (the same identity the resume ids are bound to, see :mod:`.resume`),
keyed with the POST's path and the chat id. So a chat id, which is no secret (it is often in the page's
URL), finds a stream only for the caller that started it, and two callers' chats of the same id never
meet; the store keeps the digest, never the id or the credentials.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from typing import Final
from urllib.parse import unquote

_DECODER: Final = json.JSONDecoder()
_WS: Final = re.compile(r"[ \t\n\r]*")
_MAX_CHAT_CHARS: Final = 1024  # a longer "id" is no chat id
_SUFFIX: Final = b"/stream"


def chat_id(body: bytes) -> str | None:
    """The top-level ``"id"`` string of a JSON object body (the AI SDK writes it before ``messages``, so
    only the members before it are decoded); None for anything else, never a guess."""
    text = body.decode("utf-8", "replace")
    i = _skip(text, 0)
    if not text.startswith("{", i):
        return None
    i += 1
    try:
        while True:
            key, i = _DECODER.raw_decode(text, _skip(text, i))
            i = _skip(text, i)
            if not isinstance(key, str) or not text.startswith(":", i):
                return None
            value, i = _DECODER.raw_decode(text, _skip(text, i + 1))
            if key == "id":
                ok = isinstance(value, str) and 0 < len(value) <= _MAX_CHAT_CHARS
                return value if ok else None
            i = _skip(text, i)
            if not text.startswith(",", i):
                return None
            i += 1
    except ValueError:  # not JSON, or the body was cut before "id"
        return None


def _skip(text: str, at: int) -> int:
    match = _WS.match(text, at)
    return match.end() if match else at


def chat_path(raw_path: bytes) -> bytes:
    """A POST's path as its chat's resume URL starts with it (the SDK drops a trailing slash)."""
    return raw_path.rstrip(b"/") or b"/"


def stream_request(raw_path: bytes) -> tuple[bytes, str] | None:
    """``<path>/<chat id>/stream`` -> (path, chat id); None for any other path. ``raw_path`` is the
    request's path as sent (percent-encoded), so a chat id holding a ``/`` cannot shift the split."""
    if not raw_path.endswith(_SUFFIX):
        return None
    head, _, encoded = raw_path[: -len(_SUFFIX)].rpartition(b"/")
    if not encoded:
        return None
    try:
        chat = unquote(encoded.decode("latin-1"), errors="strict")
    except UnicodeDecodeError:
        return None
    if chat in (".", "..") or len(chat) > _MAX_CHAT_CHARS:
        return None
    return chat_path(head), chat


def chat_key(path: bytes, chat: str, who: bytes) -> str:
    """The store's name for one caller's chat on one route (43 URL-safe characters)."""
    key = b"sse_middleware.chat\x00" + path + b"\x00" + chat.encode("utf-8", "surrogatepass")
    digest = hmac.new(key, who, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
