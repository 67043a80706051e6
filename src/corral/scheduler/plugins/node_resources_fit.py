"""NodeResourcesFit: a pod fits a node only if every resource it requests is free there; the score
prefers emptier nodes (LeastAllocated, the default), fuller ones (MostAllocated), or follows a
utilisation → score curve (RequestedToCapacityRatio).

Requested amounts include pods the scheduler has assumed but not yet seen bound, so a burst of
pods spreads instead of piling onto the node that looked emptiest. Scores use Kubernetes' integer
arithmetic and its non-zero requests (a pod that requests nothing counts as 100m cpu and 200Mi).
"""

from __future__ import annotations

import numpy as np

from corral.scheduler.framework.interface import ALL_PASS, CycleState, FilterResult, Plugin, Reason, count_rows
from corral.scheduler.framework.status import SUCCESS, Status

NAME = "NodeResourcesFit"
TOO_MANY_PODS = "Too many pods"


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


USAGE_KEY = "cpuMemoryUsage"


def cpu_memory_usage(state: CycleState, table, pod, rows) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per scored row: (non-zero requested + the pod's, allocatable, allocatable or 1) for cpu and
    memory, as floats. Computed once per cycle and shared by the scores that need it."""
    usage = state.get(USAGE_KEY)
    if usage is None:
        req = pod.requests
        usage = state[USAGE_KEY] = {
            name: (table.nonzero_f[name][rows] + amount, table.alloc_f[name][rows], table.alloc_safe_f[name][rows])
            for name, amount in (("cpu", req.nonzero_cpu), ("memory", req.nonzero_memory))
        }
    return usage


class NodeResourcesFit(Plugin):
    NAME = NAME

    def __init__(self, handle) -> None:
        super().__init__(handle)
        strategy = self.handle.args.get("scoringStrategy") or {}
        self.strategy = strategy.get("type", "LeastAllocated")
        if self.strategy not in ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"):
            raise ValueError(f"NodeResourcesFit: unknown scoringStrategy.type {self.strategy!r}")
        self.resources = [(r["name"], int(r.get("weight", 1)))
                          for r in strategy.get("resources") or [{"name": "cpu"}, {"name": "memory"}]]
        shape = (strategy.get("requestedToCapacityRatio") or {}).get("shape") or [
            {"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
        self.shape_x = np.array([float(p["utilization"]) for p in shape])
        self.shape_y = np.array([float(p["score"]) * 10 for p in shape])  # 0-10 → 0-100

    def pre_filter(self, state: CycleState, pod) -> Status:
        return SUCCESS

    def filter(self, state: CycleState, pod, candidates: np.ndarray) -> FilterResult:
        table = self.cache.table
        n = table.size
        free = table.free  # allocatable − requested, kept current by the table
        req = pod.requests
        pods_full = free["pods"][:n] < 1
        bad = pods_full.copy()
        reasons = [Reason(TOO_MANY_PODS, pods_full)]
        for resource, amount in (("cpu", req.cpu), ("memory", req.memory), ("ephemeral-storage", req.ephemeral),
                                 *req.extended):
            if amount <= 0:
                continue
            col = free.get(resource)
            short = np.ones(n, dtype=bool) if col is None else col[:n] < amount
            reasons.append(Reason(insufficient(resource), short))
            bad |= short
        if not np.any(bad & candidates):
            return ALL_PASS  # the usual case: every candidate has room, and no reasons are needed
        return FilterResult(~bad, reasons)

    def _requested_and_allocatable(self, pod, rows, resource: str, state: CycleState | None = None
                                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(requested with the pod, allocatable, allocatable or 1), as floats, for the scored rows."""
        table = self.cache.table
        if resource in ("cpu", "memory"):
            return cpu_memory_usage(state if state is not None else CycleState(), table, pod, rows)[resource]
        req = pod.requests
        amount = dict(req.extended).get(resource, req.ephemeral if resource == "ephemeral-storage" else 0)
        a, u = table.allocatable.get(resource), table.requested.get(resource)
        if a is None or not a[rows].any():
            return None  # Kubernetes skips a resource no node offers
        alloc = a[rows].astype(np.float64)
        return (u[rows] + amount).astype(np.float64), alloc, np.maximum(alloc, 1.0)

    def score(self, state: CycleState, pod, rows) -> np.ndarray:
        # Float arithmetic with floor equals Kubernetes' integer arithmetic here: quotients are at
        # most 100 and amounts stay far below 2**53. It is several times faster than int64 division.
        total = None
        weights = 0
        for resource, weight in self.resources:
            pair = self._requested_and_allocatable(pod, rows, resource, state)
            if pair is None:
                continue
            requested, allocatable, safe = pair
            if self.strategy == "LeastAllocated":  # in place: no temporaries on the hot path
                s = allocatable - requested
                np.maximum(s, 0.0, out=s)
                s *= 100.0
                s /= safe
                np.floor(s, out=s)
            elif self.strategy == "MostAllocated":
                s = np.floor(requested * 100.0 / safe)
                s[requested > allocatable] = 0
            else:
                utilization = np.minimum(requested * 100.0 / safe, 100.0)
                utilization[allocatable == 0] = 100.0
                s = np.floor(np.interp(utilization, self.shape_x, self.shape_y))
            if weight != 1:
                s *= weight
            if total is None:
                total = s
            else:
                total += s
            weights += weight
        if total is None:
            return np.zeros(count_rows(rows))
        if weights != 1:
            total /= weights
            np.floor(total, out=total)
        return total
