"""HEAD at the raw ASGI level, on asyncio and trio: the headers GET would have, the app's own messages
through untouched. Control: the app without the middleware."""

from __future__ import annotations

import pytest

from ..support.harness import Script, Wire, mw, run_all

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_signals"), pytest.mark.timeout(60)]


async def test_head_gets_the_stream_headers_and_runs_as_without_us() -> None:
    """HEAD: the headers GET would have (anti-buffering included); the app's messages pass through to the
    server, which sends no body, and the app runs exactly as without us."""
    app, client, bare, control = Script((b"data: 1\n\n",)), Wire(), Script((b"data: 1\n\n",)), Wire()
    assert await run_all((2.0, mw(app), client, "HEAD"), (2.0, bare, control, "HEAD")) == [False, False]
    assert app.finished and bare.finished and app.failed is None
    assert client.messages[0]["status"] == 200 and client.headers()[b"x-accel-buffering"] == b"no"
    assert client.messages[1:] == control.messages[1:]  # the app's own messages, untouched
    assert b"x-accel-buffering" not in control.headers()  # control: we added it
