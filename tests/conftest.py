"""Shared fixtures. ``anyio_backend``: every ``@pytest.mark.anyio`` test runs on asyncio and on trio."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def restore_signals() -> Iterator[None]:
    """The middleware chains SIGTERM/SIGINT when a stream starts in the main thread: put them back."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)
