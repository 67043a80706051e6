"""The scheduler's cache: the node table plus every pod that occupies a node, assumed or bound.

*Assume*: when the scheduler picks a node for a pod it counts the pod there at once
(:meth:`Cache.assume`), before the binding is written, so the next pod of a burst sees the room
already taken. The informer later confirms the binding (:meth:`Cache.add_pod` for a pod that is
assumed just marks it bound); a failed bind un-counts it (:meth:`Cache.forget`).

Besides resources, the cache keeps what pod affinity and topology spread need, as per-node count
columns, so those plugins never loop over pods:

- :class:`PodGroups`: pods grouped by (namespace, labels); per group a count column. "How many pods
  matching selector S are on each node" is the sum of the columns of the groups S matches.
- :class:`TermGroups`: existing pods' affinity terms (for the incoming pod's symmetry checks);
  per term a count column of the pods on each node that carry it.

For preemption it also keeps every counted pod as a slot of :class:`PodColumns` (priority,
requests, start time per pod), the keys of the pods on each row, and the :class:`Nominator`'s
claims. :meth:`Cache.lifted` takes pods out of the counts for a dry run and puts them back.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from corral.scheduler.cache.node_table import NodeTable
from corral.scheduler.cache.nominator import Nominator
from corral.scheduler.cache.pod_columns import PodColumns, start_time
from corral.scheduler.framework.podinfo import AffinityTerm, PodInfo, label_key

__all__ = ["Cache", "CachedPod", "Budget", "Lift", "PodGroups", "TermGroups"]

_TERMINAL = ("Succeeded", "Failed", "Terminated")


@dataclass(slots=True)
class CachedPod:
    info: PodInfo
    row: int
    assumed: bool
    slot: int = -1  # in the cache's PodColumns
    terminating: bool = False  # being deleted (deletionTimestamp set, or preempted by this scheduler)


@dataclass(slots=True)
class Budget:
    """A PodDisruptionBudget as preemption reads it: whom it selects and how many of them may go
    now (``status.disruptionsAllowed``, kept by the disruption controller)."""

    namespace: str
    selector: Any  # LabelSelector; an empty one selects nothing here, as in Kubernetes' preemption
    allowed: int
    _matches: dict[int, bool] | None = None  # label-set id → selected

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> "Budget":
        from corral.api.selectors import label_selector_from_struct

        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        return cls(obj["metadata"].get("namespace") or "default", label_selector_from_struct(spec.get("selector")),
                   int(status.get("disruptionsAllowed") or 0), {})

    def selects(self, label_set: int, namespace: str, labels: dict[str, str]) -> bool:
        hit = self._matches.get(label_set)
        if hit is None:
            hit = self._matches[label_set] = (namespace == self.namespace and bool(labels)
                                              and not self.selector.empty and self.selector.matches(labels))
        return hit


class Lift:
    """The pods a dry run has taken out of the cache's counts (see :meth:`Cache.lifted`)."""

    def __init__(self, cache: "Cache") -> None:
        self._cache = cache
        self.out: dict[str, CachedPod] = {}

    def take_out(self, cached: CachedPod) -> None:
        if cached.info.key not in self.out:
            self.out[cached.info.key] = cached
            self._cache._account(cached.info, cached.row, -1)

    def put_back(self, cached: CachedPod) -> None:
        if self.out.pop(cached.info.key, None) is not None:
            self._cache._account(cached.info, cached.row, +1)


class PodGroups:
    """Pods by (namespace, labels) → a per-node count column for each group.

    A group whose pods are all gone is dropped, a batch at a time (when the empty ones outnumber
    the rest): pods relabelled as they run (a label per version, a counter) made a new group each
    time, and a soak's server grew by a node-wide column per label change, ~5 MiB a minute, for
    as long as it ran. Group indexes are valid until the next :meth:`add`."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._index: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
        self.groups: list[tuple[str, dict[str, str]]] = []
        self.counts: list[np.ndarray] = []
        self._pods: list[int] = []  # pods in each group, all nodes together
        self._empty = 0  # groups with no pods
        self._match_cache: dict[Any, tuple[int, list[int]]] = {}

    def grow(self, capacity: int) -> None:
        self._capacity = capacity
        for i, col in enumerate(self.counts):
            grown = np.zeros(capacity, dtype=np.int32)
            grown[: len(col)] = col
            self.counts[i] = grown

    def add(self, info: PodInfo, row: int, delta: int) -> None:
        """Count (``delta``) the pod ``info`` on ``row`` in the group of its namespace and labels."""
        key = label_key(info)
        idx = self._index.get(key)
        if idx is None:
            idx = self._index[key] = len(self.groups)
            self.groups.append((info.namespace, info.labels))
            self.counts.append(np.zeros(self._capacity, dtype=np.int32))
            self._pods.append(0)
            self._empty += 1
        self.counts[idx][row] += delta
        before = self._pods[idx]
        self._pods[idx] = after = before + delta
        self._empty += (after == 0) - (before == 0)
        if self._empty > max(64, len(self.groups) // 2):
            self._drop_empty()

    def _drop_empty(self) -> None:
        keep = [i for i, n in enumerate(self._pods) if n != 0]
        self.groups = [self.groups[i] for i in keep]
        self.counts = [self.counts[i] for i in keep]
        self._pods = [self._pods[i] for i in keep]
        self._index = {(ns, tuple(sorted(labels.items()))): i for i, (ns, labels) in enumerate(self.groups)}
        self._empty = 0
        self._match_cache.clear()  # it holds indexes

    def matching(self, cache_key: Any, predicate: Callable[[str, dict[str, str]], bool]) -> list[int]:
        """Indexes of the groups ``predicate`` accepts (memoised under ``cache_key``)."""
        hit = self._match_cache.get(cache_key)
        if hit is not None and hit[0] == len(self.groups):
            return hit[1]
        start, found = (hit[0], list(hit[1])) if hit is not None else (0, [])
        for i in range(start, len(self.groups)):
            ns, labels = self.groups[i]
            if predicate(ns, labels):
                found.append(i)
        self._match_cache[cache_key] = (len(self.groups), found)
        return found

    def count_at(self, groups: list[int], row: int) -> int:
        """The number of pods in ``groups`` on ``row``."""
        counts = self.counts
        return int(sum(counts[g][row] for g in groups))

    def count_rows(self, groups: list[int], rows: np.ndarray) -> np.ndarray:
        """The number of pods in ``groups`` on each of ``rows`` (row numbers)."""
        total = np.zeros(len(rows), dtype=np.int64)
        for g in groups:
            total += self.counts[g][rows]
        return total

    def count(self, groups: list[int], size: int) -> np.ndarray:
        """Per-node number of pods in ``groups`` (rows ``< size``)."""
        if not groups:
            return np.zeros(size, dtype=np.int32)
        total = self.counts[groups[0]][:size].copy()
        for g in groups[1:]:
            total += self.counts[g][:size]
        return total


class TermGroups:
    """Affinity terms carried by existing pods → per-node count of pods carrying each."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self.terms: dict[Any, np.ndarray] = {}
        self.totals: dict[Any, int] = {}

    def grow(self, capacity: int) -> None:
        self._capacity = capacity
        for key, col in self.terms.items():
            grown = np.zeros(capacity, dtype=np.int32)
            grown[: len(col)] = col
            self.terms[key] = grown

    def add(self, key: Any, row: int, delta: int) -> None:
        col = self.terms.get(key)
        if col is None:
            col = self.terms[key] = np.zeros(self._capacity, dtype=np.int32)
        col[row] += delta
        self.totals[key] = self.totals.get(key, 0) + delta
        if self.totals[key] <= 0:
            del self.terms[key], self.totals[key]

    def active(self) -> list[tuple[Any, np.ndarray]]:
        return list(self.terms.items())


class Cache:
    def __init__(self, capacity: int | None = None) -> None:
        """``capacity``: node rows and pod slots allocated at first (the columns double as nodes
        and pods arrive)."""
        self.table = NodeTable() if capacity is None else NodeTable(capacity)
        self.pods: dict[str, CachedPod] = {}
        self.namespace_labels: dict[str, dict[str, str]] = {}
        self.pod_groups = PodGroups(self.table.capacity)
        # Existing pods' required anti-affinity terms, and their preferred (anti-)affinity terms
        # keyed by (term, weight, is_anti).
        self.anti_affinity = TermGroups(self.table.capacity)
        self.preferred_terms = TermGroups(self.table.capacity)
        self.table.grow_listeners += [self.pod_groups.grow, self.anti_affinity.grow, self.preferred_terms.grow]
        # Pods that have a required affinity term: InterPodAffinity's "first pod of a group" rule.
        self.pods_with_affinity = 0
        self.columns = PodColumns() if capacity is None else PodColumns(capacity)
        self.on_row: dict[int, set[str]] = {}  # row → keys of the pods counted there
        self.nominator = Nominator(self.table)
        self.budgets: dict[str, Budget] = {}  # PodDisruptionBudgets, for preemption's victim choice
        from corral.scheduler.gang import GangBook

        self.gangs = GangBook()  # PodGroups and their members (gang scheduling)
        self.gangs.placed = lambda key: key in self.pods

    @classmethod
    def from_objects(cls, nodes: Any = (), pods: Any = (), namespaces: Any = ()) -> "Cache":
        """A cache holding these API objects (dicts): for explanations and tests."""
        cache = cls()
        for ns in namespaces:
            cache.set_namespace(ns)
        for node in nodes:
            cache.set_node(node)
        for pod in pods:
            cache.set_pod(pod)
        return cache

    # --- nodes -------------------------------------------------------------------------------------------

    def set_node(self, node: dict[str, Any]) -> None:
        self.table.set_node(node)

    def remove_node(self, name: str) -> None:
        self.table.remove_node(name)

    def set_namespace(self, ns: dict[str, Any]) -> None:
        meta = ns["metadata"]
        labels = dict(meta.get("labels") or {})
        if self.namespace_labels.get(meta["name"]) != labels:
            self.namespace_labels[meta["name"]] = labels
            self.table.new_epoch()  # affinity terms' namespace selectors may select other pods now

    def remove_namespace(self, name: str) -> None:
        if self.namespace_labels.pop(name, None) is not None:
            self.table.new_epoch()

    # --- pods --------------------------------------------------------------------------------------------

    def _account(self, info: PodInfo, row: int, sign: int) -> None:
        self.table.add_requests(row, info.requests, info.host_ports, sign)
        self.pod_groups.add(info, row, sign)
        for term in info.anti_affinity:
            self.anti_affinity.add(term, row, sign)
        for w in info.preferred_affinity:
            self.preferred_terms.add((w.term, w.weight, False), row, sign)
        for w in info.preferred_anti_affinity:
            self.preferred_terms.add((w.term, w.weight, True), row, sign)
        if info.affinity:
            self.pods_with_affinity += sign
        if sign < 0:
            self.table.release_if_empty(row)

    def _add(self, info: PodInfo, row: int, *, assumed: bool, start: float, terminating: bool) -> None:
        """Count ``info`` on ``row``; its start time and whether it is on its way out are the callers'
        to give (read from the pod object they have, or copied: ``info.obj`` may have to decode)."""
        cached = self.pods[info.key] = CachedPod(info, row, assumed, terminating=terminating)
        cached.slot = self.columns.add(info.key, info, row, start=start, terminating=terminating)
        keys = self.on_row.get(row)
        if keys is None:
            keys = self.on_row[row] = set()
        keys.add(info.key)
        self._account(info, row, +1)

    def _drop(self, key: str) -> CachedPod | None:
        cached = self.pods.pop(key, None)
        if cached is not None:
            self.columns.remove(cached.slot)
            keys = self.on_row.get(cached.row)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self.on_row[cached.row]
            self._account(cached.info, cached.row, -1)
        return cached

    def assume(self, info: PodInfo, node: str) -> None:
        """Count ``info`` on ``node`` now, before its binding is written (its nomination, if it had
        one, ends: the pod now counts where it goes)."""
        if info.key in self.pods:
            raise ValueError(f"pod {info.key} is already in the cache")
        self.nominator.clear(info.key)
        obj = info.obj
        self._add(info, self.table.row_for_pods(node), assumed=True, start=start_time(obj),
                  terminating=bool((obj.get("metadata") or {}).get("deletionTimestamp")))

    def forget(self, key: str) -> None:
        """Un-count an assumed pod whose binding failed."""
        cached = self.pods.get(key)
        if cached is not None and cached.assumed:
            self._drop(key)

    def is_assumed(self, key: str) -> bool:
        cached = self.pods.get(key)
        return cached is not None and cached.assumed

    def set_pod(self, pod: dict[str, Any], raw: bytes | None = None) -> None:
        """A pod from the informer. Bound, non-terminal pods are counted on their node, holding
        ``raw``, the JSON ``pod`` was decoded from, when given (see :attr:`PodInfo.obj`)."""
        meta = pod["metadata"]  # a stored pod always has its namespace, name and uid
        key = f"{meta['namespace']}/{meta['name']}"
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        cached = self.pods.get(key)
        if not node or phase in _TERMINAL:
            if cached is not None and not cached.assumed:
                self.remove_pod(key)
            return
        if cached is not None:
            row = self.table.row_for_pods(node)
            if (cached.row == row and cached.info.labels == (meta.get("labels") or {})
                    and cached.info.uid == meta["uid"]):
                # The same pod on the same node with the same labels: what the cache counts is
                # unchanged (a pod's requests, ports and affinity are fixed once it is created; a pod
                # recreated under its name, as a relist can show it, has another uid). A binding we
                # assumed is now confirmed. What may have changed is its status: its start time
                # (preemption ranks victims by it), and the object kept is this one (the one it was
                # assumed with would otherwise be held as long as the pod runs).
                cached.assumed = False
                cached.info.held = pod if raw is None else raw
                self.columns.start[cached.slot] = start_time(pod)
                if meta.get("deletionTimestamp") and not cached.terminating:
                    self.mark_terminating(key)
                return
            self._drop(key)
        self.nominator.clear(key)
        info = PodInfo.from_object(pod)
        if raw is not None:
            info.held = raw
        self._add(info, self.table.row_for_pods(node), assumed=False, start=start_time(pod),
                  terminating=bool(meta.get("deletionTimestamp")))

    def remove_pod(self, key: str) -> None:
        self._drop(key)

    def mark_terminating(self, key: str, terminating: bool = True) -> None:
        """``key`` is on its way out (deleted, or chosen as a preemption victim): it still counts
        until it is gone, but preemption knows its room is already being freed. (False: its
        removal failed; it stays.)"""
        cached = self.pods.get(key)
        if cached is not None:
            cached.terminating = terminating
            self.columns.terminating[cached.slot] = terminating

    def pods_on(self, row: int) -> list[CachedPod]:
        return [self.pods[k] for k in self.on_row.get(row, ())]

    @contextmanager
    def lifted(self, pods: Iterable[CachedPod]) -> Iterator["Lift"]:
        """Un-count ``pods`` for a dry run (preemption asking "would it fit without them?"), and
        count them again afterwards; :meth:`Lift.put_back` counts one again sooner. Only their
        node counts change (resources, ports, affinity groups): the pods stay in the cache.
        Nothing may add or remove pods meanwhile."""
        lift = Lift(self)
        for cached in pods:
            lift.take_out(cached)
        try:
            yield lift
        finally:
            for cached in list(lift.out.values()):
                lift.put_back(cached)

    def set_budget(self, key: str, obj: dict[str, Any] | None) -> None:
        """A PodDisruptionBudget added or changed (``obj``) or deleted (None)."""
        if obj is None:
            self.budgets.pop(key, None)
        else:
            self.budgets[key] = Budget.from_object(obj)

    # --- queries used by plugins -------------------------------------------------------------------

    def count_matching(self, term: AffinityTerm) -> np.ndarray:
        """Per-node number of pods that ``term`` selects (namespace and labels)."""
        return self.pod_groups.count(self.matching_groups(term), self.table.size)

    def matching_groups(self, term: AffinityTerm) -> list[int]:
        """The pod groups ``term`` selects (namespace and labels)."""
        ns_labels = self.namespace_labels
        return self.pod_groups.matching(
            ("term", term, self._ns_version(term)),
            lambda ns, labels: term.matches(ns, labels, ns_labels),
        )

    def selected_groups(self, namespace: str, selector: Any) -> list[int]:
        """The pod groups in ``namespace`` whose labels ``selector`` matches."""
        return self.pod_groups.matching(
            ("sel", namespace, selector), lambda ns, labels: ns == namespace and selector.matches(labels)
        )

    def count_selected(self, namespace: str, selector: Any) -> np.ndarray:
        """Per-node number of pods in ``namespace`` whose labels ``selector`` matches."""
        return self.pod_groups.count(self.selected_groups(namespace, selector), self.table.size)

    def _ns_version(self, term: AffinityTerm) -> Any:
        if term.namespace_selector is None:
            return None
        return tuple(sorted((k, tuple(sorted(v.items()))) for k, v in self.namespace_labels.items()))
