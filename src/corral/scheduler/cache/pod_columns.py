"""Every pod the cache counts on a node as one slot of numpy columns, for preemption.

Preemption asks, for a pod of priority *p*, "which pods of lower priority could go, on every node
at once, and what would that free?". With the pods as columns (the node's row, priority,
requests, start time), that is a mask and a few ``bincount`` calls over all pods instead of a
Python loop over nodes and their pods: ~0.3 ms for 20,000 pods on 5,000 nodes.

Slots are reused once their pod is gone; ``valid`` says which hold a pod. Columns double as pods
arrive. The scheduling cycle and the informer handlers run on one event loop thread, so, like
the node table, the columns need no lock.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.scheduler.cache.node_table import parse_timestamp
from corral.scheduler.framework.podinfo import label_key

__all__ = ["PodColumns", "NOT_STARTED"]

NOT_STARTED = float("inf")  # the start time of a pod that has none yet: the least important of its priority


def start_time(pod: dict[str, Any]) -> float:
    """``status.startTime`` in seconds since the epoch; :data:`NOT_STARTED` when it has none
    (Kubernetes counts such a pod as started now, the latest)."""
    value = parse_timestamp((pod.get("status") or {}).get("startTime"))
    return value if value > 0 else NOT_STARTED


class PodColumns:
    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = capacity
        self.size = 0  # slots in use are < size
        self._free: list[int] = []
        self.keys: list[str | None] = [None] * capacity
        self.valid = np.zeros(capacity, dtype=bool)
        self.row = np.full(capacity, -1, dtype=np.int64)
        self.priority = np.zeros(capacity, dtype=np.int64)
        self.start = np.full(capacity, NOT_STARTED)
        self.terminating = np.zeros(capacity, dtype=bool)
        self.has_ports = np.zeros(capacity, dtype=bool)
        # Each pod's (namespace, labels) as a stable id, for matching PodDisruptionBudgets once per
        # distinct label set instead of once per pod.
        self.label_set = np.zeros(capacity, dtype=np.int64)
        self.priorities: dict[int, int] = {}  # priority → pods that have it (few distinct values)
        self.label_sets: list[tuple[str, dict[str, str]]] = []
        self._label_set_ids: dict[tuple[str, tuple], int] = {}
        # cpu in millicores; the rest in units. "pods" is 1 per pod (a victim frees one pod slot).
        self.requests: dict[str, np.ndarray] = {r: np.zeros(capacity, dtype=np.int64)
                                                for r in ("cpu", "memory", "ephemeral-storage")}

    def _grow(self) -> None:
        capacity = self.capacity * 2

        def grown(col: np.ndarray, fill: Any = 0) -> np.ndarray:
            out = np.full(capacity, fill, dtype=col.dtype)
            out[: self.capacity] = col
            return out

        self.keys += [None] * (capacity - self.capacity)
        self.valid, self.terminating, self.has_ports = (grown(self.valid), grown(self.terminating),
                                                        grown(self.has_ports))
        self.label_set = grown(self.label_set)
        self.row, self.priority = grown(self.row, -1), grown(self.priority)
        self.start = grown(self.start, NOT_STARTED)
        self.requests = {name: grown(col) for name, col in self.requests.items()}
        self.capacity = capacity

    def column(self, resource: str) -> np.ndarray:
        """The requests of ``resource`` per slot (an extended resource gets its column here)."""
        col = self.requests.get(resource)
        if col is None:
            col = self.requests[resource] = np.zeros(self.capacity, dtype=np.int64)
        return col

    def add(self, key: str, info: Any, row: int, *, start: float, terminating: bool) -> int:
        """A pod counted on ``row``; returns its slot."""
        if self._free:
            slot = self._free.pop()
        else:
            if self.size == self.capacity:
                self._grow()
            slot = self.size
            self.size += 1
        req = info.requests
        self.keys[slot] = key
        self.valid[slot] = True
        self.row[slot] = row
        self.priority[slot] = info.priority
        self.priorities[info.priority] = self.priorities.get(info.priority, 0) + 1
        self.start[slot] = start
        self.terminating[slot] = terminating
        self.has_ports[slot] = bool(info.host_ports)
        ident = label_key(info)
        label_set = self._label_set_ids.get(ident)
        if label_set is None:  # ids are never reused: a handful of templates make most pods
            label_set = self._label_set_ids[ident] = len(self.label_sets)
            self.label_sets.append((info.namespace, info.labels))
        self.label_set[slot] = label_set
        requests = self.requests
        requests["cpu"][slot] = req.cpu  # created with the table, as is memory's and ephemeral storage's
        requests["memory"][slot] = req.memory
        requests["ephemeral-storage"][slot] = req.ephemeral
        for name, amount in req.extended:
            self.column(name)[slot] = amount
        return slot

    def remove(self, slot: int) -> None:
        priority = int(self.priority[slot])
        left = self.priorities[priority] - 1
        if left:
            self.priorities[priority] = left
        else:
            del self.priorities[priority]
        self.keys[slot] = None
        self.valid[slot] = False
        self.row[slot] = -1
        for col in self.requests.values():
            col[slot] = 0
        self._free.append(slot)

    def importance_order(self, slots: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The order that groups ``slots`` by ``rows`` and puts, within a row, the most important
        first (higher priority, then earlier start). One sort of a packed 64-bit key (row, priority
        rank, start second) where the numbers fit, ~3× faster than sorting on three keys."""
        if not len(slots):
            return np.zeros(0, dtype=np.int64)
        priority, start = self.priority[slots], self.start[slots]
        distinct = np.array(sorted(self.priorities, reverse=True), dtype=np.int64)
        finite = np.isfinite(start)
        low = start[finite].min() if finite.any() else 0.0
        seconds = np.where(finite, start - low, 2**31 - 1)
        whole = np.all(seconds == np.floor(seconds))
        if len(distinct) < 2**10 and rows.max() < 2**22 and seconds.max() < 2**31 and whole:
            rank = np.searchsorted(-distinct, -priority)  # 0 for the highest priority
            key = (rows.astype(np.int64) << 41) | (rank.astype(np.int64) << 31) | seconds.astype(np.int64)
            return np.argsort(key, kind="stable")
        return np.lexsort((start, -priority, rows))

    def lower_priority(self, priority: int, rows: np.ndarray) -> np.ndarray:
        """Slots of pods below ``priority`` whose node row is set in the bool mask ``rows``."""
        n = self.size
        mask = self.valid[:n] & (self.priority[:n] < priority)
        slots = np.flatnonzero(mask)
        on_rows = self.row[slots]
        keep = on_rows < len(rows)
        slots, on_rows = slots[keep], on_rows[keep]
        return slots[rows[on_rows]]
