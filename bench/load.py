"""Other people's CPU: this machine is shared (tests, other benchmarks), and on 2 cores a foreign
process that takes a core shows up as server descheduling: accept delays, TTFT spikes, noisy CPU.

``Foreign`` measures, over a window, the machine's busy CPU (``/proc/stat``) minus our own (this
process and the server), in cores. Measurements record it; the sweeps retry a sample taken under
foreign load, and ``wait_quiet`` holds a phase back (bounded) until the machine is idle.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of ``pid`` so far (ns resolution where schedstat exists)."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (FileNotFoundError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


QUIET_CORES = 0.15
"""Foreign load above which a sample is retried (0.15 of a core: ~7% of this 2-core machine)."""
_TCK = os.sysconf("SC_CLK_TCK")


def system_busy() -> float:
    """CPU seconds the whole machine has spent busy since boot (all cores)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / _TCK


class Foreign:
    """Foreign CPU over a window; ``pids`` are our other processes (the server)."""

    def __init__(self, *pids: int) -> None:
        self.pids = pids
        self.t0 = time.perf_counter()
        self.busy0 = system_busy()
        self.own0 = self._own()

    def _own(self) -> float:
        t = os.times()
        total = time.process_time() + t.children_user + t.children_system  # servers we started and reaped
        for pid in self.pids:
            with contextlib.suppress(OSError):  # the server has exited
                total += cpu_seconds(pid)
        return total

    def cores(self) -> float:
        """Average foreign cores since the window opened (never negative)."""
        wall = max(1e-6, time.perf_counter() - self.t0)
        return max(0.0, (system_busy() - self.busy0 - (self._own() - self.own0)) / wall)


def wait_quiet(max_wait: float, log: Callable[[str], None]) -> float:
    """Wait (at most ``max_wait`` s, in 1 s looks) for the machine to go idle; return the last load."""
    deadline = time.monotonic() + max_wait
    load = 0.0
    while True:
        window = Foreign()
        time.sleep(1.0)
        load = window.cores()
        if load < QUIET_CORES or time.monotonic() >= deadline:
            break
        log(f"  machine busy ({load:.2f} foreign cores): waiting")
    return round(load, 3)
