"""Production-grade LLM token streams for any ASGI app, with one line:

app.add_middleware(StreamingMiddleware)
"""

from .exceptions import ConfigError, SSEMiddlewareError, StreamError
from .middleware import StreamingMiddleware
from .settings import StreamingSettings, opt_out, override

__all__ = [
    "ConfigError",
    "SSEMiddlewareError",
    "StreamError",
    "StreamingMiddleware",
    "StreamingSettings",
    "opt_out",
    "override",
]
__version__ = "0.1.0"
