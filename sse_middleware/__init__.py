"""Production-grade LLM token streams for any ASGI app, with one line:

app.add_middleware(StreamingMiddleware)
"""

from ._asgi.middleware import StreamingMiddleware
from ._exceptions import ConfigError, SSEMiddlewareError, StreamError
from ._settings import StreamingSettings, opt_out, override
from ._telemetry.annotate import annotate

__all__ = [
    "ConfigError",
    "SSEMiddlewareError",
    "StreamError",
    "StreamingMiddleware",
    "StreamingSettings",
    "annotate",
    "opt_out",
    "override",
]
__version__ = "0.1.0"
