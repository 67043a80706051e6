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
        (cpu_req, _, cpu_safe), (mem_req, _, mem_safe) = usage["cpu"], usage["memory"]
        cpu = cpu_req / cpu_safe
        np.minimum(cpu, 1.0, out=cpu)
        mem = mem_req / mem_safe
        np.minimum(mem, 1.0, out=mem)
        # (1 − std) × 100 with std = |cpu − mem| / 2, the standard deviation of two fractions;
        # computed in place, in exactly this order (another order can round differently).
        cpu -= mem
        np.abs(cpu, out=cpu)
        cpu /= 2
        np.subtract(1.0, cpu, out=cpu)
        cpu *= 100
        return np.floor(cpu, out=cpu)
