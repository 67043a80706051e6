"""How many cores this process can use, and so where ``corral server`` runs its scheduler by default."""

from __future__ import annotations

import math
import os

__all__ = ["usable_cores", "scheduler_process_by_default"]


def _cgroup_quota(root: str, proc_cgroup: str) -> float | None:
    """The smallest CPU quota (in cores) on this process's cgroup path: v2's ``cpu.max`` at each level,
    or v1's ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``; None when there is none."""
    found: list[float] = []
    try:
        with open(proc_cgroup, encoding="ascii") as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f if line.count(":") >= 2]
    except OSError:
        return None
    for _, controllers, path in lines:
        v2 = controllers == ""
        if not v2 and "cpu" not in controllers.split(","):
            continue
        base = root if v2 else os.path.join(root, "cpu")
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):
            here = os.path.join(base, *parts[:depth])
            try:
                if v2:
                    with open(os.path.join(here, "cpu.max"), encoding="ascii") as f:
                        quota, period = f.read().split()[:2]
                else:
                    with open(os.path.join(here, "cpu.cfs_quota_us"), encoding="ascii") as f:
                        quota = f.read().strip()
                    with open(os.path.join(here, "cpu.cfs_period_us"), encoding="ascii") as f:
                        period = f.read().strip()
                if quota not in ("max", "-1"):
                    found.append(int(quota) / int(period))
            except (OSError, ValueError, ZeroDivisionError):
                continue
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


def scheduler_process_by_default() -> bool:
    """Where ``corral server`` runs its scheduler unless told: in a child process when two cores or more
    are usable (SchedulingBasic on 2 cores: 1.6-1.8x the pods/s of the scheduler inside the server),
    inside the server on one core, where the child only adds its channel's cost."""
    return usable_cores() >= 2
