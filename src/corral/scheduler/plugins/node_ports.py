"""NodePorts: two pods cannot publish the same host port and protocol on one node."""

from __future__ import annotations

import numpy as np

from corral.scheduler.framework.interface import CycleState, FilterResult, Plugin
from corral.scheduler.framework.status import SKIP, SUCCESS, Status

NAME = "NodePorts"
REASON = "node(s) didn't have free ports for the requested pod ports"


class NodePorts(Plugin):
    NAME = NAME

    def pre_filter(self, state: CycleState, pod) -> Status:
        return SUCCESS if pod.host_ports else SKIP

    def filter(self, state: CycleState, pod, candidates: np.ndarray) -> FilterResult:
        table = self.cache.table
        taken = np.zeros(table.size, dtype=bool)
        for port in pod.host_ports:
            used = table.ports.get((port.protocol, port.port))
            if used is not None:
                taken |= used[: table.size] > 0
        return FilterResult.reject_where(taken, REASON)
