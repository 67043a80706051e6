"""The scheduling queue: activeQ, backoffQ and the unschedulable set.

- **activeQ** holds pods ready to be tried, ordered by the profile's QueueSort key (priority, then
  arrival).
- **backoffQ** holds pods whose last attempt failed and whose backoff (1 s doubling to 10 s per
  attempt) has not run out; they move to activeQ when it has.
- **unschedulable** holds pods no node could take. A cluster event that could make them fit
  (a node added or changed, a pod deleted or unbound, a pod with affinity terms added) moves those
  whose rejecting plugins care about that event back — to backoffQ if still backing off, else to
  activeQ. A periodic flush moves every pod that has waited longer than the fallback interval
  (30 s) and, at the latest, after 5 minutes.

A pod whose attempt fails for any reason comes back through backoff: none stays Pending forever
while some node could take it. The queue is single-threaded (event loop) and takes its clock as a
parameter, so tests drive time by hand.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass
from typing import Callable

from corral.scheduler.framework.podinfo import PodInfo

__all__ = ["SchedulingQueue", "QueuedPod", "ClusterEvent", "EVENT_PLUGINS"]


@dataclass(slots=True, eq=False)
class QueuedPod:
    info: PodInfo
    initial_attempt: float
    timestamp: float
    attempts: int = 0
    unschedulable_plugins: frozenset[str] = frozenset()
    where: str = ""  # "active" | "backoff" | "unschedulable" | "in-flight"
    _seq: int = 0
    _parked: int = 0  # when it became unschedulable (the queue's sequence)

    @property
    def key(self) -> str:
        return self.info.key


class ClusterEvent:
    NODE_ADD = "NodeAdd"
    NODE_UPDATE = "NodeUpdate"
    POD_DELETE = "AssignedPodDelete"
    POD_ADD = "AssignedPodAdd"
    NAMESPACE_CHANGE = "NamespaceChange"


# Which plugins' rejections an event may undo ("*": any).
EVENT_PLUGINS: dict[str, frozenset[str]] = {
    ClusterEvent.NODE_ADD: frozenset({"*"}),
    ClusterEvent.NODE_UPDATE: frozenset({"*"}),
    ClusterEvent.POD_DELETE: frozenset({"NodeResourcesFit", "NodePorts", "InterPodAffinity", "PodTopologySpread"}),
    ClusterEvent.POD_ADD: frozenset({"InterPodAffinity", "PodTopologySpread"}),
    ClusterEvent.NAMESPACE_CHANGE: frozenset({"InterPodAffinity"}),
}


@dataclass(slots=True)
class QueueSettings:
    backoff_initial: float = 1.0
    backoff_max: float = 10.0
    unschedulable_flush: float = 30.0  # cara's pending re-check fallback
    unschedulable_max: float = 300.0  # Kubernetes' podMaxInUnschedulablePodsDuration


class SchedulingQueue:
    def __init__(self, sort_key: Callable[[QueuedPod], tuple], clock: Callable[[], float],
                 settings: QueueSettings | None = None) -> None:
        self._sort_key = sort_key
        self._clock = clock
        self.settings = settings or QueueSettings()
        self._pods: dict[str, QueuedPod] = {}
        self._active: list[tuple[tuple, int, QueuedPod]] = []
        self._backoff: list[tuple[float, int, QueuedPod]] = []
        self._unschedulable: dict[str, QueuedPod] = {}  # in the order they were parked
        # The same pods by the plugins that rejected them ("": none recorded), so that an event
        # looks only at those it could help: with every pod scanned, 51,000 unschedulable pods
        # evicted one by one cost 51,000 × 51,000 checks.
        self._rejected_by: dict[str, dict[str, QueuedPod]] = {}
        self._seq = itertools.count()
        self._wakeup = asyncio.Event()
        self._closed = False

    # --- adding and removing ----------------------------------------------------------------------------

    def add(self, info: PodInfo) -> None:
        """A new pending pod, or an update of one the queue holds."""
        qp = self._pods.get(info.key)
        if qp is None:
            now = self._clock()
            qp = self._pods[info.key] = QueuedPod(info, now, now)
            self._to_active(qp)
            return
        old = qp.info
        qp.info = info
        if qp.where == "unschedulable" and _may_now_fit(old, info):
            self._unpark(qp.key)
            self._to_active_or_backoff(qp)

    def delete(self, key: str) -> None:
        qp = self._pods.pop(key, None)
        if qp is not None:
            self._unpark(key)
            qp.where = "deleted"  # heap entries are skipped lazily

    def __contains__(self, key: str) -> bool:
        return key in self._pods

    def get(self, key: str) -> QueuedPod | None:
        return self._pods.get(key)

    # --- serving ------------------------------------------------------------------------------------

    def _to_active(self, qp: QueuedPod) -> None:
        qp.where = "active"
        qp._seq = next(self._seq)
        heapq.heappush(self._active, (self._sort_key(qp), qp._seq, qp))
        self._wakeup.set()

    def _backoff_until(self, qp: QueuedPod) -> float:
        s = self.settings
        delay = min(s.backoff_initial * (2 ** max(qp.attempts - 1, 0)), s.backoff_max)
        return qp.timestamp + delay

    def _to_backoff(self, qp: QueuedPod) -> None:
        qp.where = "backoff"
        qp._seq = next(self._seq)
        heapq.heappush(self._backoff, (self._backoff_until(qp), qp._seq, qp))

    def _to_active_or_backoff(self, qp: QueuedPod) -> None:
        if qp.attempts and self._backoff_until(qp) > self._clock():
            self._to_backoff(qp)
        else:
            self._to_active(qp)

    def pop_nowait(self) -> QueuedPod | None:
        """The next pod to try, or None; the pod is in flight until requeued or done."""
        self.flush_backoff()
        while self._active:
            _, seq, qp = heapq.heappop(self._active)
            if qp.where != "active" or qp._seq != seq:
                continue  # stale entry: deleted, or moved since
            qp.where = "in-flight"
            qp.attempts += 1
            return qp
        return None

    async def pop(self) -> QueuedPod:
        while True:
            qp = self.pop_nowait()
            if qp is not None:
                return qp
            if self._closed:
                raise asyncio.CancelledError()
            self._wakeup.clear()
            delay = None
            if self._backoff:
                delay = max(0.0, self._backoff[0][0] - self._clock())
            try:
                await asyncio.wait_for(self._wakeup.wait(), delay)
            except asyncio.TimeoutError:
                pass

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()

    # --- after an attempt ----------------------------------------------------------------------------

    def done(self, key: str) -> None:
        """The pod was scheduled (assumed): it leaves the queue."""
        qp = self._pods.get(key)
        if qp is not None and qp.where == "in-flight":
            del self._pods[key]

    def requeue_unschedulable(self, qp: QueuedPod, plugins: frozenset[str]) -> None:
        """No node fits: wait for a cluster event that could change that."""
        if self._pods.get(qp.key) is not qp:
            return  # deleted meanwhile
        self._unpark(qp.key)
        qp.timestamp = self._clock()
        qp.unschedulable_plugins = plugins
        qp.where = "unschedulable"
        qp._parked = next(self._seq)
        self._unschedulable[qp.key] = qp
        for plugin in plugins or ("",):
            self._rejected_by.setdefault(plugin, {})[qp.key] = qp

    def _unpark(self, key: str) -> QueuedPod | None:
        """Take a pod off the unschedulable ones (None if it is not one)."""
        qp = self._unschedulable.pop(key, None)
        if qp is not None:
            for plugin in qp.unschedulable_plugins or ("",):
                parked = self._rejected_by[plugin]
                del parked[key]
                if not parked:
                    del self._rejected_by[plugin]
        return qp

    def requeue_backoff(self, qp: QueuedPod) -> None:
        """The attempt or the binding failed for a reason other than fit: retry after backoff."""
        if self._pods.get(qp.key) is not qp:
            self._pods[qp.key] = qp  # a failed bind brings a pod back that had left the queue
        qp.timestamp = self._clock()
        self._to_backoff(qp)

    # --- moves ---------------------------------------------------------------------------------------

    def on_event(self, event: str) -> int:
        """A cluster event: move the unschedulable pods it could help. Returns how many moved."""
        if not self._unschedulable:  # the common case: every binding is an event
            return 0
        plugins = EVENT_PLUGINS[event]
        if "*" in plugins:
            moved = list(self._unschedulable.values())
        else:  # those a plugin of the event rejected, or no recorded plugin did, in the order they were parked
            found: dict[str, QueuedPod] = {}
            for plugin in ("", *plugins):
                found.update(self._rejected_by.get(plugin, ()))
            moved = sorted(found.values(), key=lambda qp: qp._parked)
        for qp in moved:
            self._unpark(qp.key)
            self._to_active_or_backoff(qp)
        return len(moved)

    def flush_backoff(self) -> None:
        now = self._clock()
        while self._backoff and self._backoff[0][0] <= now:
            _, seq, qp = heapq.heappop(self._backoff)
            if qp.where == "backoff" and qp._seq == seq:
                self._to_active(qp)

    def flush_unschedulable(self) -> int:
        """The periodic fallback: pods waiting longer than the flush interval get another try."""
        now = self._clock()
        limit = min(self.settings.unschedulable_flush, self.settings.unschedulable_max)
        stale = [qp for qp in self._unschedulable.values() if now - qp.timestamp >= limit]
        for qp in stale:
            self._unpark(qp.key)
            self._to_active_or_backoff(qp)
        return len(stale)

    # --- introspection -------------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        active = sum(1 for qp in self._pods.values() if qp.where == "active")
        backoff = sum(1 for qp in self._pods.values() if qp.where == "backoff")
        return {"active": active, "backoff": backoff, "unschedulable": len(self._unschedulable)}

    def __len__(self) -> int:
        return len(self._pods)


def _may_now_fit(old: PodInfo, new: PodInfo) -> bool:
    """An update of a pending pod that could change where it fits (Kubernetes moves those)."""
    return (old.requests != new.requests or old.node_selector != new.node_selector
            or old.required_node_terms != new.required_node_terms or old.tolerations != new.tolerations
            or old.labels != new.labels or old.spread != new.spread or old.affinity != new.affinity
            or old.anti_affinity != new.anti_affinity or old.priority != new.priority)
