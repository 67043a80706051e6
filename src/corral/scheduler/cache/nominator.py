"""Nominated pods: a preemptor's claim on the node where its victims are terminating.

When preemption picks a node, the preemptor is *nominated* there (``status.nominatedNodeName``)
and waits for its victims to go. Meanwhile its requests (resources and host ports) count on that
node for every pod of the same or lower priority, so nobody else takes the room that was made
for it; a pod of higher priority does not see the claim (Kubernetes' rule: it may take the room,
and the nominated pod then preempts again or waits). The preemptor does not see its own claim.

The claim is counted in the node table like an assumed pod, always; :meth:`Nominator.hidden_from`
takes out, for the length of one scheduling cycle, the claims that pod must not see. Claims of
lower priority are rare (nominations last while victims terminate), so the common cycle hides
only its own claim or nothing.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from corral.scheduler.cache.node_table import NodeTable
from corral.scheduler.framework.podinfo import PodInfo

__all__ = ["Nominator", "Nomination"]


@dataclass(slots=True)
class Nomination:
    info: PodInfo
    node: str
    row: int


class Nominator:
    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.pods: dict[str, Nomination] = {}
        self._by_priority: dict[int, set[str]] = {}

    def __len__(self) -> int:
        return len(self.pods)

    def node_of(self, key: str) -> str:
        n = self.pods.get(key)
        return n.node if n is not None else ""

    def _count(self, n: Nomination, sign: int) -> None:
        self.table.add_requests(n.row, n.info.requests, n.info.host_ports, sign)
        if sign < 0:
            self.table.release_if_empty(n.row)

    def nominate(self, info: PodInfo, node: str) -> None:
        """Claim room for ``info`` on ``node`` (replacing an earlier claim of the same pod)."""
        current = self.pods.get(info.key)
        if current is not None and current.node == node and current.info.requests == info.requests:
            return
        self.clear(info.key)
        n = self.pods[info.key] = Nomination(info, node, self.table.row_for_pods(node))
        self._by_priority.setdefault(info.priority, set()).add(info.key)
        self._count(n, +1)

    def clear(self, key: str) -> bool:
        """Drop ``key``'s claim (it was bound, deleted or nominated elsewhere); whether it had one."""
        n = self.pods.pop(key, None)
        if n is None:
            return False
        keys = self._by_priority[n.info.priority]
        keys.discard(key)
        if not keys:
            del self._by_priority[n.info.priority]
        self._count(n, -1)
        return True

    def lower_on(self, node: str, priority: int) -> list[str]:
        """Pods nominated on ``node`` with a priority below ``priority`` (a preemption there takes
        their room: their claims are cleared)."""
        return [k for p, keys in self._by_priority.items() if p < priority
                for k in keys if self.pods[k].node == node]

    @contextmanager
    def hidden_from(self, pod: PodInfo) -> Iterator[None]:
        """For one cycle of ``pod``: un-count the claims it must not see (its own, and those of
        lower priority); they count again afterwards."""
        hidden = [self.pods[k] for p, keys in self._by_priority.items() if p < pod.priority for k in keys]
        own = self.pods.get(pod.key)
        if own is not None and own.info.priority >= pod.priority:
            hidden.append(own)
        for n in hidden:
            self.table.add_requests(n.row, n.info.requests, n.info.host_ports, -1)
        try:
            yield
        finally:
            for n in hidden:
                self.table.add_requests(n.row, n.info.requests, n.info.host_ports, +1)
