"""A CPU quota per server process, through the kernel's cgroup `cpu` controller (`--server-cpu`).

On a machine with few cores, the model, the client, PostgreSQL and Redis share the cores with the servers under
test, so "two replicas carry twice the chats of one" cannot be seen: two replicas are starved before they are
busy. Capping each server process at the same fraction of a core (each in a cgroup of its own) makes one replica
and two comparable: each gets what one replica gets, and the rest of the machine is left to everything else.

The kernel enforces the quota per period (10 ms, shorter than its default 100 ms so that a busy server waits in short steps, as on a slower core, rather than in long stalls): a process that used its share waits for the next period, so a
capped server's latency also shows that wait once it is busy. That is the same for every server capped alike.

Needs root and a `cpu` controller: cgroup v1 (`/sys/fs/cgroup/cpu`) or v2 (`cpu` in `cgroup.controllers`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_PERIOD_US = 10_000
_V1 = Path("/sys/fs/cgroup/cpu")
_V2 = Path("/sys/fs/cgroup")


class CpuCapUnavailable(RuntimeError):
    """This machine or user cannot cap a process's CPU (the message says why)."""


def _root() -> tuple[Path, int]:
    """The cgroup folder new groups go under, and its version."""
    if (_V1 / "cpu.cfs_quota_us").exists():
        return _V1, 1
    for base in (_V2, _V2 / "unified"):
        controllers = base / "cgroup.controllers"
        if controllers.exists() and "cpu" in controllers.read_text().split():
            return base, 2
    raise CpuCapUnavailable("--server-cpu needs the cgroup cpu controller (/sys/fs/cgroup/cpu on cgroup v1, or "
                            "cpu in /sys/fs/cgroup/cgroup.controllers on v2); this machine has neither.")


@contextmanager
def cpu_capped(pids: list[int], cores: float) -> Iterator[None]:
    """Each of `pids` in a cgroup of its own, allowed `cores` of a core; the groups are removed at the end."""
    root, version = _root()
    groups: list[Path] = []
    try:
        for pid in pids:
            group = root / f"toolwire-bench-{os.getpid()}-{pid}"
            try:
                group.mkdir()
            except PermissionError as exc:
                raise CpuCapUnavailable(f"--server-cpu needs root to make a cgroup under {root}: {exc}.") from exc
            groups.append(group)
            quota = max(1000, int(cores * _PERIOD_US))
            if version == 1:
                (group / "cpu.cfs_period_us").write_text(str(_PERIOD_US))
                (group / "cpu.cfs_quota_us").write_text(str(quota))
            else:
                (group / "cpu.max").write_text(f"{quota} {_PERIOD_US}")
            (group / "cgroup.procs").write_text(str(pid))  # every thread, and those it starts later
        yield
    finally:
        for group in groups:
            # A group can be removed only once empty: what is still in it goes back to the root group.
            try:
                for pid in (group / "cgroup.procs").read_text().split():
                    (root / "cgroup.procs").write_text(pid)
            except OSError:
                pass
            try:
                group.rmdir()
            except OSError:
                pass


def cpu_throttled_seconds(pid: int) -> float | None:
    """How long the kernel held `pid`'s group back for having used its quota (None when it is not capped here)."""
    root, version = _root()
    stat = root / f"toolwire-bench-{os.getpid()}-{pid}" / "cpu.stat"
    if not stat.exists():
        return None
    fields = dict(line.split() for line in stat.read_text().splitlines() if line.count(" ") == 1)
    if version == 1:
        return int(fields.get("throttled_time", 0)) / 1e9
    return int(fields.get("throttled_usec", 0)) / 1e6
