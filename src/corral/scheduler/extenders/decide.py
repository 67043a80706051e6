"""Folding the extenders' answers into a cycle: their rejections into the diagnosis (so the
Pending message and preemption see them), their scores into the totals."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from corral.scheduler.extenders.client import Proposal
from corral.scheduler.framework.interface import WANT_CANDIDATES, CycleState
from corral.scheduler.framework.runtime import Diagnosis, Scores
from corral.scheduler.schedule_one import FitError, ScheduleResult, post_filter

__all__ = ["reject_by_extenders", "add_extender_scores", "apply_to_report", "ask_extenders", "decide_among",
           "preempt_with_extenders", "NOT_ASKED"]

NOT_ASKED = "node(s) joined while the extenders decided"


def reject_by_extenders(diagnosis: Diagnosis, table: Any, feasible: np.ndarray, verdict: Any) -> np.ndarray:
    """``feasible`` without the rows the extenders rejected (or were not asked about: nodes that
    joined meanwhile); each rejection recorded in ``diagnosis`` under the extender's name."""
    size = table.size
    keep = np.zeros(size, dtype=bool)
    by_reason: dict[tuple[str, str, bool], np.ndarray] = {}
    for row in feasible.tolist():
        name = table.names[row]
        if name in verdict.passed:
            keep[row] = True
            continue
        why = verdict.rejected.get(name, ("extenders", NOT_ASKED, False))
        by_reason.setdefault(why, np.zeros(size, dtype=bool))[row] = True
    for (extender, reason, unresolvable), rows in by_reason.items():
        diagnosis.reject(rows, f"extender {extender}", reason, unresolvable=unresolvable)
    return np.flatnonzero(keep)


def add_extender_scores(scores: Scores, table: Any, extra: dict[str, dict[str, float]]) -> None:
    """Each extender's weighted scores, by node name, added to ``scores`` (and shown per extender)."""
    for extender, by_node in extra.items():
        column = np.array([by_node.get(table.names[row], 0.0) for row in scores.rows.tolist()], dtype=np.float64)
        scores.by_plugin[f"extender {extender}"] = column
        scores.total = scores.total + column


def apply_to_report(report: dict[str, Any], verdict: Any, extra: dict[str, dict[str, float]]) -> None:
    """Fold the extenders' answers into an explain report: the nodes they rejected become rejected
    (by ``extender URL``, with its reason), the others gain their weighted scores; the best node
    and the summary are worked out again."""
    from collections import Counter

    for entry in report["nodes"]:
        if not entry["feasible"]:
            continue
        name = entry["node"]
        if name not in verdict.passed:
            extender, reason, _ = verdict.rejected.get(name, ("extenders", NOT_ASKED, False))
            entry.clear()
            entry.update({"node": name, "feasible": False, "plugin": f"extender {extender}", "reasons": [reason]})
            continue
        for extender, by_node in extra.items():
            score = by_node.get(name, 0.0)
            entry["scores"][f"extender {extender}"] = score
            entry["total"] += score
    feasible = [e for e in report["nodes"] if e["feasible"]]
    others = [e for e in report["nodes"] if not e["feasible"]]
    report["nodes"] = sorted(feasible, key=lambda e: (-e["total"], e["node"])) + others
    if report.get("chosen") not in verdict.passed or extra:
        report["chosen"] = report["nodes"][0]["node"] if feasible else None
    counts: Counter = Counter(r for e in others for r in e["reasons"])
    parts = ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))
    head = f"{len(feasible)}/{report['total']} nodes are available"
    report["feasible"] = len(feasible)
    report["message"] = f"{head}: {parts}." if parts else f"{head}."


async def ask_extenders(fwk: Any, cache: Any, pod: Any, extenders: Any) -> tuple[Any, dict[str, dict[str, float]]]:
    """The extenders' verdict on the nodes the filters pass now, and their scores of the nodes they
    passed. Raises :class:`ExtenderError` when one that may not be ignored fails."""
    table = cache.table
    with cache.nominator.hidden_from(pod):
        feasible, _ = fwk.find_feasible(CycleState(), pod, table)
    asked = [(table.names[r], table.objects[r]) for r in feasible.tolist()]
    verdict = await extenders.filter(pod, asked)
    extra = await extenders.prioritize(pod, [(n, o) for n, o in asked if n in verdict.passed])
    return verdict, extra


def decide_among(fwk: Any, cache: Any, pod: Any, verdict: Any, extra: dict[str, dict[str, float]], *,
                 candidates: bool, state: CycleState | None = None) -> tuple[ScheduleResult | None, FitError | None, Any]:
    """A cycle on the cache as it is now, among the nodes the filters and every extender passed:
    (the best by the plugins' and extenders' scores, None, None), or with no such node (None, the
    fit error, what PostFilter found — preemption's every candidate too when ``candidates``)."""
    table = cache.table
    state = CycleState() if state is None else state
    with cache.nominator.hidden_from(pod):
        feasible, diagnosis = fwk.find_feasible(state, pod, table)
        feasible = reject_by_extenders(diagnosis, table, feasible, verdict)
        if len(feasible) == 0:
            fit = FitError(diagnosis)
            if candidates:
                state[WANT_CANDIDATES] = True
            return None, fit, post_filter(fwk, state, pod, fit)
        scores = fwk.prioritize(state, pod, feasible, table.size)
        add_extender_scores(scores, table, extra)
        row = fwk.select_host(scores, table)
    return ScheduleResult(table.names[row], row, diagnosis.node_count, len(feasible), scores), None, None


async def preempt_with_extenders(fwk: Any, cache: Any, pod: Any, fit: FitError, post: Any, extenders: Any, *,
                                 still_wanted: Callable[[], bool] = lambda: True) -> Any:
    """Preemption's candidates (``post.candidates``) through the extenders with a ``preemptVerb``,
    then the best of what they kept, checked on the cache as it is once they answered. None when
    ``still_wanted`` says the pod went away meanwhile. Raises :class:`ExtenderError` when one that
    may not be ignored fails."""
    proposals = {node: Proposal(tuple(v.uid for v in victims), violations, tuple(v.obj for v in victims))
                 for node, victims, violations in post.candidates}
    kept, dropped = await extenders.process_preemption(pod, proposals)
    if not still_wanted():
        return None  # deleted while the extenders answered: nobody to make room for
    chooser = next(p for p in fwk.post_filters if hasattr(p, "choose"))
    with cache.nominator.hidden_from(pod):
        return chooser.choose(pod, fit.diagnosis, {n: (p.uids, p.violations) for n, p in kept.items()}, dropped)
