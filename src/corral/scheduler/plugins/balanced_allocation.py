"""NodeResourcesBalancedAllocation: prefer nodes where cpu and memory would be used in similar
proportions, so that no node runs out of one while the other sits idle."""

from __future__ import annotations

import numpy as np

from corral.scheduler.framework.interface import CycleState, Plugin
from corral.scheduler.plugins.node_resources_fit import cpu_memory_usage

NAME = "NodeResourcesBalancedAllocation"


class BalancedAllocation(Plugin):
    NAME = NAME

    def score(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        usage = cpu_memory_usage(state, self.cache.table, pod, rows)
        (cpu_req, cpu_alloc), (mem_req, mem_alloc) = usage["cpu"], usage["memory"]
        cpu = np.minimum(cpu_req / np.maximum(cpu_alloc, 1.0), 1.0)
        mem = np.minimum(mem_req / np.maximum(mem_alloc, 1.0), 1.0)
        std = np.abs(cpu - mem) / 2  # the standard deviation of two fractions
        return np.floor((1.0 - std) * 100)
