"""A real Redis Cluster of three ``redis-server`` masters (the Debian package), built by
``redis-cli --cluster create`` on free 127.0.0.1 ports, with its files in a temp dir.

Each node also listens on its cluster bus port, its port + 10000, so the ports are drawn below 55536 and
both must be free. ``slot_owner`` names the node that holds a key's slot (``CLUSTER KEYSLOT``, then
``CLUSTER SLOTS``), so a test can kill exactly the node a stream lives on.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from .redis import RedisServer
from .servers import require, wait_for_port

BUS_OFFSET = 10000
NODES = 3


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_ports(count: int) -> list[int]:
    """``count`` ports whose bus ports (+10000) are free too, all below 65536."""
    chosen: list[int] = []
    while len(chosen) < count:
        port = random.randint(20000, 65535 - BUS_OFFSET)
        taken = {p for c in chosen for p in (c, c + BUS_OFFSET)}
        if {port, port + BUS_OFFSET} & taken:
            continue
        if _bindable(port) and _bindable(port + BUS_OFFSET):
            chosen.append(port)
    return chosen


class RedisClusterServer:
    def __init__(self, nodes: list[RedisServer], cli: str) -> None:
        self.nodes = nodes
        self.cli = cli
        self.url = f"redis+cluster://127.0.0.1:{nodes[0].port}"  # one seed: the client finds the rest
        self.seeds = ",".join(f"127.0.0.1:{node.port}" for node in nodes)
        self.seeds_url = f"redis+cluster://{self.seeds}"  # every node a seed: any one may be down at start

    def command(self, port: int, *args: str) -> str:
        done = subprocess.run(
            [self.cli, "-h", "127.0.0.1", "-p", str(port), *args],
            capture_output=True, check=True, text=True, timeout=10,
        )  # fmt: skip
        return done.stdout

    def state(self, port: int) -> str:
        for line in self.command(port, "CLUSTER", "INFO").splitlines():
            if line.startswith("cluster_state:"):
                return line.split(":", 1)[1].strip()
        return ""

    def slot_owner(self, key: str) -> RedisServer:
        """The master that holds ``key``'s slot, as the cluster itself says."""
        alive = next(node for node in self.nodes if node.proc.poll() is None)
        slot = int(self.command(alive.port, "CLUSTER", "KEYSLOT", key))
        for line in self.command(alive.port, "CLUSTER", "NODES").splitlines():
            fields = line.split()
            address, flags, ranges = fields[1], fields[2], fields[8:]
            if "master" not in flags:
                continue
            port = int(address.split("@")[0].rsplit(":", 1)[1])
            for span in ranges:
                if span.startswith("["):
                    continue  # a slot being migrated
                low, _, high = span.partition("-")
                if int(low) <= slot <= int(high or low):
                    return next(node for node in self.nodes if node.port == port)
        raise LookupError(f"no master holds slot {slot}")


@contextlib.contextmanager
def redis_cluster(count: int = NODES) -> Iterator[RedisClusterServer]:
    binary = require(shutil.which("redis-server"), "redis-server")
    cli = require(shutil.which("redis-cli"), "redis-cli")
    ports = cluster_ports(count)
    with tempfile.TemporaryDirectory(prefix="redis-cluster-") as tmp, contextlib.ExitStack() as stack:
        nodes: list[RedisServer] = []
        for port in ports:
            folder = Path(tmp) / str(port)
            folder.mkdir()
            proc = subprocess.Popen(
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder), "--save", "",
                 "--appendonly", "no", "--daemonize", "no", "--logfile", "", "--cluster-enabled", "yes",
                 "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
            stack.callback(_stop, proc)
            nodes.append(RedisServer(proc, port))
        for node in nodes:
            wait_for_port(node.port, node.proc)
        cluster = RedisClusterServer(nodes, cli)
        subprocess.run(
            [cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
             "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True, check=True, timeout=60,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not all(cluster.state(p) == "ok" for p in ports):
            if time.monotonic() > deadline:
                raise TimeoutError("the cluster did not reach cluster_state:ok")
            time.sleep(0.1)
        yield cluster


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        proc.wait(10)
