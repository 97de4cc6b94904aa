"""Stand-in, written for our conformance runner: sse-starlette's sdist ships its tests without their
``conftest.py``. This one provides only what the shipped tests name: a per-test reset of sse-starlette's
process-wide shutdown state (``reset_shutdown_state``, named in test_multi_loop.py and test_issue211.py),
and the ``httpx_client`` fixture of ``test_disconnect_whenClientDisconnects_thenHandlesGracefully``: an
endless event stream at 0.3 s per event whose generator logs "Disconnected from client" when cancelled.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx2 as httpx
import pytest
from sse_starlette import EventSourceResponse, sse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

log = logging.getLogger(__name__)


def _reset() -> None:
    sse.AppStatus.should_exit = False
    sse.AppStatus.enable_automatic_graceful_drain = True
    sse._thread_state.shutdown_state = None


@pytest.fixture(autouse=True)
def reset_shutdown_state() -> Iterator[None]:
    _reset()
    yield
    _reset()


async def endless(request: Request) -> EventSourceResponse:
    async def events() -> AsyncIterator[dict[str, int]]:
        i = 0
        try:
            while True:
                i += 1
                yield {"data": i}
                await anyio.sleep(0.3)
        except anyio.get_cancelled_exc_class():
            log.info("Disconnected from client %s", request.client)
            raise

    return EventSourceResponse(events())


@pytest.fixture
def httpx_client() -> httpx.AsyncClient:
    # A plain fixture: sse-starlette runs pytest-asyncio in auto mode, which would run an async fixture on
    # asyncio even for the test's trio run. An ASGITransport holds nothing that needs closing.
    app = Starlette(routes=[Route("/endless", endless)])
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost:8000")
