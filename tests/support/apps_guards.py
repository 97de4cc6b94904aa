"""The format app behind a guard that blocks the word ``Here`` (``TEST_WRAP=0``: no guard, the control)."""

from __future__ import annotations

import os

from starlette.types import ASGIApp

from sse_middleware import Blocked, Check, StreamingMiddleware

from .apps_formats import api


def no_here(check: Check) -> None:
    if "Here" in check.new:
        raise Blocked("That word is not allowed here.", code="banned_word")


def build(wrap: bool) -> ASGIApp:
    return StreamingMiddleware(api, guards=[no_here]) if wrap else api


app = build(os.environ.get("TEST_WRAP", "1") == "1")
