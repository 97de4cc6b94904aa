"""Shared fixtures. ``anyio_backend``: every ``@pytest.mark.anyio`` test runs on asyncio and on trio (trio
in the full run only: it is marked slow, and the fast tier deselects slow tests).
``wrapped`` / ``control``: the test app served by uvicorn with the middleware (default settings) and
without it, one each for the whole session (a module may define its own with other settings)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import hypothesis
import pytest

from .support import tier
from .support.otel import Otel
from .support.servers import Server, uvicorn

BACKENDS = ["asyncio", pytest.param("trio", marks=pytest.mark.slow)]  # trio: the full run, not the fast tier


def pytest_configure(config: pytest.Config) -> None:
    tier.FAST = config.getoption("markexpr", "") == "not slow"  # the fast tier: fewer examples per property
    if tier.FAST:  # for the properties that keep hypothesis' default number of examples
        hypothesis.settings.register_profile("fast-tier", max_examples=20)
        hypothesis.settings.load_profile("fast-tier")


@pytest.fixture(params=BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@contextlib.contextmanager
def restored_signals() -> Iterator[None]:
    """The middleware chains SIGTERM/SIGINT when a stream starts in the main thread: put them back."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@pytest.fixture
def restore_signals() -> Iterator[None]:
    with restored_signals():
        yield


@pytest.fixture
def otel() -> Iterator[Otel]:
    """Private OpenTelemetry SDK providers with in-memory exporters, shut down after the test."""
    otel = Otel()
    yield otel
    otel.shutdown()


@pytest.fixture(scope="session")
def wrapped() -> Iterator[Server]:
    with uvicorn("tests.support.apps:app") as server:
        yield server


@pytest.fixture(scope="session")
def control() -> Iterator[Server]:
    with uvicorn("tests.support.apps:app", {"TEST_WRAP": "0"}) as server:
        yield server
