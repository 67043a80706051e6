"""DefaultPreemption (PostFilter): when no node fits a pod, find the node where removing pods of
lower priority makes it fit, with the fewest and least important victims, as Kubernetes does.

The pipeline, each stage for a reason:

1. **Eligibility** — a pod with ``preemptionPolicy: Never`` never preempts; a pod already nominated
   on a node where lower-priority pods are still terminating waits for them instead of preempting
   again (its room is being made).
2. **Potential nodes** — the rows the filters rejected only for reasons removing pods could fix;
   a taint, a selector or a cordon rules a node out ("Preemption is not helpful for scheduling").
3. **Candidates over columns** (:mod:`.candidates`) — every potential node at once: what removing
   all lower-priority pods would free, which victims can be reprieved, and the ranking.
4. **Check with every filter** (:mod:`.dry_run`) — the best candidate is confirmed by running the
   profile's filters on that node with its victims taken out. Where the filters disagree with the
   columns (affinity, spreading, custom filters), that node gets Kubernetes' node-by-node dry run,
   for at most ``max(minCandidateNodesAbsolute, minCandidateNodesPercentage % of nodes)`` nodes.

5. **Extenders** — when extenders with a ``preemptVerb`` are interested in the pod, the state asks
   for every candidate (up to the same limit) instead of the best one; the extenders may drop
   nodes or name other victims, and :meth:`DefaultPreemption.choose` checks what they kept (each
   victim a pod of lower priority on that node, the pod fitting once they are gone) and picks the
   best by the same order.

The plugin decides and changes nothing; the scheduler nominates the pod and removes the victims
(asynchronously, so scheduling goes on while they terminate). :meth:`DefaultPreemption.evaluate`
also serves ``corral explain``: per node, the victims it would take or why it cannot help.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corral.scheduler.cache.cache import CachedPod
from corral.scheduler.cache.pod_columns import start_time
from corral.scheduler.framework.interface import WANT_CANDIDATES, CycleState, Plugin, PostFilterResult
from corral.scheduler.framework.podinfo import PodInfo
from corral.scheduler.framework.runtime import Diagnosis
from corral.scheduler.framework.status import SUCCESS, Status
from corral.scheduler.plugins.default_preemption.candidates import PRIORITY_OFFSET, find_candidates
from corral.scheduler.plugins.default_preemption.dry_run import fits_on, importance, select_victims_on_row

__all__ = ["DefaultPreemption", "Evaluation", "NAME", "NOT_HELPFUL", "NO_VICTIMS", "NEVER", "TERMINATING"]

NAME = "DefaultPreemption"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING = "not eligible due to a terminating pod on the nominated node."
NOT_EXAMINED = "not examined: the node-by-node dry run stopped at its limit"
NODE_GONE = "candidate node(s) left the cluster while the extenders decided"
NOT_VICTIMS = "candidate node(s) where an extender named victims that are not pods of lower priority there"
NO_ROOM = "candidate node(s) where the pod would not fit once the extender's victims were gone"


@dataclass(slots=True)
class Evaluation:
    """Preemption's answer for one pod: the node and victims chosen (``row`` -1: none), the
    ``message`` for the FailedScheduling summary, and, when asked for every node, each node's
    victims or the reasons it cannot help."""

    message: str
    row: int = -1
    node: str = ""
    victims: list[CachedPod] = field(default_factory=list)
    node_victims: dict[int, list[CachedPod]] = field(default_factory=dict)
    node_reasons: dict[int, list[str]] = field(default_factory=dict)
    candidates: list[tuple[int, list[CachedPod], int]] = field(default_factory=list)  # best first


def _nominated(node: str, victims: list[CachedPod]) -> str:
    """The FailedScheduling summary's preemption part when a node was nominated."""
    if not victims:
        return f"preemption: node {node} nominated: pods of lower priority are already leaving it."
    shown = ", ".join(v.info.key for v in victims[:5])
    more = f" and {len(victims) - 5} more" if len(victims) > 5 else ""
    return f"preemption: node {node} nominated, preempting {len(victims)} pod(s) of lower priority: {shown}{more}."


def _summary(node_count: int, counts: Counter) -> str:
    parts = sorted(f"{n} {reason}" for reason, n in counts.items() if n)
    return (f"preemption: 0/{node_count} nodes are available: {', '.join(parts)}." if parts
            else f"preemption: 0/{node_count} nodes are available.")


def _criteria(row: int, victims: list[CachedPod], violations: int) -> tuple:
    """Kubernetes' order for picking among candidate nodes (smaller is better)."""
    if not victims:
        return (False, 0, 0, 0, 0, 0.0, row)
    highest = max(v.info.priority for v in victims)
    earliest = min(start_time(v.info.obj) for v in victims if v.info.priority == highest)
    return (True, violations, highest, sum(v.info.priority + PRIORITY_OFFSET for v in victims), len(victims),
            -earliest, row)


def _percentage(value: Any, name: str, low: int, high: int | None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise ValueError(f"{NAME}: {name} must be an integer {bound}, not {value!r}")
    return value


class DefaultPreemption(Plugin):
    NAME = NAME

    def __init__(self, handle) -> None:
        super().__init__(handle)
        args = self.handle.args
        self.min_percentage = _percentage(args.get("minCandidateNodesPercentage", 10),
                                          "minCandidateNodesPercentage", 0, 100)
        self.min_absolute = _percentage(args.get("minCandidateNodesAbsolute", 100), "minCandidateNodesAbsolute", 0, None)

    # --- the extension point ---------------------------------------------------------------------

    def post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis) -> PostFilterResult:
        why = self.ineligible(pod, diagnosis)
        if why:
            message = f"preemption: {why}"
            return PostFilterResult(Status.unschedulable(message, plugin=NAME), message=message)
        every = bool(state.get(WANT_CANDIDATES))
        found = self.evaluate(pod, diagnosis, want=self._limit() if every else 1)
        if found.row < 0:
            return PostFilterResult(Status.unschedulable(found.message, plugin=NAME), message=found.message,
                                    clear_nomination=True)
        names = self.cache.table.names
        candidates = tuple((names[row], tuple(v.info for v in victims), violations)
                           for row, victims, violations in found.candidates) if every else ()
        return PostFilterResult(SUCCESS, found.node, tuple(v.info for v in found.victims), found.message,
                                candidates=candidates)

    def choose(self, pod: PodInfo, diagnosis: Diagnosis, kept: dict[str, tuple[tuple[str, ...], int]],
               dropped: dict[str, str]) -> PostFilterResult:
        """The best of the candidates the extenders ``kept`` (node → the victims' uids and their
        budget violations), each checked on the cache as it is now: every victim a pod of lower
        priority on that node, and the pod fitting every filter once they (and the lower-priority
        pods already leaving) are gone. ``dropped``: node → the extender that dropped it, for the
        summary. Called by the scheduler with the same nominations hidden as :meth:`post_filter`."""
        cache, fwk = self.cache, self.handle.framework
        counts: Counter = Counter(f"candidate node(s) refused by extender {name}" for name in dropped.values())
        chosen: list[tuple[int, list[CachedPod], int]] = []
        for node, (uids, violations) in kept.items():
            row = cache.table.row_of.get(node)
            if row is None or not cache.table.valid[row]:  # a row may outlive its node while pods name it
                counts[NODE_GONE] += 1
                continue
            on_node = {c.info.uid: c for c in cache.pods_on(row)}
            named = {uid: on_node.get(uid) for uid in uids}
            if any(c is None or c.info.priority >= pod.priority for c in named.values()):
                counts[NOT_VICTIMS] += 1
                continue
            leaving = {c.info.key: c for c in on_node.values() if c.terminating and c.info.priority < pod.priority}
            lifted = {**leaving, **{c.info.key: c for c in named.values()}}
            with cache.lifted(lifted.values()):
                ok = fits_on(fwk, cache, pod, row)[0]
            if not ok:
                counts[NO_ROOM] += 1
                continue
            chosen.append((row, sorted((c for c in named.values() if not c.terminating), key=importance), violations))
        if not chosen:
            message = _summary(diagnosis.node_count, counts)
            return PostFilterResult(Status.unschedulable(message, plugin=NAME), message=message, clear_nomination=True)
        row, victims, _ = min(chosen, key=lambda c: _criteria(*c))
        node = cache.table.names[row]  # a candidate row: a node in the table
        return PostFilterResult(SUCCESS, node, tuple(v.info for v in victims), _nominated(node, victims))

    # --- stages ----------------------------------------------------------------------------------

    def ineligible(self, pod: PodInfo, diagnosis: Diagnosis) -> str:
        """Why ``pod`` may not preempt now ("" if it may)."""
        if pod.preemption_policy == "Never":
            return NEVER
        cache = self.cache
        # The nominator, not the pod's status: the status may still name a node preemption has just
        # let go, and a nomination from before a restart is in the nominator once the pod is seen.
        row = cache.table.row_of.get(cache.nominator.node_of(pod.key))
        if row is None or not diagnosis.preemptable_rows()[row]:
            return ""  # no nomination, or its node cannot be helped any more: preempt elsewhere
        if any(c.terminating and c.info.priority < pod.priority for c in cache.pods_on(row)):
            return TERMINATING
        return ""

    def _limit(self) -> int:
        nodes = self.cache.table.node_count
        return max(math.ceil(nodes * self.min_percentage / 100), self.min_absolute, 1)

    def evaluate(self, pod: PodInfo, diagnosis: Diagnosis, *, every_node: bool = False, want: int = 1) -> Evaluation:
        """Choose the node and victims for ``pod``; with ``every_node``, also say for each rejected
        node what preemption would take there or why it cannot help (``corral explain``). ``want``:
        how many confirmed candidates to gather before choosing (more than one for extenders)."""
        fwk, cache = self.handle.framework, self.cache
        table, cols = cache.table, cache.columns
        potential = diagnosis.preemptable_rows()
        by_name = {p.NAME: p for p in fwk.filters}
        fit = by_name.get("NodeResourcesFit")
        cands = find_candidates(cache, pod, potential, check_resources=fit is not None,
                                check_ports="NodePorts" in by_name,
                                ignored=getattr(fit, "ignored_resources", frozenset()))
        chosen: list[tuple[int, list[CachedPod], int]] = []
        examined, limit = 0, self._limit()
        exact: dict[int, list[CachedPod] | None] = {}  # rows the node-by-node dry run decided
        exact_reasons: dict[int, list[str]] = {}
        for row in cands.ranked.tolist():
            victims = [cache.pods[cols.keys[s]] for s in cands.victims_of(row)]
            with cache.lifted(victims):
                ok = fits_on(fwk, cache, pod, row)[0]
            if ok:
                chosen.append((row, victims, int(cands.violations[row])))
                if len(chosen) >= want:
                    break
                continue
            # The columns' victims do not satisfy every filter here: Kubernetes' dry run decides.
            examined += 1
            result = select_victims_on_row(fwk, cache, pod, row)
            exact[row] = result.victims
            if result.victims is None:
                exact_reasons[row] = result.reasons
            else:
                chosen.append((row, result.victims, result.violations))
            if examined >= limit or (want > 1 and len(chosen) >= want):
                break
        out = Evaluation("")
        if chosen:
            out.candidates = sorted(chosen, key=lambda c: _criteria(*c))
            out.row, out.victims, _ = out.candidates[0]
            out.node = table.names[out.row]  # a candidate row: a node in the table
            out.message = _nominated(out.node, out.victims)
            if not every_node:
                return out
        # Why the other nodes cannot help: counted over the masks for the summary; node by node only
        # for explain.
        rejected = diagnosis.rejected_by[: table.size] >= 0
        not_helpful = rejected & ~potential[: table.size]
        stopped = examined >= limit
        if not chosen:
            counts: Counter = Counter({NOT_HELPFUL: int(not_helpful.sum()), NO_VICTIMS: int(cands.no_lower.sum())})
            for message, rows in cands.reasons:
                counts[message] += int(rows.sum())
            for rs in exact_reasons.values():
                counts.update(rs)
            if stopped:
                counts[NOT_EXAMINED] += sum(1 for row in cands.ranked.tolist() if row not in exact)
            out.message = _summary(diagnosis.node_count, counts)
        if not every_node:
            return out
        reasons: dict[int, list[str]] = {row: [NOT_HELPFUL] for row in np.flatnonzero(not_helpful).tolist()}
        for row in np.flatnonzero(cands.no_lower).tolist():
            reasons[row] = [NO_VICTIMS]
        for message, rows in cands.reasons:
            for row in np.flatnonzero(rows).tolist():
                reasons.setdefault(row, []).append(message)
        reasons.update(exact_reasons)
        for row in cands.ranked.tolist():
            if row == out.row:
                out.node_victims[row] = out.victims
            elif exact.get(row) is not None:
                out.node_victims[row] = exact[row]
            elif row not in exact:
                if stopped and not chosen:
                    reasons[row] = [NOT_EXAMINED]
                else:
                    out.node_victims[row] = [cache.pods[cols.keys[s]] for s in cands.victims_of(row)]
        out.node_reasons = reasons
        return out
