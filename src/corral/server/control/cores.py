"""How many cores this process can use, and so where ``corral server`` runs its scheduler by default."""

from __future__ import annotations

import math
import os

__all__ = ["usable_cores", "scheduler_in_child"]


def _level_quota(directory: str, v2: bool) -> float | None:
    """The CPU quota (in cores) set on one cgroup directory; None for none, or none readable."""
    def read(name: str) -> str:
        with open(os.path.join(directory, name), encoding="ascii") as f:
            return f.read()

    try:
        if v2:
            quota, period = read("cpu.max").split()[:2]
        else:
            quota, period = read("cpu.cfs_quota_us").strip(), read("cpu.cfs_period_us").strip()
        return None if quota in ("max", "-1") else int(quota) / int(period)
    except (OSError, ValueError, ZeroDivisionError):
        return None


def _cgroup_quota(root: str, proc_cgroup: str) -> float | None:
    """The smallest CPU quota (in cores) on this process's cgroup path, from its group up to the root:
    v2's ``cpu.max``, or v1's ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``; None when there is none."""
    try:
        with open(proc_cgroup, encoding="ascii") as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f if line.count(":") >= 2]
    except OSError:
        return None
    found: list[float] = []
    for _, controllers, path in lines:
        v2 = controllers == ""
        if not v2 and "cpu" not in controllers.split(","):
            continue
        base, parts = (root if v2 else os.path.join(root, "cpu")), [p for p in path.split("/") if p]
        levels = (_level_quota(os.path.join(base, *parts[:depth]), v2) for depth in range(len(parts), -1, -1))
        found.extend(q for q in levels if q is not None)
    return min(found) if found else None


def usable_cores(cgroup_root: str = "/sys/fs/cgroup", proc_cgroup: str = "/proc/self/cgroup") -> int:
    """The cores this process can use: those its CPU affinity allows (``taskset``), fewer if a CPU
    quota on its cgroup (a container's ``--cpus``) is smaller; 1.5 cores of quota count as 2."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    quota = _cgroup_quota(cgroup_root, proc_cgroup)
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return cores


def scheduler_in_child(asked: bool | None = None) -> bool:
    """Whether ``corral server`` runs its scheduler in a child process: as ``asked``
    (``--scheduler-process`` / ``--no-scheduler-process``), else when two cores or more are usable
    (SchedulingBasic on 2 cores: 1.5-1.7x the pods/s of the scheduler inside the server); on one
    core it stays inside the server, where a child only adds its channel's cost."""
    return asked if asked is not None else usable_cores() >= 2
