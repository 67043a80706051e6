"""NodeUnschedulable: cordoned nodes (spec.unschedulable) take no new pods, unless a pod tolerates
the ``node.kubernetes.io/unschedulable`` taint. Pods already there keep running."""

from __future__ import annotations

import numpy as np

from corral.scheduler.framework.interface import ALL_PASS, CycleState, FilterResult, Plugin

NAME = "NodeUnschedulable"
REASON = "node(s) were unschedulable"
TAINT_KEY = "node.kubernetes.io/unschedulable"


def tolerates_unschedulable(tolerations) -> bool:
    for t in tolerations:
        key, op, effect = t.get("key", ""), t.get("operator", "Equal"), t.get("effect", "")
        if effect not in ("", "NoSchedule"):
            continue
        if (key == TAINT_KEY and (op == "Exists" or t.get("value", "") == "")) or (not key and op == "Exists"):
            return True
    return False


class NodeUnschedulable(Plugin):
    NAME = NAME
    ROW_LOCAL_FILTER = True
    TEMPLATE_SIGNATURE = True

    def signature(self, pod) -> object:
        return tolerates_unschedulable(pod.tolerations)

    def filter_rows(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        if tolerates_unschedulable(pod.tolerations):
            return np.ones(len(rows), dtype=bool)
        return ~self.cache.table.unschedulable[rows]

    def filter_one(self, state: CycleState, pod, row: int) -> bool:
        return not self.cache.table.unschedulable[row] or tolerates_unschedulable(pod.tolerations)

    def filter(self, state: CycleState, pod, candidates: np.ndarray) -> FilterResult:
        table = self.cache.table
        cordoned = table.unschedulable[: table.size]
        if tolerates_unschedulable(pod.tolerations) or not cordoned.any():
            return ALL_PASS
        return FilterResult.reject_where(cordoned.copy(), REASON, unresolvable=True)
