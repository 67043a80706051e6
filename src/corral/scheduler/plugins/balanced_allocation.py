"""NodeResourcesBalancedAllocation: prefer nodes where cpu and memory would be used in similar
proportions, so that no node runs out of one while the other sits idle.

Kubernetes' formula: with f = min(requested / allocatable, 1) per resource the node offers, the score
is ⌊(1 − std(f)) × 100⌋, and for two resources std = |f_cpu − f_memory| / 2. Requests count as
written (not the non-zero defaults NodeResourcesFit scores with), and a pod that requests neither
cpu nor memory is not scored at all: every node would look the same to it, and Kubernetes found such
pods piling onto one node.
"""

from __future__ import annotations

import math

import numpy as np

from corral.scheduler.framework.interface import CycleState, Plugin
from corral.scheduler.framework.status import SKIP, SUCCESS, Status

NAME = "NodeResourcesBalancedAllocation"


class BalancedAllocation(Plugin):
    NAME = NAME
    ROW_LOCAL_SCORE = True
    TEMPLATE_SIGNATURE = True

    def signature(self, pod) -> object:
        return pod.requests.cpu, pod.requests.memory

    def pre_score(self, state: CycleState, pod, rows: np.ndarray) -> Status:
        req = pod.requests
        return SKIP if req.cpu == 0 and req.memory == 0 else SUCCESS

    def score_one(self, state: CycleState, pod, row: int) -> float:
        """:meth:`score` for one row in plain Python, the same float operations in the same order."""
        table, req = self.cache.table, pod.requests
        cpu = min((table.requested_f["cpu"].item(row) + req.cpu) / table.alloc_safe_f["cpu"].item(row), 1.0)
        mem = min((table.requested_f["memory"].item(row) + req.memory) / table.alloc_safe_f["memory"].item(row), 1.0)
        std = abs(cpu - mem) / 2
        if not (table.offered_everywhere("cpu") and table.offered_everywhere("memory")):
            if not (table.alloc_f["cpu"][row] > 0 and table.alloc_f["memory"][row] > 0):
                std = 0.0
        return float(math.floor((1.0 - std) * 100))

    def score(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        table, req = self.cache.table, pod.requests
        cpu = table.requested_f["cpu"][rows] + req.cpu
        cpu /= table.alloc_safe_f["cpu"][rows]
        np.minimum(cpu, 1.0, out=cpu)
        mem = table.requested_f["memory"][rows] + req.memory
        mem /= table.alloc_safe_f["memory"][rows]
        np.minimum(mem, 1.0, out=mem)
        # std = |cpu − mem| / 2, computed in place, in exactly this order (another order can round
        # differently from Kubernetes' float64 arithmetic).
        cpu -= mem
        np.abs(cpu, out=cpu)
        cpu /= 2
        if not (table.offered_everywhere("cpu") and table.offered_everywhere("memory")):
            # A resource the node does not offer is left out: one fraction has no deviation.
            offers_both = (table.alloc_f["cpu"][rows] > 0) & (table.alloc_f["memory"][rows] > 0)
            cpu[~offers_both] = 0.0
        np.subtract(1.0, cpu, out=cpu)
        cpu *= 100
        return np.floor(cpu, out=cpu)
