"""Preemption on one node with every filter: Kubernetes' SelectVictimsOnNode, as a dry run.

Used to check the node the columns chose, and where the columns cannot tell (the pod's affinity or
spreading, another pod's anti-affinity, a custom filter): take every lower-priority pod off the
node in the cache's counts, run the profile's filters for that node alone; if the pod fits, put the
victims back one by one, most important first, keeping each one the pod still fits beside. The
cache is exactly as before when it returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.scheduler.cache.cache import Cache, CachedPod
from corral.scheduler.framework.interface import CycleState
from corral.scheduler.framework.podinfo import PodInfo

__all__ = ["fits_on", "select_victims_on_row", "RowResult"]


@dataclass(slots=True)
class RowResult:
    victims: list[CachedPod] | None  # None: preemption cannot make room here
    reasons: list[str]  # why not, when victims is None
    violations: int = 0  # victims whose removal breaks a PodDisruptionBudget


def budget_violations(cache: Cache, pods: list[CachedPod]) -> list[bool]:
    """For ``pods`` in order of importance: whether each takes a budget below zero (Kubernetes'
    filterPodsWithPDBViolation, every budget counted from its allowance on each node)."""
    allowed = {key: b.allowed for key, b in cache.budgets.items()}
    out = []
    cols = cache.columns
    for cached in pods:
        label_set = int(cols.label_set[cached.slot])
        broken = False
        for key, budget in cache.budgets.items():
            if budget.selects(label_set, cached.info.namespace, cached.info.labels):
                allowed[key] -= 1
                broken |= allowed[key] < 0
        out.append(broken)
    return out


def fits_on(fwk: Any, cache: Cache, pod: PodInfo, row: int) -> tuple[bool, list[str]]:
    """Whether every filter of ``fwk`` accepts ``pod`` on ``row`` as the cache counts now, and the
    reasons if not."""
    only = np.zeros(cache.table.size, dtype=bool)
    only[row] = cache.table.valid[row]
    feasible, diagnosis = fwk.find_feasible(CycleState(), pod, cache.table, only=only)
    if len(feasible):
        return True, []
    return False, diagnosis.node_reasons(row)[1]


def importance(cached: CachedPod) -> tuple:
    """Sort key, most important first: higher priority, then earlier start."""
    from corral.scheduler.cache.pod_columns import start_time

    return (-cached.info.priority, start_time(cached.info.obj))


def select_victims_on_row(fwk: Any, cache: Cache, pod: PodInfo, row: int) -> RowResult:
    lower = [c for c in cache.pods_on(row) if c.info.priority < pod.priority]
    if not lower:
        return RowResult(None, ["No preemption victims found for incoming pod"])
    with cache.lifted(lower) as lift:
        ok, reasons = fits_on(fwk, cache, pod, row)
        if not ok:
            return RowResult(None, reasons)
        victims, violations = [], 0
        ordered = sorted((c for c in lower if not c.terminating), key=importance)
        broken = budget_violations(cache, ordered)
        # Those that would break a budget first: they are the likeliest to be kept.
        for cached, breaks in sorted(zip(ordered, broken), key=lambda pair: not pair[1]):
            lift.put_back(cached)
            if not fits_on(fwk, cache, pod, row)[0]:
                lift.take_out(cached)
                victims.append(cached)
                violations += breaks
        return RowResult(victims, [], violations)
