"""The library's exceptions: one base, each carrying a machine-readable hint (``hint``, a class
attribute: what kind of fault it is, for a handler or a log query that must not parse messages)."""

from __future__ import annotations

from typing import ClassVar


class SSEMiddlewareError(Exception):
    """Base of everything this library raises."""

    hint: ClassVar[str] = "sse_middleware_error"


class ConfigError(SSEMiddlewareError, ValueError):
    """A setting is invalid. Raised at start-up (or at response start for per-request overrides)."""

    hint: ClassVar[str] = "config_error"


class StreamError(SSEMiddlewareError):
    """Raise this from an app on purpose: its message is safe to show and reaches the client verbatim.

    Any other exception is sanitized (see ``error_detail``). ``type`` and ``code`` go to the client
    with the message.
    """

    hint: ClassVar[str] = "stream_error"

    def __init__(self, message: str, *, type: str = "stream_error", code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.type = type
        self.code = code


class SchemaError(SSEMiddlewareError, ValueError):
    """A JSON Schema the output checker cannot read (not an object or boolean, a remote or unresolvable
    ``$ref``, a ``$ref`` cycle that consumes no input). The caller checks syntax only, or nothing."""

    hint: ClassVar[str] = "schema_error"


class Blocked(SSEMiddlewareError):
    """Raise this from a guard: the stream ends the way its format reports filtered output. ``message``
    and ``code`` are meant for the client and reach it as given."""

    hint: ClassVar[str] = "content_filter"

    def __init__(
        self, message: str = "The answer was stopped by a content filter.", *, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
