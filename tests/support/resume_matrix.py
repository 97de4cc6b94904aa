"""The resume tests' matrix, as fixtures: memory on asyncio and trio, a real redis-server on asyncio
(redis-py is asyncio only; its refusal under trio is tested apart). Import them into a test module;
the functions carry the fixture names, so the tests' parameters do not shadow the imports."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .redis import RedisServer, redis_server


@pytest.fixture(scope="module", name="redis")
def _redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


# The fast tier keeps memory on asyncio; trio and the real redis-server are for the full run.
@pytest.fixture(
    params=[
        pytest.param(("asyncio", "memory"), id="asyncio-memory"),
        pytest.param(("trio", "memory"), id="trio-memory", marks=pytest.mark.slow),
        pytest.param(("asyncio", "redis"), id="asyncio-redis", marks=pytest.mark.slow),
    ],
    name="backend_and_store",
)
def _backend_and_store(request: pytest.FixtureRequest) -> tuple[str, str]:
    return tuple(request.param)  # type: ignore[return-value]


@pytest.fixture(name="anyio_backend")
def _anyio_backend(backend_and_store: tuple[str, str]) -> str:
    return backend_and_store[0]


@pytest.fixture(name="store_url")
def _store_url(request: pytest.FixtureRequest, backend_and_store: tuple[str, str]) -> str:
    if backend_and_store[1] == "redis":
        return str(request.getfixturevalue("redis").url)
    return "memory://"
