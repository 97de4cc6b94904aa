"""The check's only I/O: one HTTP(S) request with the standard library's ``http.client``, every read timed.

``read1`` returns as soon as some bytes are there, and with chunked transfer at most one chunk: what the
server (or the last proxy) wrote, as it arrived.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from .. import __version__
from .recorder import Recorder, Timeline

# What a browser's EventSource sends, less brotli, which the standard library cannot decode.
DEFAULT_HEADERS = (
    ("Accept", "text/event-stream"),
    ("Accept-Encoding", "gzip, deflate"),
    ("Cache-Control", "no-cache"),
    ("User-Agent", f"sse-middleware-check/{__version__}"),
)
READ_SIZE = 65536


class NoStream(Exception):
    """There was no stream to measure (the check exits 2); the message says why."""


@dataclass(frozen=True)
class Request:
    url: str
    method: str = "GET"
    body: bytes | None = None
    headers: Sequence[tuple[str, str]] = ()  # added to (or, with an empty value, removing) the defaults
    timeout: float = 60.0  # for the whole check, from connecting to the end of the stream


def headers_for(request: Request) -> dict[str, str]:
    out = {name.lower(): (name, value) for name, value in DEFAULT_HEADERS}
    if request.body is not None:
        out["content-type"] = ("Content-Type", "application/json")
    for name, value in request.headers:
        out[name.lower()] = (name, value)
    return {name: value for name, value in out.values() if value}


def run(request: Request, recorder: Recorder, clock: Callable[[], float] = time.monotonic) -> Timeline:
    """Stream ``request.url`` into ``recorder``; raises :class:`NoStream` when there is nothing to measure."""
    url = urlsplit(request.url)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise NoStream(f"not an http:// or https:// URL: {request.url}")
    start = clock()
    try:
        port = url.port
    except ValueError as exc:
        raise NoStream(f"bad port in {request.url}") from exc
    if url.scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            url.hostname, port, timeout=request.timeout, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(url.hostname, port, timeout=request.timeout)
    target = (url.path or "/") + (f"?{url.query}" if url.query else "")
    try:
        try:
            conn.request(request.method, target, body=request.body, headers=headers_for(request))
            sock = conn.sock  # kept: getresponse() lets go of it when the server will close the connection
            response = conn.getresponse()
        except TimeoutError as exc:
            raise NoStream(f"no response within {request.timeout:g} s") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise NoStream(f"no response: {_describe(exc)}") from exc
        version = {10: "1.0", 11: "1.1"}.get(response.version, str(response.version))
        reason = recorder.response(clock() - start, response.status, version, response.getheaders())
        if reason is not None:
            raise NoStream(reason + _excerpt(response))
        return _read(response, sock, recorder, start, start + request.timeout, clock)
    finally:
        conn.close()


def _read(
    response: http.client.HTTPResponse,
    sock: socket.socket | None,
    recorder: Recorder,
    start: float,
    deadline: float,
    clock: Callable[[], float],
) -> Timeline:
    while True:
        remaining = deadline - clock()
        if remaining <= 0:
            return recorder.close(clock() - start, "timeout")
        if sock is not None:
            sock.settimeout(remaining)
        try:
            data = response.read1(READ_SIZE)
        except TimeoutError:
            return recorder.close(clock() - start, "timeout")
        except http.client.IncompleteRead:
            return recorder.close(clock() - start, "cut", "the connection closed inside the chunked body")
        except (OSError, http.client.HTTPException) as exc:
            return recorder.close(clock() - start, "cut", _describe(exc))
        now = clock() - start
        if not data:
            if response.length:  # what a Content-Length promised and never came
                return recorder.close(now, "cut", f"{response.length} bytes short of its Content-Length")
            return recorder.close(now, "end")
        try:
            recorder.feed(now, data)
        except ValueError as exc:
            return recorder.close(now, "cut", str(exc))


def _excerpt(response: http.client.HTTPResponse) -> str:
    """The start of a refused response's body, which often says why (an error message, a login page)."""
    if response.getheader("content-encoding", "identity").lower() != "identity":
        return ""
    try:
        head = response.read1(200) if not response.chunked else response.read(200)
    except (OSError, http.client.HTTPException):
        return ""
    text = " ".join(head.decode("utf-8", "replace").split())
    return f"; the body starts: {text[:120]}" if text else ""


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
