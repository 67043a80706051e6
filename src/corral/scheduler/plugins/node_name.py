"""NodeName: a pod that names its node (spec.nodeName) fits only there."""

from __future__ import annotations

import numpy as np

from corral.scheduler.framework.interface import ALL_PASS, CycleState, FilterResult, Plugin

NAME = "NodeName"
REASON = "node(s) didn't match the requested node name"


class NodeName(Plugin):
    NAME = NAME
    ROW_LOCAL_FILTER = True  # a node of that name joining starts a new epoch (a new row)
    TEMPLATE_SIGNATURE = True

    def signature(self, pod) -> object:
        return pod.node_name

    def filter_rows(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        if not pod.node_name:
            return np.ones(len(rows), dtype=bool)
        return rows == self.cache.table.row_of.get(pod.node_name, -1)

    def filter_one(self, state: CycleState, pod, row: int) -> bool:
        return not pod.node_name or row == self.cache.table.row_of.get(pod.node_name, -1)

    def filter(self, state: CycleState, pod, candidates: np.ndarray) -> FilterResult:
        table = self.cache.table
        if not pod.node_name:
            return ALL_PASS
        wanted = np.zeros(table.size, dtype=bool)
        row = table.row_of.get(pod.node_name)
        if row is not None:
            wanted[row] = True
        return FilterResult.reject_where(~wanted, REASON, unresolvable=True)
