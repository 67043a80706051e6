"""InterPodAffinity: required pod affinity and anti-affinity, in both directions, and preferred
terms as scores.

Three checks, each a handful of column operations per term:
1. existing pods' required anti-affinity: a node is out if, in its domain, a pod carries a term
   that selects the incoming pod;
2. the incoming pod's required anti-affinity: out if its domain holds a pod the term selects;
3. the incoming pod's required affinity: in only if its domain holds a pod the term selects — or,
   when no such pod exists anywhere and the pod selects itself, on any node with the topology key
   (the first pod of a group may go anywhere, as in Kubernetes).

Pod counts per node come from the cache's groups, never from a loop over pods.
"""

from __future__ import annotations

import numpy as np

from corral.scheduler.framework.interface import CycleState, FilterResult, Plugin, Reason
from corral.scheduler.framework.podinfo import label_key
from corral.scheduler.framework.status import SKIP, SUCCESS, Status
from corral.scheduler.plugins.topology import count_in_domain

NAME = "InterPodAffinity"
EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
AFFINITY = "node(s) didn't match pod affinity rules"


class InterPodAffinity(Plugin):
    NAME = NAME
    # Row-local for a pod whose row_local() says so: required anti-affinity only (affinity's first-pod
    # rule looks at every node), over keys with one node per value (hostname), so a node's answer
    # depends on the pods counted on that node alone.
    ROW_LOCAL_FILTER = True
    TEMPLATE_SIGNATURE = True

    def pre_filter(self, state: CycleState, pod) -> Status:
        if pod.affinity or pod.anti_affinity or self.cache.anti_affinity.terms:
            return SUCCESS
        return SKIP

    def signature(self, pod) -> object:
        return label_key(pod), pod.anti_affinity, pod.affinity

    def _terms(self, pod) -> list[tuple[object, np.ndarray]]:
        """The existing pods' required anti-affinity terms that select ``pod``, with their carriers."""
        ns_labels = self.cache.namespace_labels
        return [(term, carriers) for term, carriers in self.cache.anti_affinity.active()
                if term.matches(pod.namespace, pod.labels, ns_labels)]

    def row_local(self, pod) -> bool:
        if pod.affinity:
            return False
        labels = self.cache.table.labels
        return (all(labels.one_per_node(t.topology_key) for t in pod.anti_affinity)
                and all(labels.one_per_node(t.topology_key) for t, _ in self._terms(pod)))

    def filter_rows(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        """For a pod row_local() accepts: a node is out if it carries a pod whose term selects this
        pod, or holds a pod this pod's terms select (nodes without the key are in no domain)."""
        cache, labels = self.cache, self.cache.table.labels
        bad = np.zeros(len(rows), dtype=bool)
        for term, carriers in self._terms(pod):
            bad |= (carriers[rows] > 0) & (labels.column(term.topology_key)[rows] != 0)
        for term in pod.anti_affinity:
            count = cache.pod_groups.count_rows(cache.matching_groups(term), rows)
            bad |= (count > 0) & (labels.column(term.topology_key)[rows] != 0)
        return ~bad

    def filter_one(self, state: CycleState, pod, row: int) -> bool:
        cache, labels = self.cache, self.cache.table.labels
        for term, carriers in self._terms(pod):
            if carriers[row] > 0 and labels.column(term.topology_key)[row] != 0:
                return False
        for term in pod.anti_affinity:
            if labels.column(term.topology_key)[row] != 0 and cache.pod_groups.count_at(cache.matching_groups(term), row):
                return False
        return True

    def filter(self, state: CycleState, pod, candidates: np.ndarray) -> FilterResult:
        cache, table = self.cache, self.cache.table
        n = table.size
        ns_labels = cache.namespace_labels
        existing = np.zeros(n, dtype=bool)
        for term, carriers in cache.anti_affinity.active():
            if term.matches(pod.namespace, pod.labels, ns_labels):
                existing |= count_in_domain(table, term.topology_key, carriers) > 0
        anti = np.zeros(n, dtype=bool)
        for term in pod.anti_affinity:
            anti |= count_in_domain(table, term.topology_key, cache.count_matching(term)) > 0
        affinity_bad = np.zeros(n, dtype=bool)
        if pod.affinity:
            counts = [cache.count_matching(t) for t in pod.affinity]
            nobody = all(not c.any() for c in counts)
            selects_self = all(t.matches(pod.namespace, pod.labels, ns_labels) for t in pod.affinity)
            for term, c in zip(pod.affinity, counts):
                has_key = table.labels.column(term.topology_key)[:n] != 0
                if nobody and selects_self:
                    affinity_bad |= ~has_key
                else:
                    affinity_bad |= ~(count_in_domain(table, term.topology_key, c) > 0)
        bad = existing | anti | affinity_bad
        return FilterResult(~bad, [Reason(EXISTING_ANTI, existing), Reason(ANTI, anti & ~existing),
                                   Reason(AFFINITY, affinity_bad & ~existing & ~anti)])

    def pre_score(self, state: CycleState, pod, rows: np.ndarray) -> Status:
        if pod.preferred_affinity or pod.preferred_anti_affinity or self.cache.preferred_terms.terms:
            return SUCCESS
        return SKIP

    def score(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        cache, table = self.cache, self.cache.table
        total = np.zeros(table.size, dtype=np.float64)
        for sign, terms in ((1, pod.preferred_affinity), (-1, pod.preferred_anti_affinity)):
            for w in terms:
                total += sign * w.weight * count_in_domain(table, w.term.topology_key, cache.count_matching(w.term))
        # Symmetry: existing pods' preferences about pods like this one.
        for (term, weight, is_anti), carriers in cache.preferred_terms.active():
            if term.matches(pod.namespace, pod.labels, cache.namespace_labels):
                total += (-weight if is_anti else weight) * count_in_domain(table, term.topology_key, carriers)
        return total[rows]

    def normalize(self, state: CycleState, pod, scores: np.ndarray) -> np.ndarray:
        if not len(scores):
            return scores
        low, high = scores.min(), scores.max()
        if high == low:
            return np.zeros(len(scores))
        # Kubernetes: int64(100 × ((s − min) / (max − min))) in float64, in this order.
        return np.trunc(100.0 * ((scores - low) / (high - low)))
