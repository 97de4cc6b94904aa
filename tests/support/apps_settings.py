"""A Starlette app as a user writes one, for tests/e2e/test_bad_settings.py: a lifespan of its own and
``app.add_middleware(StreamingMiddleware, **options)``, the options read from ``TEST_OPTIONS`` (JSON;
``{"settings": {...}}`` passes a ``StreamingSettings`` of those fields). ``GET /`` says what the lifespan
put in the state."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from sse_middleware import StreamingMiddleware, StreamingSettings


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[dict[str, str]]:
    yield {"started": "by the app's lifespan"}


async def home(request: Request) -> PlainTextResponse:
    return PlainTextResponse(f"started {request.state.started}")


app = Starlette(routes=[Route("/", home)], lifespan=lifespan)
options: dict[str, Any] = json.loads(os.environ.get("TEST_OPTIONS", "{}"))
if "settings" in options:
    options["settings"] = StreamingSettings(**options["settings"])
app.add_middleware(StreamingMiddleware, **options)
