"""TaintToleration: a node's NoSchedule and NoExecute taints keep off the pods that do not tolerate
them; PreferNoSchedule taints only lower the node's score.

Columns: every distinct taint (key, value, effect) has a code; a node row lists its codes. For a pod,
one small lookup table says which codes it leaves untolerated, and a single indexing operation
answers for all nodes.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from corral.scheduler.framework.interface import CycleState, FilterResult, Plugin
from corral.scheduler.framework.status import SKIP, SUCCESS, Status

NAME = "TaintToleration"
REASON = "node(s) had untolerated taint(s)"
_HARD = ("NoSchedule", "NoExecute")


def tolerates(tolerations: Iterable[dict[str, Any]], key: str, value: str, effect: str) -> bool:
    """Kubernetes' ToleratesTaint, for one taint."""
    for t in tolerations:
        t_effect = t.get("effect") or ""
        if t_effect and t_effect != effect:
            continue
        t_key = t.get("key") or ""
        op = t.get("operator") or "Equal"
        if not t_key:
            if op == "Exists":
                return True
            continue
        if t_key != key:
            continue
        if op == "Exists" or (t.get("value") or "") == value:
            return True
    return False


def untolerated_table(table, tolerations: tuple, effects: tuple[str, ...]) -> np.ndarray:
    """bool per taint code: the taint has one of ``effects`` and the tolerations do not cover it."""
    out = np.zeros(len(table.taint_list), dtype=bool)
    for code, (key, value, effect) in enumerate(table.taint_list):
        if code and effect in effects and not tolerates(tolerations, key, value, effect):
            out[code] = True
    return out


def frozen_tolerations(pod) -> tuple:
    """A pod's tolerations as a hashable value (for signatures; worked out once per PodInfo)."""
    if not pod.tolerations:
        return ()
    frozen = pod.memo.get("tolerations")
    if frozen is None:
        frozen = pod.memo["tolerations"] = tuple(_read(t) for t in pod.tolerations)
    return frozen


def _read(toleration: Any) -> tuple:
    """What :func:`tolerates` reads of a toleration (five times cheaper than freezing all of it)."""
    if isinstance(toleration, dict):
        read = (toleration.get("key"), toleration.get("operator"), toleration.get("value"), toleration.get("effect"))
        if all(x is None or type(x) is str for x in read):
            return read
    return _frozen(toleration)  # not what validation lets through: kept whole, still hashable


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


class TaintToleration(Plugin):
    NAME = NAME
    ROW_LOCAL_FILTER = True  # its score is not: normalised by the most taints any node has
    TEMPLATE_SIGNATURE = True

    def __init__(self, handle) -> None:
        super().__init__(handle)
        self._seen_taints, self._prefer = 0, False  # PreScore's answer, for so many taints known

    def signature(self, pod) -> object:
        return frozen_tolerations(pod)

    def filter_rows(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        table = self.cache.table
        bad_codes = untolerated_table(table, pod.tolerations, _HARD)
        return ~bad_codes[table.taints[rows]].any(axis=1)

    def filter_one(self, state: CycleState, pod, row: int) -> bool:
        return bool(self.filter_rows(state, pod, np.array([row]))[0])

    def pre_filter(self, state: CycleState, pod) -> Status:
        table = self.cache.table
        if len(table.taint_list) == 1:
            return SKIP  # no node has a taint
        return SUCCESS

    def filter(self, state: CycleState, pod, candidates: np.ndarray) -> FilterResult:
        table = self.cache.table
        bad_codes = untolerated_table(table, pod.tolerations, _HARD)
        bad = bad_codes[table.taints[: table.size]].any(axis=1)
        return FilterResult.reject_where(bad, REASON, unresolvable=True)

    def pre_score(self, state: CycleState, pod, rows: np.ndarray) -> Status:
        taints = self.cache.table.taint_list  # only ever appended to: known by its length
        if len(taints) != self._seen_taints:
            self._seen_taints = len(taints)
            self._prefer = any(effect == "PreferNoSchedule" for _, _, effect in taints)
        return SUCCESS if self._prefer else SKIP

    def score(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        table = self.cache.table
        soft = untolerated_table(table, pod.tolerations, ("PreferNoSchedule",))
        return soft[table.taints[rows]].sum(axis=1).astype(np.float64)

    def normalize(self, state: CycleState, pod, scores: np.ndarray) -> np.ndarray:
        """Fewer intolerable PreferNoSchedule taints is better (Kubernetes' reverse normalisation)."""
        top = scores.max() if len(scores) else 0
        if top == 0:
            return np.full(len(scores), 100.0)
        return 100.0 - np.floor(scores * 100.0 / top)  # 100 − ⌊100·s/max⌋, as integers
