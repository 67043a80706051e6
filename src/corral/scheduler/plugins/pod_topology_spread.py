"""PodTopologySpread: keep matching pods spread across topology domains within ``maxSkew``.

For each constraint: pods the selector matches are counted per domain over the eligible nodes
(those with the topology label that pass the pod's node affinity, and its taints when
``nodeTaintsPolicy: Honor``); placing the pod on a node must keep
``count(node's domain) + 1 − min over domains ≤ maxSkew``. With fewer domains than ``minDomains``
the minimum counts as 0. ``ScheduleAnyway`` constraints, and the system default spreading for pods
that have a controller, only score: fewer matching pods in the domain is better.
"""

from __future__ import annotations

import math

import numpy as np

from corral.api.selectors import LabelSelector, Requirement
from corral.scheduler.framework.interface import CycleState, FilterResult, Plugin, Reason, count_rows
from corral.scheduler.framework.podinfo import SpreadConstraint, label_key
from corral.scheduler.framework.status import SKIP, SUCCESS, Status
from corral.scheduler.plugins.node_affinity import node_affinity_key, required_mask
from corral.scheduler.plugins.taint_toleration import frozen_tolerations, untolerated_table
from corral.scheduler.plugins.topology import domain_totals

NAME = "PodTopologySpread"
REASON = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def _system_defaults(pod) -> tuple[SpreadConstraint, ...]:
    selector = LabelSelector(tuple(Requirement(k, "=", frozenset([v])) for k, v in sorted(pod.labels.items())))
    return (SpreadConstraint(3, HOSTNAME, False, selector), SpreadConstraint(5, ZONE, False, selector))


class PodTopologySpread(Plugin):
    NAME = NAME
    TEMPLATE_SIGNATURE = True

    def _eligible(self, pod, c: SpreadConstraint, col: np.ndarray, rows: np.ndarray | slice | None = None) -> np.ndarray:
        """Whether each of ``rows`` (every row by default; ``col``: their codes of the key) counts
        toward ``c``: a node with the key that the pod's node affinity, and its taints when
        honoured, let it use."""
        table = self.cache.table
        rows = slice(0, table.size) if rows is None else rows
        eligible = table.valid[rows] & (col != 0)
        if c.honor_node_affinity and (pod.node_selector or pod.required_node_terms):
            eligible &= required_mask(table, pod)[rows]
        if c.honor_node_taints and len(table.taint_list) > 1:
            bad = untolerated_table(table, pod.tolerations, ("NoSchedule", "NoExecute"))
            eligible &= ~bad[table.taints[rows]].any(axis=1)
        return eligible

    def pre_filter(self, state: CycleState, pod) -> Status:
        return SUCCESS if any(c.hard for c in pod.spread) else SKIP

    def domain_allowed(self, pod, c: SpreadConstraint, totals: np.ndarray, present: np.ndarray) -> np.ndarray:
        """Per domain code: whether a node there keeps ``c``, from the matching pods per domain
        (``totals``, over eligible nodes) and the domains with an eligible node (``present``)."""
        present = present.copy()
        present[0] = False
        domains = int(present.sum())
        low = 0 if domains < c.min_domains or domains == 0 else totals[present].min()
        self_match = 1 if c.selector.matches(pod.labels) else 0
        allowed = totals + self_match - low <= c.max_skew
        allowed[0] = False  # a node without the key: no domain
        return allowed

    # For the remembered decisions (corral.scheduler.framework.remembered): a pod with one hard
    # constraint is judged by its node's domain alone, from sums kept row by row.

    def signature(self, pod) -> object:
        return label_key(pod), pod.spread, node_affinity_key(pod), frozen_tolerations(pod)

    def domain_constraint(self, pod) -> SpreadConstraint | None:
        hard = [c for c in pod.spread if c.hard]
        return hard[0] if len(hard) == 1 else None

    def domain_rows(self, pod, c: SpreadConstraint, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For ``rows``: (domain code, eligible, pods ``c`` selects there)."""
        cache, table = self.cache, self.cache.table
        code = table.labels.column(c.topology_key)[rows]
        eligible = self._eligible(pod, c, code, rows)
        return code, eligible, cache.pod_groups.count_rows(cache.selected_groups(pod.namespace, c.selector), rows)

    def domain_one(self, pod, c: SpreadConstraint, row: int) -> tuple[int, bool, int]:
        """:meth:`domain_rows` for one row, in plain Python (a changed row, as the remembered
        decisions mostly see them: numpy's cost per call is higher for one row)."""
        cache, table = self.cache, self.cache.table
        code = int(table.labels.column(c.topology_key)[row])
        eligible = bool(table.valid[row]) and code != 0
        if eligible and c.honor_node_affinity and (pod.node_selector or pod.required_node_terms):
            eligible = bool(required_mask(table, pod)[row])
        if eligible and c.honor_node_taints and len(table.taint_list) > 1:
            bad = untolerated_table(table, pod.tolerations, ("NoSchedule", "NoExecute"))
            eligible = not bad[table.taints[row]].any()
        return code, eligible, cache.pod_groups.count_at(cache.selected_groups(pod.namespace, c.selector), row)

    def filter(self, state: CycleState, pod, candidates: np.ndarray) -> FilterResult:
        cache, table = self.cache, self.cache.table
        n = table.size
        skewed = np.zeros(n, dtype=bool)
        missing = np.zeros(n, dtype=bool)
        for c in pod.spread:
            if not c.hard:
                continue
            col = table.labels.column(c.topology_key)[:n]
            eligible = self._eligible(pod, c, col)
            counts = cache.count_selected(pod.namespace, c.selector)
            _, totals = domain_totals(table, c.topology_key, counts, eligible)
            present = np.bincount(col[eligible], minlength=len(totals)) > 0
            missing |= col == 0
            skewed |= (col != 0) & ~self.domain_allowed(pod, c, totals, present)[col]
        skewed &= ~missing
        return FilterResult(~(missing | skewed), [Reason(MISSING_LABEL, missing, unresolvable=True),
                                                  Reason(REASON, skewed)])

    def _soft(self, pod) -> tuple[SpreadConstraint, ...]:
        if pod.spread:
            return tuple(c for c in pod.spread if not c.hard)
        if pod.has_controller and pod.labels and self.handle.args.get("defaultingType", "System") == "System":
            return _system_defaults(pod)
        return ()

    def pre_score(self, state: CycleState, pod, rows: np.ndarray) -> Status:
        soft = self._soft(pod)
        if not soft:
            return SKIP
        state[NAME] = soft
        return SUCCESS

    def score(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        """Kubernetes' raw score per node: Σ over the constraints whose key the node has of
        count(node's domain) × ln(domains + 2) + (maxSkew − 1), rounded to an integer.

        ``domains`` counts the values among the nodes being scored (for the hostname key: those
        nodes). A pod's own constraints need every key on a node: a node missing one is not scored
        (NaN here, 0 after normalising). System default spreading does not, so a node without a zone
        label is still spread by hostname; its empty zone value counts as a domain, as in Kubernetes.
        """
        cache, table = self.cache, self.cache.table
        n = table.size
        constraints = state[NAME]
        require_all = bool(pod.spread)
        cols = [table.labels.column(c.topology_key)[:n] for c in constraints]
        scored = [col[rows] for col in cols]
        ignored = np.zeros(count_rows(rows), dtype=bool)
        has_all = np.ones(n, dtype=bool)
        if require_all:
            for col, values in zip(cols, scored):
                ignored |= values == 0
                has_all &= col != 0
        kept = ~ignored
        total = np.zeros(count_rows(rows), dtype=np.float64)
        for c, col, values in zip(constraints, cols, scored):
            eligible = self._eligible(pod, c, col) & has_all
            counts = cache.count_selected(pod.namespace, c.selector)
            _, totals = domain_totals(table, c.topology_key, counts, eligible)
            if c.topology_key == HOSTNAME:
                domains = int(kept.sum())
            else:
                domains = int(np.count_nonzero(np.bincount(values[kept], minlength=len(totals))))
            weight = math.log(domains + 2)
            total += np.where(values != 0, totals[values] * weight + (c.max_skew - 1), 0.0)
        total = np.floor(total + 0.5)  # Go's math.Round (the score is never negative)
        total[ignored] = np.nan
        return total

    def normalize(self, state: CycleState, pod, scores: np.ndarray) -> np.ndarray:
        """Fewer matching pods in the domain is better: 100 × (max + min − s) / max with integer
        division, 100 everywhere when max is 0; nodes not scored get 0."""
        known = ~np.isnan(scores)
        if not known.any():
            return np.zeros(len(scores))
        high, low = scores[known].max(), scores[known].min()
        out = np.zeros(len(scores))
        out[known] = 100.0 if high == 0 else np.floor(100 * (high + low - scores[known]) / high)
        return out
