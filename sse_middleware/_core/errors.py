"""Exception -> sanitized error info: what a client may see, and the id operators search for.

By default nothing from an exception's text reaches the client: only a generic message, a type and an
id (the trace id when a span exists) that finds the full traceback in logs and traces. A
:class:`~sse_middleware.StreamError` is raised on purpose, so its message, type and code go out verbatim.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import sys
from typing import Final

from .._exceptions import StreamError

if sys.version_info < (3, 11):  # pragma: no cover - anyio brings the backport there
    from exceptiongroup import BaseExceptionGroup

logger: Final = logging.getLogger("sse_middleware")

INTERNAL: Final = "internal_error"
TIMEOUT: Final = "timeout"
SHUTDOWN: Final = "server_shutdown"
INVALID_OUTPUT: Final = "invalid_output"

_GENERIC: Final = {
    INTERNAL: "The stream failed on the server.",
    TIMEOUT: "The stream timed out: the server produced nothing for too long.",
    SHUTDOWN: "The server is restarting; reconnect to continue.",
}
# Starlette re-raises an exception that a handler caught after the response started as this RuntimeError,
# with the real exception as its __cause__ (starlette/_exception_handler.py).
_STARLETTE_HANDLED: Final = "Caught handled exception, but response already started."


@dataclasses.dataclass(frozen=True, slots=True)
class ErrorInfo:
    """What the client is told. ``type`` is ours (internal_error, timeout, server_shutdown) or the app's."""

    type: str
    message: str
    id: str
    code: str | None = None
    retry_ms: int | None = None  # a reconnect hint; set for shutdowns


def new_error_id(trace_id: str | None) -> str:
    return trace_id or secrets.token_hex(16)


def root_cause(exc: BaseException) -> BaseException:
    """See through wrappers that hide what really failed (Starlette's re-raise, single-exception groups)."""
    seen = 0
    while seen < 16:
        seen += 1
        if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        elif isinstance(exc, RuntimeError) and str(exc) == _STARLETTE_HANDLED and exc.__cause__:
            exc = exc.__cause__
        else:
            break
    return exc


def describe(exc: BaseException, *, detail: bool, error_id: str) -> ErrorInfo:
    """The client's view of ``exc``."""
    exc = root_cause(exc)
    if isinstance(exc, StreamError):
        return ErrorInfo(exc.type, exc.message, error_id, exc.code)
    if isinstance(exc, TimeoutError):
        message = _GENERIC[TIMEOUT]
        kind = TIMEOUT
    else:
        message = _GENERIC[INTERNAL]
        kind = INTERNAL
    if detail:
        message = f"{type(exc).__name__}: {exc}"
    return ErrorInfo(kind, message, error_id)


# Beside OSError (uvicorn's ClientDisconnected is one): Starlette's ClientDisconnect, which Request.stream()
# raises on http.disconnect and StreamingResponse raises for an OSError under ASGI >= 2.4. Matched by
# name so that the check imports nothing.
_DISCONNECT_NAMES: Final = frozenset({"ClientDisconnect"})


def is_disconnect(exc: BaseException) -> bool:
    """Whether a failure only says that the client left: after a disconnect, nothing to log as an error."""
    exc = root_cause(exc)
    return isinstance(exc, OSError) or type(exc).__name__ in _DISCONNECT_NAMES


def report(exc: BaseException, *, detail: bool, error_id: str, client_gone: bool) -> ErrorInfo:
    """Log a failure after the response started, once, and say what the client is told.

    A failure that only means the client left is not an error on the server: debug, not a traceback.
    """
    if client_gone and is_disconnect(exc):
        logger.debug("stream ended by the client leaving (error id %s)", error_id)
    else:
        logger.error("stream failed after the response started (error id %s)", error_id, exc_info=exc)
    return describe(exc, detail=detail, error_id=error_id)


def timeout(error_id: str, seconds: float) -> ErrorInfo:
    return ErrorInfo(TIMEOUT, f"{_GENERIC[TIMEOUT]} ({seconds:g} s)", error_id)


def shutdown(error_id: str, retry_ms: int) -> ErrorInfo:
    return ErrorInfo(SHUTDOWN, _GENERIC[SHUTDOWN], error_id, retry_ms=retry_ms)


def invalid_output(error_id: str, message: str, code: str) -> ErrorInfo:
    """The output broke the JSON its request declared (``code``: json_syntax or json_schema). The message
    is ours (where and why), so it is shown as it is."""
    logger.warning("stream ended for invalid output: %s (error id %s)", message, error_id)
    return ErrorInfo(INVALID_OUTPUT, message, error_id, code)


def error_type_name(exc: BaseException) -> str:
    """The ``error.type`` telemetry value: the exception's qualified class name."""
    cls = type(root_cause(exc))
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
