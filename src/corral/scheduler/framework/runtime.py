"""Runs one profile's plugins for one pod: the filter and score pipeline, with its diagnosis.

Stages, each in its own method:

1. ``pre_filter``: every PreFilter plugin prepares; a rejection fails all nodes at once, SKIP
   switches off that plugin's filter for this pod.
2. ``find_feasible``: the Filter plugins run in profile order over all rows; a row rejected by an
   earlier plugin is not offered to later ones, so each rejected node is attributed to exactly one
   plugin, as in Kubernetes. The :class:`Diagnosis` records who rejected which node and why.
3. ``sample``: with ``percentageOfNodesToScore`` below 100, only the first feasible nodes in
   zone-interleaved order (starting after the last pod's stopping point) go on to scoring.
4. ``prioritize``: Score plugins give each feasible row a number; NormalizeScore scales it to
   0–100; the profile's weights sum them.
5. ``select_host``: the best total; ties broken by a seeded random choice or by node name.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from corral.scheduler.framework.interface import CycleState, FilterResult, Plugin
from corral.scheduler.framework.podinfo import PodInfo
from corral.scheduler.framework.status import SUCCESS, Code, Status

__all__ = ["Framework", "Diagnosis", "Scores", "PRE_FILTERED"]

# A PreFilter step's Status already taken in this cycle's state (the remembered path's, when it hands
# the pod on to the full evaluation); find_feasible takes it instead of running PreFilter again, once.
PRE_FILTERED = "Framework/preFiltered"



@dataclass(slots=True)
class Diagnosis:
    """Why nodes were rejected: per row the rejecting plugin's index (-1: passed), and the reasons."""

    node_count: int
    rejected_by: np.ndarray
    plugin_names: list[str]
    reasons: list[tuple[int, str, np.ndarray, bool]] = field(default_factory=list)  # plugin, msg, rows, unresolvable
    pre_filter: Status | None = None

    def reason_counts(self) -> Counter:
        counts: Counter = Counter()
        if self.pre_filter is not None:
            for r in self.pre_filter.reasons:
                counts[r] = self.node_count
            return counts
        for plugin, message, rows, _ in self.reasons:
            n = int(np.count_nonzero(rows & (self.rejected_by[: len(rows)] == plugin)))
            if n:
                counts[message] += n
        return counts

    def message(self, feasible: int = 0) -> str:
        """Kubernetes' shape: ``0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had ...``."""
        parts = sorted(f"{n} {reason}" for reason, n in self.reason_counts().items())
        head = f"{feasible}/{self.node_count} nodes are available"
        return f"{head}: {', '.join(parts)}." if parts else f"{head}."

    def reject(self, rows: np.ndarray, plugin: str, message: str, *, unresolvable: bool) -> None:
        """Record that ``plugin`` (an extender, after the filters) rejected ``rows`` (bool per row)."""
        if plugin not in self.plugin_names:
            self.plugin_names = [*self.plugin_names, plugin]  # never the framework's own list
        idx = self.plugin_names.index(plugin)
        self.rejected_by[rows] = idx
        self.reasons.append((idx, message, rows, unresolvable))

    def preemptable_rows(self) -> np.ndarray:
        """Rows rejected only for reasons removing pods could fix (bool per row): Kubernetes'
        potential nodes for preemption. A rejection marked unresolvable (a taint, a selector, a
        cordon) rules its rows out."""
        rejected = self.rejected_by >= 0
        if self.pre_filter is not None:
            return rejected if self.pre_filter.code is Code.UNSCHEDULABLE else np.zeros_like(rejected)
        for plugin, _, rows, unresolvable in self.reasons:
            if unresolvable:
                rejected[: len(rows)] &= ~(rows & (self.rejected_by[: len(rows)] == plugin))
        return rejected

    def node_reasons(self, row: int) -> tuple[str, list[str]]:
        """(plugin, reasons) that rejected ``row``; ("", []) if it passed."""
        if self.pre_filter is not None:
            return self.pre_filter.plugin, list(self.pre_filter.reasons)
        idx = int(self.rejected_by[row])
        if idx < 0:
            return "", []
        msgs = [m for p, m, rows, _ in self.reasons if p == idx and row < len(rows) and rows[row]]
        return self.plugin_names[idx], msgs


@dataclass(slots=True)
class Scores:
    rows: np.ndarray  # the scored rows
    total: np.ndarray  # weighted sum per row
    by_plugin: dict[str, np.ndarray]  # normalised, weighted, per plugin


class Framework:
    """One profile: its plugins per extension point, their weights and the cycle's settings."""

    def __init__(self, *, scheduler_name: str, plugins: dict[str, list[Plugin]],
                 weights: dict[str, int], percentage_of_nodes_to_score: int,
                 tie_break: str, seed: int) -> None:
        """``plugins`` has every extension point, each with its plugins in order (queueSort: one)."""
        self.scheduler_name = scheduler_name
        self.queue_sort = plugins["queueSort"][0]
        self.pre_enqueue = plugins["preEnqueue"]
        self.pre_filters = plugins["preFilter"]
        self.filters = plugins["filter"]
        self.post_filters = plugins["postFilter"]
        self.pre_scores = plugins["preScore"]
        self.scorers = plugins["score"]
        self.reservers = plugins["reserve"]
        self.permits = plugins["permit"]
        self.binders = plugins["bind"]
        self.weights = weights
        self.percentage = percentage_of_nodes_to_score
        self.tie_break = tie_break
        self.rng = random.Random(seed)  # the tie-break draws: ~4x cheaper per draw than numpy's Generator
        self.next_start = 0
        self._filter_names = [p.NAME for p in self.filters]
        self._weighted_scorers = [p for p in self.scorers if weights.get(p.NAME, 1) != 0]
        self._row_readers = [p for p in self.pre_scores
                             if type(p).pre_score_reads_rows is not Plugin.pre_score_reads_rows]
        # Bound once, as every cycle calls them (an attribute lookup per plugin and pod saved).
        self._pre_filter_calls = [(p.pre_filter, p.NAME) for p in self.pre_filters]
        self._pre_score_calls = [(p.pre_score, p.NAME) for p in self.pre_scores]
        self._scorers_by_skipped: dict[frozenset[str], tuple[Plugin, ...]] = {}  # a few sets of skipped PreScores
        from corral.scheduler.framework.remembered import Remembered  # it reads this module's Scores

        self.remembered = Remembered(self)

    @property
    def all_plugins(self) -> list[Plugin]:
        seen: dict[int, Plugin] = {}
        for group in (self.pre_enqueue, self.pre_filters, self.filters, self.post_filters,
                      self.pre_scores, self.scorers, self.reservers, self.permits, self.binders):
            for p in group:
                seen.setdefault(id(p), p)
        seen.setdefault(id(self.queue_sort), self.queue_sort)
        return list(seen.values())

    # --- filtering --------------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        skipped: list[str] = []
        skip, success = Code.SKIP, Code.SUCCESS
        for pre_filter, name in self._pre_filter_calls:
            status = pre_filter(state, pod)
            code = status.code
            if code is skip:
                skipped.append(name)
            elif code is not success:
                return Status(code, status.reasons, name)
        state["__skip_filter"] = tuple(skipped)  # in profile order: a key for what depends on it
        return SUCCESS

    def find_feasible(self, state: CycleState, pod: PodInfo, table: Any, *,
                      only: np.ndarray | None = None) -> tuple[np.ndarray, Diagnosis]:
        """Rows every filter accepts, and the diagnosis of those it rejected; ``only`` (bool per
        row) limits the rows considered (preemption's dry run of one node)."""
        size = table.size
        rejected_by = np.full(size, -1, dtype=np.int16)
        diagnosis = Diagnosis(table.node_count, rejected_by, self._filter_names)
        status = state.pop(PRE_FILTERED, None)
        if status is None:
            status = self.pre_filter(state, pod)
        if not status.ok:
            diagnosis.pre_filter = status
            rejected_by[table.valid[:size]] = 0
            return np.zeros(0, dtype=np.int64), diagnosis
        candidates = table.valid[:size].copy()
        if only is not None:
            candidates &= only[:size]
        skipped = state.get("__skip_filter", ())
        for idx, plugin in enumerate(self.filters):
            if plugin.NAME in skipped:
                continue
            result: FilterResult = plugin.filter(state, pod, candidates)
            if result.passed is None:
                continue
            passed = result.passed[:size]
            newly = candidates & ~passed
            if newly.any():
                rejected_by[newly] = idx
                for reason in result.reasons:
                    diagnosis.reasons.append((idx, reason.message, reason.rows[:size], reason.unresolvable))
                candidates &= passed
                if not candidates.any():
                    break
        return np.flatnonzero(candidates), diagnosis

    def sample(self, rows: np.ndarray, table: Any, order: np.ndarray | None) -> np.ndarray:
        """Kubernetes' percentageOfNodesToScore: keep the first K feasible rows in node order."""
        total = table.node_count
        if self.percentage >= 100 or len(rows) <= 100:
            return rows
        if self.percentage > 0:
            k = max(total * self.percentage // 100, 100)
        else:  # Kubernetes' adaptive default: 50% at small scale, down to 5% from 5,625 nodes up.
            adaptive = max(50 - total // 125, 5)
            k = max(total * adaptive // 100, 100)
        if len(rows) <= k or order is None or len(order) == 0:
            return rows[:k] if len(rows) > k else rows
        feasible = np.zeros(table.size, dtype=bool)
        feasible[rows] = True
        start = self.next_start % len(order)
        rotated = np.concatenate([order[start:], order[:start]])
        picked_positions = np.flatnonzero(feasible[rotated])[:k]
        self.next_start = (start + int(picked_positions[-1]) + 1) % len(order)
        return np.sort(rotated[picked_positions])

    # --- scoring ----------------------------------------------------------------------------------------

    def prioritize(self, state: CycleState, pod: PodInfo, rows: np.ndarray, size: int = -1) -> Scores:
        # Every row feasible: plugins take a slice of each column, which is cheaper than an index.
        sel = slice(0, size) if len(rows) == size else rows
        total, by_plugin = self.sum_scores(state, pod, self.active_scorers(state, pod, sel), sel, len(rows))
        return Scores(rows, total, by_plugin)

    def pre_scores_read_rows(self, pod: PodInfo) -> bool:
        """Whether a PreScore plugin would read which rows ``active_scorers`` is given, for ``pod``."""
        return any(p.pre_score_reads_rows(pod) for p in self._row_readers)

    def active_scorers(self, state: CycleState, pod: PodInfo, sel: np.ndarray | slice) -> tuple[Plugin, ...]:
        """The PreScore step: the Score plugins that will score ``pod`` on the rows ``sel``."""
        skip = Code.SKIP
        skipped = frozenset([name for pre_score, name in self._pre_score_calls
                             if pre_score(state, pod, sel).code is skip])
        scorers = self._scorers_by_skipped.get(skipped)
        if scorers is None:
            scorers = self._scorers_by_skipped[skipped] = tuple(p for p in self._weighted_scorers if p.NAME not in skipped)
        return scorers

    def sum_scores(self, state: CycleState, pod: PodInfo, scorers: Sequence[Plugin], sel: np.ndarray | slice,
                   count: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The weighted total over ``sel`` (``count`` rows) and each plugin's normalised, weighted
        part, summed in profile order (the remembered decisions rely on this exact order)."""
        by_plugin: dict[str, np.ndarray] = {}
        total, owned = None, False  # owned: total is an array of ours, safe to add into
        for plugin in scorers:
            weight = self.weights.get(plugin.NAME, 1)
            raw = plugin.score(state, pod, sel)
            if hasattr(plugin, "normalize"):
                raw = plugin.normalize(state, pod, raw)
            weighted = raw if weight == 1 else raw * weight  # never in place: a plugin may keep its array
            by_plugin[plugin.NAME] = weighted
            # The first two are added into a new array, later ones into it: each pass over the rows
            # costs about a microsecond on 5,000 nodes, and this runs for every pod.
            if total is None:
                total = weighted
            elif owned:
                total += weighted
            else:
                total, owned = np.add(total, weighted, dtype=np.float64), True
        if total is None:
            total = np.zeros(count, dtype=np.float64)
        return total, by_plugin

    def select_host(self, scores: Scores, table: Any) -> int:
        """The row with the best total; ties by seeded random choice or by node name."""
        if len(scores.rows) == 1:
            return int(scores.rows[0])
        best = np.flatnonzero(scores.total == scores.total.max())
        if len(best) == 1:
            return int(scores.rows[best[0]])
        if self.tie_break == "name":
            return int(min((table.names[scores.rows[i]], scores.rows[i]) for i in best)[1])
        return int(scores.rows[best[self.rng.randrange(len(best))]])
