"""A real redis-server (the Debian package) on a free port, with its files in a temp dir."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from typing import Any

from .servers import free_port, require, wait_for_port


class RedisServer:
    def __init__(self, proc: subprocess.Popen[bytes], port: int) -> None:
        self.proc = proc
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"

    def kill(self) -> None:
        """Gone at once, as a crashed or partitioned Redis is to its clients."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@contextlib.asynccontextmanager
async def redis_client(server: RedisServer) -> AsyncIterator[Any]:
    """A plain redis-py client of ``server``, to look at the keys a test's streams wrote."""
    from redis.asyncio import Redis

    client = Redis.from_url(server.url)
    try:
        yield client
    finally:
        await client.aclose()


@contextlib.contextmanager
def redis_server() -> Iterator[RedisServer]:
    binary = require(shutil.which("redis-server"), "redis-server")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="redis-") as tmp:
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", tmp, "--save", "",
             "--appendonly", "no", "--daemonize", "no", "--logfile", ""],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        server = RedisServer(proc, port)
        try:
            wait_for_port(port, proc)
            yield server
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)
