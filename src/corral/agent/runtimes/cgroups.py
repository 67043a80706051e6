"""Control groups for the process runtime: each pod gets one, each of its containers one inside it,
with the limits Docker would set for the container (``cpu.max`` from ``limits.cpu``, ``memory.max``
from ``limits.memory`` with no swap beyond it) and the pod's process count capped (``pids.max``); a
container the kernel killed for memory is reported as OOMKilled.

Where the groups live: under the agent's own group (read from ``/proc/self/cgroup``), in a folder
named after the agent's data directory, so several agents on one machine do not meet:
``<agent's group>/corral-<hash>/<pod uid>/<container>``. With the unified hierarchy (cgroup v2)
that is one tree, whose ``cpu``, ``memory`` and ``pids`` controllers are delegated down with
``cgroup.subtree_control``; with the legacy hierarchies (cgroup v1, or v2 mounted beside v1 without
those controllers, as on hosts whose Docker uses v1) it is the same path in the ``cpu``, ``memory``
and ``pids`` hierarchies each. When neither is writable (an agent that is not root, or a v2 group
holding other processes, which cannot delegate), :func:`detect` says why and the runtime falls back
to rlimits alone.
"""

from __future__ import annotations

import errno
import hashlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corral.api.quantity import QuantityError, to_milli, to_units

__all__ = ["Cgroups", "Limits", "detect", "limits_of", "CPU_PERIOD_US"]

CONTROLLERS = ("cpu", "memory", "pids")
CPU_PERIOD_US = 100_000  # Docker's and Kubernetes' CFS period
MIN_CPU_QUOTA_US = 1_000  # the kernel's minimum


@dataclass(frozen=True, slots=True)
class Limits:
    cpu_millis: int | None = None
    memory_bytes: int | None = None


def limits_of(container: dict[str, Any]) -> Limits:
    """A container's ``resources.limits`` as the kernel takes them (malformed values were refused by
    the API server's validation; here they are ignored)."""
    limits = (container.get("resources") or {}).get("limits") or {}

    def read(key: str, convert) -> int | None:
        try:
            return convert(limits[key]) if key in limits else None
        except QuantityError:
            return None
    return Limits(read("cpu", to_milli), read("memory", to_units))


def cpu_quota_us(millis: int) -> int:
    return max(MIN_CPU_QUOTA_US, millis * CPU_PERIOD_US // 1000)


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY):
            raise


class Cgroups:
    """The pods' groups of one agent. ``version`` is "v2" or "v1"; ``roots`` maps each controller to
    the agent's folder in the hierarchy holding it (the same folder for all three with v2)."""

    def __init__(self, version: str, roots: dict[str, Path]) -> None:
        self.version = version
        self.roots = roots

    def _dirs(self, *parts: str) -> list[Path]:
        """The folders of ``parts`` (pod uid, container), one per hierarchy."""
        return [root.joinpath(*parts) for root in dict.fromkeys(self.roots.values())]

    def _dir(self, controller: str, *parts: str) -> Path:
        return self.roots[controller].joinpath(*parts)

    def prepare(self, pod_uid: str, container: str, *, limits: Limits, max_processes: int) -> tuple[str, ...]:
        """Make the pod's and the container's groups, with their limits; the ``cgroup.procs`` files
        the container's process writes itself into before it executes (see :func:`join`)."""
        for d in self._dirs(pod_uid):
            d.mkdir(exist_ok=True)
            if self.version == "v2":
                _write(d / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS))
        _write(self._dir("pids", pod_uid) / "pids.max", str(max_processes))
        for d in self._dirs(pod_uid, container):
            d.mkdir(exist_ok=True)
        cpu, memory = self._dir("cpu", pod_uid, container), self._dir("memory", pod_uid, container)
        if self.version == "v2":
            quota = "max" if limits.cpu_millis is None else str(cpu_quota_us(limits.cpu_millis))
            _write(cpu / "cpu.max", f"{quota} {CPU_PERIOD_US}")
            _write(memory / "memory.max", "max" if limits.memory_bytes is None else str(limits.memory_bytes))
            if limits.memory_bytes is not None and (memory / "memory.swap.max").exists():
                _write(memory / "memory.swap.max", "0")  # no swap beyond the limit: OOM, as Kubernetes
        else:
            _write(cpu / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(cpu / "cpu.cfs_quota_us", "-1" if limits.cpu_millis is None else str(cpu_quota_us(limits.cpu_millis)))
            if limits.memory_bytes is not None:
                _write(memory / "memory.limit_in_bytes", str(limits.memory_bytes))
                if (memory / "memory.memsw.limit_in_bytes").exists():
                    _write(memory / "memory.memsw.limit_in_bytes", str(limits.memory_bytes))
        return tuple(str(d / "cgroup.procs") for d in self._dirs(pod_uid, container))

    def procs_files(self, pod_uid: str, container: str) -> tuple[str, ...]:
        """The ``cgroup.procs`` files of a running container's groups, for another process to join
        (``kubectl exec``): its processes then count against the container's limits."""
        return tuple(str(d / "cgroup.procs") for d in self._dirs(pod_uid, container) if d.is_dir())

    def pids(self, pod_uid: str, container: str) -> list[int]:
        try:
            text = (self._dir("pids", pod_uid, container) / "cgroup.procs").read_text()
        except FileNotFoundError:
            return []
        return [int(p) for p in text.split()]

    def oom_killed(self, pod_uid: str, container: str) -> bool:
        """Whether the kernel killed a process of the container for its memory limit."""
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        try:
            text = (self._dir("memory", pod_uid, container) / name).read_text()
        except FileNotFoundError:
            return False
        counters = dict(line.split(None, 1) for line in text.splitlines() if " " in line)
        return int(counters.get("oom_kill", "0")) > 0

    def kill(self, pod_uid: str, container: str) -> None:
        """SIGKILL whatever still runs in the container's group (children its main process left)."""
        for pid in self.pids(pod_uid, container):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def containers(self) -> list[tuple[str, str]]:
        """Every (pod uid, container) with a group here."""
        root = self.roots["pids"]
        if not root.exists():
            return []
        return [(pod.name, c.name) for pod in root.iterdir() if pod.is_dir() for c in pod.iterdir() if c.is_dir()]

    def remove(self, pod_uid: str, container: str | None = None) -> None:
        """Remove the container's group (or the pod's, with all of its containers'); a group still
        holding processes stays (the kernel refuses) and goes with a later call."""
        for d in self._dirs(pod_uid):
            if container is not None:
                _rmdir(d / container)
                continue
            if d.exists():
                for child in [c for c in d.iterdir() if c.is_dir()]:
                    _rmdir(child)
            _rmdir(d)

    def close(self) -> None:
        """Remove every group no process is left in (pods' and containers'), and the agent's own
        folders if nothing is left in them; groups of pods still running stay."""
        for root in dict.fromkeys(self.roots.values()):
            if root.exists():
                for pod in [d for d in root.iterdir() if d.is_dir()]:
                    for container in [d for d in pod.iterdir() if d.is_dir()]:
                        _rmdir(container)
                    _rmdir(pod)
            _rmdir(root)


def join(procs_files: tuple[str, ...]) -> None:
    """In the container's process, before it executes: move itself into its groups."""
    for path in procs_files:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)


# --- finding the hierarchies -----------------------------------------------------------------------------


def _own_groups(proc_cgroup: str) -> tuple[str | None, dict[str, str]]:
    """From ``/proc/self/cgroup``: the unified hierarchy's path, and each v1 controller's."""
    unified, legacy = None, {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            unified = path
        for c in controllers.split(","):
            legacy[c] = path
    return unified, legacy


def _mounts(mountinfo: str) -> tuple[list[tuple[str, str]], dict[str, tuple[str, str]]]:
    """From ``/proc/self/mountinfo``: the cgroup2 mounts as (root, mount point), and each v1
    controller's mount as (root, mount point)."""
    v2, v1 = [], {}
    for line in mountinfo.splitlines():
        head, _, tail = line.partition(" - ")
        fields, extra = head.split(), tail.split()
        if len(fields) < 5 or len(extra) < 3:
            continue
        root, point = fields[3], fields[4]
        if extra[0] == "cgroup2":
            v2.append((root, point))
        elif extra[0] == "cgroup":
            for option in extra[2].split(","):
                if option in CONTROLLERS:
                    v1[option] = (root, point)
    return v2, v1


def _inside(mount: tuple[str, str], path: str) -> Path | None:
    """Where the group ``path`` is under a mount of a hierarchy whose root is ``mount[0]``."""
    root, point = mount
    if not (path == root or path.startswith(root.rstrip("/") + "/")):
        return None
    return Path(point) / path[len(root):].lstrip("/")


def _folder_name(data_dir: str) -> str:
    return "corral-" + hashlib.sha256(os.path.abspath(data_dir).encode()).hexdigest()[:12]


def detect(data_dir: str, *, proc: str = "/proc/self") -> tuple[Cgroups | None, str]:
    """The agent's pod groups, made ready, or ``None`` and the reason there are none."""
    try:
        with open(f"{proc}/cgroup") as f:
            unified, legacy = _own_groups(f.read())
        with open(f"{proc}/mountinfo") as f:
            v2_mounts, v1_mounts = _mounts(f.read())
    except OSError as exc:
        return None, f"cannot read the process's control groups: {exc}"
    name = _folder_name(data_dir)
    reasons = []
    if unified is not None:
        for mount in v2_mounts:
            group = _inside(mount, unified)
            if group is None:
                continue
            try:
                available = set((group / "cgroup.controllers").read_text().split())
            except OSError:
                continue
            if not set(CONTROLLERS) <= available:
                reasons.append(f"cgroup v2 at {mount[1]} lacks {sorted(set(CONTROLLERS) - available)} "
                               "(held by v1 hierarchies)")
                continue
            try:
                _write(group / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS))
                top = group / name
                top.mkdir(exist_ok=True)
                _write(top / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS))
            except OSError as exc:
                why = ("the agent's group holds processes, so it cannot hand controllers down: run the agent "
                       "in a group of its own (systemd: Delegate=yes)") if exc.errno == errno.EBUSY else str(exc)
                reasons.append(f"cgroup v2 group {group} is not usable: {why}")
                continue
            return Cgroups("v2", {c: top for c in CONTROLLERS}), ""
    roots = {}
    for c in CONTROLLERS:
        group = _inside(v1_mounts[c], legacy[c]) if c in v1_mounts and c in legacy else None
        if group is None:
            reasons.append(f"no cgroup v1 hierarchy for {c}")
            break
        roots[c] = group / name
    else:
        try:
            for root in roots.values():
                root.mkdir(exist_ok=True)
        except OSError as exc:
            reasons.append(f"cgroup v1 hierarchies are not writable: {exc.strerror or exc}")
        else:
            return Cgroups("v1", roots), ""
    return None, "; ".join(reasons) or "no cgroup hierarchy found"
