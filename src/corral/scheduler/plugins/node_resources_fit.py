"""NodeResourcesFit: a pod fits a node only if every resource it requests is free there; the score
prefers emptier nodes (LeastAllocated, the default), fuller ones (MostAllocated), or follows a
utilisation → score curve (RequestedToCapacityRatio).

Requested amounts include pods the scheduler has assumed but not yet seen bound, so a burst of
pods spreads instead of piling onto the node that looked emptiest. Scores use Kubernetes' integer
arithmetic and its non-zero requests (a pod that requests nothing counts as 100m cpu and 200Mi).
"""

from __future__ import annotations

import numpy as np

from corral.scheduler.framework.interface import CycleState, FilterResult, Plugin, Reason, count_rows
from corral.scheduler.framework.status import SUCCESS, Status

NAME = "NodeResourcesFit"
TOO_MANY_PODS = "Too many pods"


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


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
        alloc, used = table.allocatable, table.requested
        req = pod.requests
        reasons = []
        bad = used["pods"][:n] + 1 > alloc["pods"][:n]
        reasons.append(Reason(TOO_MANY_PODS, bad.copy()))
        for resource, amount in (("cpu", req.cpu), ("memory", req.memory), ("ephemeral-storage", req.ephemeral),
                                 *req.extended):
            if amount <= 0:
                continue
            a, u = alloc.get(resource), used.get(resource)
            short = np.ones(n, dtype=bool) if a is None else (a[:n] - u[:n] < amount)
            reasons.append(Reason(insufficient(resource), short))
            bad |= short
        return FilterResult(~bad, reasons)

    def _requested_and_allocatable(self, pod, rows, resource: str) -> tuple[np.ndarray, np.ndarray] | None:
        table = self.cache.table
        req = pod.requests
        if resource == "cpu":
            return table.nonzero_cpu[rows] + req.nonzero_cpu, table.allocatable["cpu"][rows]
        if resource == "memory":
            return table.nonzero_memory[rows] + req.nonzero_memory, table.allocatable["memory"][rows]
        amount = dict(req.extended).get(resource, req.ephemeral if resource == "ephemeral-storage" else 0)
        a, u = table.allocatable.get(resource), table.requested.get(resource)
        if a is None or not a[rows].any():
            return None  # Kubernetes skips a resource no node offers
        return u[rows] + amount, a[rows]

    def score(self, state: CycleState, pod, rows) -> np.ndarray:
        # Float arithmetic with floor equals Kubernetes' integer arithmetic here: quotients are at
        # most 100 and amounts stay far below 2**53. It is several times faster than int64 division.
        total = None
        weights = 0
        for resource, weight in self.resources:
            pair = self._requested_and_allocatable(pod, rows, resource)
            if pair is None:
                continue
            requested, allocatable = pair
            safe = np.maximum(allocatable, 1).astype(np.float64)
            if self.strategy == "LeastAllocated":
                s = np.floor(np.maximum(allocatable - requested, 0) * 100.0 / safe)
            elif self.strategy == "MostAllocated":
                s = np.floor(requested * 100.0 / safe)
                s[requested > allocatable] = 0
            else:
                utilization = np.minimum(requested * 100.0 / safe, 100.0)
                utilization[allocatable == 0] = 100.0
                s = np.floor(np.interp(utilization, self.shape_x, self.shape_y))
            total = s * weight if total is None else total + s * weight
            weights += weight
        if total is None:
            return np.zeros(count_rows(rows))
        return np.floor(total / weights)
