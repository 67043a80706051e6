"""NodeResourcesFit: a pod fits a node only if every resource it requests is free there; the score
prefers emptier nodes (LeastAllocated, the default), fuller ones (MostAllocated), or follows a
utilisation → score curve (RequestedToCapacityRatio).

Requested amounts include pods the scheduler has assumed but not yet seen bound, so a burst of
pods spreads instead of piling onto the node that looked emptiest. Scores use Kubernetes' integer
arithmetic and its non-zero requests (a pod that requests nothing counts as 100m cpu and 200Mi).
"""

from __future__ import annotations

import math

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
    memory, as floats. Computed for both at the first call of a cycle and kept in ``state``."""
    usage = state.get(USAGE_KEY)
    if usage is None:
        req = pod.requests
        usage = state[USAGE_KEY] = {
            name: (table.nonzero_f[name][rows] + amount, table.alloc_f[name][rows], table.alloc_safe_f[name][rows])
            for name, amount in (("cpu", req.nonzero_cpu), ("memory", req.nonzero_memory))
        }
    return usage


def _check_shape(shape: list[dict]) -> None:
    """The shape kube-scheduler accepts: at least one point, utilisation 0–100 strictly increasing,
    scores 0–10."""
    if not shape:
        raise ValueError("NodeResourcesFit: requestedToCapacityRatio.shape: at least one point must be specified")
    last = -1
    for i, point in enumerate(shape):
        utilization, score = point.get("utilization"), point.get("score")
        if not isinstance(utilization, int) or not 0 <= utilization <= 100:
            raise ValueError(f"NodeResourcesFit: requestedToCapacityRatio.shape[{i}].utilization "
                             f"must be an integer from 0 to 100, not {utilization!r}")
        if utilization <= last:
            raise ValueError(f"NodeResourcesFit: requestedToCapacityRatio.shape[{i}].utilization "
                             "values must be sorted in increasing order")
        if not isinstance(score, int) or not 0 <= score <= 10:
            raise ValueError(f"NodeResourcesFit: requestedToCapacityRatio.shape[{i}].score "
                             f"must be an integer from 0 to 10, not {score!r}")
        last = utilization


class NodeResourcesFit(Plugin):
    NAME = NAME
    ROW_LOCAL_FILTER = ROW_LOCAL_SCORE = True
    TEMPLATE_SIGNATURE = True
    ignored_resources: frozenset[str] = frozenset()  # managed by an extender (ignoredByScheduler)

    def __init__(self, handle) -> None:
        super().__init__(handle)
        strategy = self.handle.args.get("scoringStrategy") or {}
        self.strategy = strategy.get("type", "LeastAllocated")
        if self.strategy not in ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"):
            raise ValueError(f"NodeResourcesFit: unknown scoringStrategy.type {self.strategy!r}")
        self.resources = [(r["name"], int(r.get("weight") or 1))
                          for r in strategy.get("resources") or [{"name": "cpu"}, {"name": "memory"}]]
        for name, weight in self.resources:
            if not 1 <= weight <= 100:
                raise ValueError(f"NodeResourcesFit: resource weight of {name} not in valid range [1, 100]")
        shape = (strategy.get("requestedToCapacityRatio") or {}).get("shape") or []
        if self.strategy == "RequestedToCapacityRatio":
            _check_shape(shape)
        self.shape_x = np.array([float(p["utilization"]) for p in shape])
        self.shape_y = np.array([float(p["score"]) * 10 for p in shape])  # 0-10 → 0-100

    def pre_filter(self, state: CycleState, pod) -> Status:
        return SUCCESS

    def signature(self, pod) -> object:
        return pod.requests

    def _shortages(self, pod, rows, count: int) -> tuple[np.ndarray, list[Reason]]:
        """(rows short of something, the reasons) over ``rows`` (a slice or row numbers)."""
        free = self.cache.table.free  # allocatable − requested, kept current by the table
        req = pod.requests
        pods_full = free["pods"][rows] < 1
        bad = pods_full.copy()
        reasons = [Reason(TOO_MANY_PODS, pods_full)]
        for resource, amount in (("cpu", req.cpu), ("memory", req.memory), ("ephemeral-storage", req.ephemeral),
                                 *req.extended):
            if amount <= 0 or resource in self.ignored_resources:
                continue
            col = free.get(resource)
            short = np.ones(count, dtype=bool) if col is None else col[rows] < amount
            reasons.append(Reason(insufficient(resource), short))
            bad |= short
        return bad, reasons

    def filter(self, state: CycleState, pod, candidates: np.ndarray) -> FilterResult:
        n = self.cache.table.size
        bad, reasons = self._shortages(pod, slice(0, n), n)
        if not np.any(bad & candidates):
            return ALL_PASS  # the usual case: every candidate has room, and no reasons are needed
        return FilterResult(~bad, reasons)

    def filter_rows(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        return ~self._shortages(pod, rows, len(rows))[0]

    def filter_one(self, state: CycleState, pod, row: int) -> bool:
        free = self.cache.table.free
        if free["pods"].item(row) < 1:
            return False
        req = pod.requests
        for resource, amount in (("cpu", req.cpu), ("memory", req.memory), ("ephemeral-storage", req.ephemeral),
                                 *req.extended):
            if amount <= 0 or resource in self.ignored_resources:
                continue
            col = free.get(resource)
            if col is None or col.item(row) < amount:
                return False
        return True

    def _requested_and_allocatable(self, pod, rows, resource: str, state: CycleState
                                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(requested with the pod, allocatable, allocatable or 1), as floats, for the scored rows;
        None when Kubernetes leaves the resource out of every node's score (an extended resource the
        pod does not request)."""
        table = self.cache.table
        if resource in ("cpu", "memory"):
            return cpu_memory_usage(state, table, pod, rows)[resource]
        req = pod.requests
        amount = dict(req.extended).get(resource, req.ephemeral if resource == "ephemeral-storage" else 0)
        if amount == 0 and resource != "ephemeral-storage":
            return None
        a, u = table.allocatable.get(resource), table.requested.get(resource)
        if a is None:
            return None  # no node offers it: out of every node's score
        alloc = a[rows].astype(np.float64)
        return (u[rows] + amount).astype(np.float64), alloc, np.maximum(alloc, 1.0)

    def _resource_score(self, requested: np.ndarray, allocatable: np.ndarray, safe: np.ndarray) -> np.ndarray:
        """One resource's score per row, 0–100, as kube-scheduler computes it in int64.

        Float arithmetic with floor equals the integer arithmetic here: quotients are at most 100
        and amounts stay far below 2**53. It is several times faster than int64 division."""
        if self.strategy == "LeastAllocated":  # (capacity − requested) × 100 / capacity; 0 when over
            s = allocatable - requested  # in place from here: no temporaries on the hot path
            np.maximum(s, 0.0, out=s)
            s *= 100.0
            s /= safe
            return np.floor(s, out=s)
        if self.strategy == "MostAllocated":  # requested × 100 / capacity, requested capped at capacity
            s = np.minimum(requested, allocatable)
            s *= 100.0
            s /= safe
            return np.floor(s, out=s)
        # RequestedToCapacityRatio: utilisation in whole percent (capped at allocatable, so 100 when
        # over it; rows offering none are left out by score()), then the shape's broken line with
        # Go's integer division, which truncates toward zero.
        utilization = np.floor(np.minimum(requested, allocatable) * 100.0 / safe)
        return self._broken_line(utilization)

    def _broken_line(self, p: np.ndarray) -> np.ndarray:
        xs, ys = self.shape_x, self.shape_y
        out = np.full(len(p), ys[-1])
        done = np.zeros(len(p), dtype=bool)
        for i in range(len(xs)):
            here = ~done & (p <= xs[i])
            if i == 0:
                out[here] = ys[0]
            else:
                out[here] = ys[i - 1] + np.trunc((ys[i] - ys[i - 1]) * (p[here] - xs[i - 1]) / (xs[i] - xs[i - 1]))
            done |= here
        return out

    def score_one(self, state: CycleState, pod, row: int) -> float | None:
        """:meth:`score` for one row in plain Python, the same float operations in the same order;
        None where only the columns answer (RequestedToCapacityRatio, resources besides cpu and memory)."""
        if self.strategy == "RequestedToCapacityRatio":
            return None
        table, req = self.cache.table, pod.requests
        least = self.strategy == "LeastAllocated"
        total, weights, counted_all = 0.0, 0.0, True
        for i, (resource, weight) in enumerate(self.resources):
            if resource == "cpu":
                requested = table.nonzero_f["cpu"].item(row) + req.nonzero_cpu  # item(): a Python float
            elif resource == "memory":
                requested = table.nonzero_f["memory"].item(row) + req.nonzero_memory
            else:
                return None
            allocatable = table.alloc_f[resource].item(row)
            safe = allocatable if allocatable >= 1.0 else 1.0  # alloc_safe_f: allocatable, at least 1
            if least:
                s = math.floor(max(allocatable - requested, 0.0) * 100.0 / safe)
            else:
                s = math.floor(min(requested, allocatable) * 100.0 / safe)
            if table.offered_everywhere(resource):
                weights += weight
            else:
                counted_all = False
                if allocatable > 0:
                    weights += float(weight)
                else:
                    s = 0.0
            s = float(s) * weight if weight != 1 else float(s)
            total = s if i == 0 else total + s
        if counted_all:
            return float(math.floor(total / weights)) if weights != 1 else total
        return float(math.floor(total / weights)) if weights else 0.0

    def score(self, state: CycleState, pod, rows) -> np.ndarray:
        """kube-scheduler's node score: the weighted mean of the resource scores, over the resources
        the node offers (allocatable > 0); Least/MostAllocated divide as integers,
        RequestedToCapacityRatio counts only positive resource scores and rounds."""
        table = self.cache.table
        ratio = self.strategy == "RequestedToCapacityRatio"
        total = None
        weights: np.ndarray | int = 0
        for resource, weight in self.resources:
            found = self._requested_and_allocatable(pod, rows, resource, state)
            if found is None:
                continue
            requested, allocatable, safe = found
            s = self._resource_score(requested, allocatable, safe)
            if ratio or not table.offered_everywhere(resource):
                counted = allocatable > 0
                if ratio:
                    counted &= s > 0
                s[~counted] = 0.0
                weights = weights + counted * float(weight)
            else:
                weights = weights + weight
            if weight != 1:
                s *= weight
            if total is None:
                total = s
            else:
                total += s
        if total is None:
            return np.zeros(count_rows(rows))
        if isinstance(weights, int):  # every row counts every resource: one divisor
            if weights != 1:
                total /= weights
                np.floor(total, out=total)
            return total
        with np.errstate(divide="ignore", invalid="ignore"):
            total /= weights
        total = np.floor(total + 0.5, out=total) if ratio else np.floor(total, out=total)  # Go's math.Round
        total[weights == 0] = 0.0
        return total
