"""NodeResourcesBalancedAllocation: prefer nodes where cpu and memory would be used in similar
proportions, so that no node runs out of one while the other sits idle."""

from __future__ import annotations

import numpy as np

from corral.scheduler.framework.interface import CycleState, Plugin

NAME = "NodeResourcesBalancedAllocation"


class BalancedAllocation(Plugin):
    NAME = NAME

    def score(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        table = self.cache.table
        req = pod.requests
        cpu_alloc = np.maximum(table.allocatable["cpu"][rows], 1)
        mem_alloc = np.maximum(table.allocatable["memory"][rows], 1)
        cpu = np.minimum((table.nonzero_cpu[rows] + req.nonzero_cpu) / cpu_alloc, 1.0)
        mem = np.minimum((table.nonzero_memory[rows] + req.nonzero_memory) / mem_alloc, 1.0)
        std = np.abs(cpu - mem) / 2  # the standard deviation of two fractions
        return np.floor((1.0 - std) * 100)
