"""Production-grade LLM token streams for any ASGI app, with one line:

app.add_middleware(StreamingMiddleware)
"""

from ._asgi.guards import guard
from ._asgi.middleware import StreamingMiddleware
from ._core.guard import Check
from ._core.recovery import Recovery, recovery
from ._exceptions import Blocked, ConfigError, SSEMiddlewareError, StreamError
from ._settings import StreamingSettings, opt_out, override
from ._telemetry.annotate import annotate
from ._version import __version__ as __version__

__all__ = [
    "Blocked",
    "Check",
    "ConfigError",
    "Recovery",
    "SSEMiddlewareError",
    "StreamError",
    "StreamingMiddleware",
    "StreamingSettings",
    "annotate",
    "guard",
    "opt_out",
    "override",
    "recovery",
]
