"""NodeAffinity: ``spec.nodeSelector`` and required node affinity decide where a pod may go;
preferred node affinity terms add their weight to the nodes they match.

Terms are evaluated over the label columns: ``In`` is one membership test of a column against the
codes of the listed values, ``Gt`` / ``Lt`` compare the column's numeric view.
"""

from __future__ import annotations

import numpy as np

from corral.scheduler.framework.interface import CycleState, FilterResult, Plugin, count_rows
from corral.scheduler.framework.podinfo import NodeSelectorTerm
from corral.scheduler.framework.status import SKIP, SUCCESS, Status

NAME = "NodeAffinity"
REASON = "node(s) didn't match Pod's node affinity/selector"


def term_mask(table, term: NodeSelectorTerm) -> np.ndarray:
    """Rows matching every requirement of ``term`` (an empty term matches no node, as in Kubernetes)."""
    n = table.size
    if not term.expressions and not term.fields:
        return np.zeros(n, dtype=bool)
    mask = np.ones(n, dtype=bool)
    for r in term.expressions:
        col = table.labels.column(r.key)[:n]
        if r.operator == "In":
            mask &= np.isin(col, table.labels.codes(r.key, r.values))
        elif r.operator == "NotIn":
            mask &= ~np.isin(col, table.labels.codes(r.key, r.values))
        elif r.operator == "Exists":
            mask &= col != 0
        elif r.operator == "DoesNotExist":
            mask &= col == 0
        elif r.operator in ("Gt", "Lt"):
            try:
                bound = float(r.values[0])
            except (IndexError, ValueError):
                return np.zeros(n, dtype=bool)
            numeric = table.labels.numeric(r.key)[:n]
            with np.errstate(invalid="ignore"):
                mask &= numeric > bound if r.operator == "Gt" else numeric < bound
        else:
            return np.zeros(n, dtype=bool)
    for r in term.fields:  # matchFields: only metadata.name
        named = np.zeros(n, dtype=bool)
        for value in r.values:
            row = table.row_of.get(value)
            if row is not None and row < n:
                named[row] = True
        mask &= named if r.operator == "In" else ~named
    return mask


def node_affinity_key(pod) -> tuple:
    """The pod's nodeSelector and required node affinity as one hashable value (once per PodInfo):
    what required_mask reads of it."""
    key = pod.memo.get("nodeAffinity")
    if key is None:
        key = pod.memo["nodeAffinity"] = (tuple(sorted(pod.node_selector.items())), pod.required_node_terms)
    return key


def required_mask(table, pod) -> np.ndarray:
    """Rows that satisfy the pod's nodeSelector and required node affinity (read-only result).

    Only node labels decide it, so it is remembered per node-table version: the pods of one
    workload, which share their selector, pay for it once, not once each.
    """
    key = ("required_mask", node_affinity_key(pod))
    hit = table.memo.get(key)
    if hit is not None and hit[0] == table.version and hit[1] == table.size:
        return hit[2]
    mask = _required_mask(table, pod)
    if len(table.memo) > 256:
        table.memo.clear()
    table.memo[key] = (table.version, table.size, mask)
    return mask


def _required_mask(table, pod) -> np.ndarray:
    n = table.size
    mask = np.ones(n, dtype=bool)
    for key, value in pod.node_selector.items():
        mask &= table.labels.column(key)[:n] == table.labels.code(key, value)
    if pod.required_node_terms:
        any_term = np.zeros(n, dtype=bool)
        for term in pod.required_node_terms:
            any_term |= term_mask(table, term)
        mask &= any_term
    return mask


class NodeAffinity(Plugin):
    NAME = NAME

    ROW_LOCAL_FILTER = True  # its score is not: normalised by the best node's
    TEMPLATE_SIGNATURE = True

    def signature(self, pod) -> object:
        return node_affinity_key(pod)

    def pre_filter(self, state: CycleState, pod) -> Status:
        return SUCCESS if pod.node_selector or pod.required_node_terms else SKIP

    def filter_rows(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        return required_mask(self.cache.table, pod)[rows]

    def filter_one(self, state: CycleState, pod, row: int) -> bool:
        return bool(required_mask(self.cache.table, pod)[row])

    def filter(self, state: CycleState, pod, candidates: np.ndarray) -> FilterResult:
        return FilterResult.reject_where(~required_mask(self.cache.table, pod), REASON, unresolvable=True)

    def pre_score(self, state: CycleState, pod, rows: np.ndarray) -> Status:
        return SUCCESS if pod.preferred_node_terms else SKIP

    def score(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        table = self.cache.table
        total = np.zeros(count_rows(rows), dtype=np.float64)
        for weight, term in pod.preferred_node_terms:
            total += weight * term_mask(table, term)[rows]
        return total

    def normalize(self, state: CycleState, pod, scores: np.ndarray) -> np.ndarray:
        top = scores.max() if len(scores) else 0
        return np.floor(scores * 100 / top) if top > 0 else scores
