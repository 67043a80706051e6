"""NodeName: a pod that names its node (spec.nodeName) fits only there."""

from __future__ import annotations

import numpy as np

from corral.scheduler.framework.interface import ALL_PASS, CycleState, FilterResult, Plugin

NAME = "NodeName"
REASON = "node(s) didn't match the requested node name"


class NodeName(Plugin):
    NAME = NAME

    def filter(self, state: CycleState, pod, candidates: np.ndarray) -> FilterResult:
        table = self.cache.table
        if not pod.node_name:
            return ALL_PASS
        wanted = np.zeros(table.size, dtype=bool)
        row = table.row_of.get(pod.node_name)
        if row is not None:
            wanted[row] = True
        return FilterResult.reject_where(~wanted, REASON, unresolvable=True)
