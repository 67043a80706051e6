"""NodePorts: two pods cannot publish the same host port and protocol on one node."""

from __future__ import annotations

import numpy as np

from corral.scheduler.framework.interface import CycleState, FilterResult, Plugin
from corral.scheduler.framework.status import SKIP, SUCCESS, Status

NAME = "NodePorts"
REASON = "node(s) didn't have free ports for the requested pod ports"


class NodePorts(Plugin):
    NAME = NAME
    ROW_LOCAL_FILTER = True
    TEMPLATE_SIGNATURE = True

    def signature(self, pod) -> object:
        return pod.host_ports

    def pre_filter(self, state: CycleState, pod) -> Status:
        return SUCCESS if pod.host_ports else SKIP

    def _taken(self, pod, rows, count: int) -> np.ndarray:
        table = self.cache.table
        taken = np.zeros(count, dtype=bool)
        for port in pod.host_ports:
            used = table.ports.get((port.protocol, port.port))
            if used is not None:
                taken |= used[rows] > 0
        return taken

    def filter(self, state: CycleState, pod, candidates: np.ndarray) -> FilterResult:
        n = self.cache.table.size
        return FilterResult.reject_where(self._taken(pod, slice(0, n), n), REASON)

    def filter_rows(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        return ~self._taken(pod, rows, len(rows))

    def filter_one(self, state: CycleState, pod, row: int) -> bool:
        return not self._taken(pod, [row], 1)[0]
