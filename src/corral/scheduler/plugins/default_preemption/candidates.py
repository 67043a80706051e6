"""Preemption over the columns: for every node at once, which lower-priority pods would have to go.

For a pod of priority *p* and the rows preemption may help on, :func:`find_candidates`:

1. takes every counted pod of priority below *p* on those rows as a potential victim (one mask over
   the cache's :class:`~corral.scheduler.cache.pod_columns.PodColumns`);
2. adds up, per row, what removing all of them would free (``bincount`` per resource, host ports
   included) and keeps the rows where the pod would then fit — the others have no victims to offer;
3. reprieves victims as Kubernetes does: first those whose removal would take a
   PodDisruptionBudget below zero, then the others, each group most important first (higher
   priority, then earlier start); a victim stays if the pod still fits with it back. Round *k*
   decides the *k*-th victim of every row at once, so the rounds are as many as the most pods on
   one node, not as many as pods;
4. ranks the candidate rows by Kubernetes' order: a row needing no victim; then the fewest victims
   that break a budget; the lowest highest-victim priority; the smallest sum of victim priorities (each offset by 2³¹, as Kubernetes
   adds MaxInt32 + 1, so more victims weigh more even at negative priorities); the fewest victims;
   the latest start among the highest-priority victims; then the row (the node that joined first).

Pods already terminating (deleted, or victims of an earlier preemption) are freed room that costs
nothing: they are never reprieved and never counted as victims.

This is exact for what the resource and port filters decide. Other filters (pod affinity,
topology spread, custom plugins) may see it otherwise: the plugin checks the chosen row with every
filter and falls back to a node-by-node dry run where they disagree (:mod:`.dry_run`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from corral.scheduler.cache.cache import Cache
from corral.scheduler.framework.podinfo import PodInfo
from corral.scheduler.plugins.node_ports import REASON as PORTS_REASON
from corral.scheduler.plugins.node_resources_fit import TOO_MANY_PODS, insufficient

__all__ = ["Candidates", "find_candidates", "PRIORITY_OFFSET"]

PRIORITY_OFFSET = 2**31  # Kubernetes adds MaxInt32 + 1 to each victim's priority before summing


@dataclass(slots=True)
class Candidates:
    """Rows where preemption can make room, best first, and their victims' slots."""

    ranked: np.ndarray  # candidate rows, best first
    victim_slots: np.ndarray  # slots of the victims on candidate rows, grouped by row, most important first
    victim_rows: np.ndarray  # the row of each of those
    no_lower: np.ndarray  # bool per row: a potential row with no lower-priority pod at all
    violations: np.ndarray  # per row: how many of its victims break a PodDisruptionBudget
    reasons: list[tuple[str, np.ndarray]] = field(default_factory=list)  # why rows are not candidates

    def victims_of(self, row: int) -> np.ndarray:
        return self.victim_slots[self.victim_rows == row]


def _groups(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For an array sorted by row: the index where each row's run starts, and each entry's run."""
    starts = np.r_[True, rows[1:] != rows[:-1]]
    return np.flatnonzero(starts), np.cumsum(starts) - 1


def _budget_violations(cache: Cache, slots: np.ndarray, rows_of: np.ndarray, terminating: np.ndarray) -> np.ndarray:
    """Per victim (sorted by row, most important first): whether removing it, with the more
    important ones of its row before it, takes a PodDisruptionBudget below zero (Kubernetes counts
    each node's victims against the budgets on their own)."""
    violating = np.zeros(len(slots), dtype=bool)
    if not cache.budgets or not len(slots):
        return violating
    cols = cache.columns
    ids = cols.label_set[slots]
    distinct = np.unique(ids).tolist()
    first, group = _groups(rows_of)
    for budget in cache.budgets.values():
        chosen = [i for i in distinct if budget.selects(i, *cols.label_sets[i])]
        if not chosen:
            continue
        selected = np.isin(ids, chosen) & ~terminating  # a pod already leaving was counted before
        running = np.cumsum(selected)
        in_row = running - (running[first] - selected[first])[group]
        violating |= selected & (in_row > budget.allowed)
    return violating


def _needs(pod: PodInfo, check_resources: bool, ignored: frozenset[str]) -> list[tuple[str, int]]:
    if not check_resources:
        return []
    req = pod.requests
    needs = [("pods", 1)]
    needs += [(name, amount) for name, amount in (("cpu", req.cpu), ("memory", req.memory),
                                                  ("ephemeral-storage", req.ephemeral), *req.extended)
              if amount > 0 and name not in ignored]
    return needs


def _no_candidates(potential: np.ndarray) -> Candidates:
    """What the ranking below finds where no potential row holds a lower-priority pod, without its
    passes over every row and pod: a pod no node takes is tried again and again (thousands at once
    after a zone is lost), and at 5,000 nodes and 50,000 pods those passes cost twice its filters."""
    none = np.zeros(0, dtype=np.int64)
    return Candidates(none, none, none, potential.copy(), np.zeros(len(potential), dtype=np.int64))


def find_candidates(cache: Cache, pod: PodInfo, potential: np.ndarray, *, check_resources: bool = True,
                    check_ports: bool = True, ignored: frozenset[str] = frozenset()) -> Candidates:
    """``potential``: bool per row, the rows removing pods could help on. ``check_resources`` /
    ``check_ports``: whether the profile filters on them (NodeResourcesFit, NodePorts); ``ignored``:
    resources NodeResourcesFit leaves to an extender."""
    table, cols = cache.table, cache.columns
    n = table.size
    potential = potential[:n]
    if not potential.any():  # every rejection is one removing pods cannot fix (a taint, a selector)
        return _no_candidates(potential)
    slots = cols.lower_priority(pod.priority, potential)
    if not len(slots):  # no pod of lower priority on those rows: nothing to take
        return _no_candidates(potential)
    rows_of = cols.row[slots]
    no_lower = potential & (np.bincount(rows_of, minlength=n)[:n] == 0)
    fits = potential & ~no_lower
    reasons: list[tuple[str, np.ndarray]] = []

    # 2. What removing every lower-priority pod frees, and the slack left once the pod is placed.
    needs = _needs(pod, check_resources, ignored)
    victim_amounts: dict[str, np.ndarray] = {}
    slack: dict[str, np.ndarray] = {}
    for name, amount in needs:
        if name == "pods":
            per_victim = np.ones(len(slots), dtype=np.int64)
        else:
            col = cols.requests.get(name)
            per_victim = col[slots] if col is not None else np.zeros(len(slots), dtype=np.int64)
        freed = np.bincount(rows_of, weights=per_victim, minlength=n)[:n].astype(np.int64)
        free = table.free.get(name)
        s = (free[:n] if free is not None else np.zeros(n, dtype=np.int64)) + freed - amount
        victim_amounts[name], slack[name] = per_victim, s
        short = fits & (s < 0)
        if short.any():
            reasons.append((TOO_MANY_PODS if name == "pods" else insufficient(name), short))
        fits &= s >= 0
    blocker = np.zeros(len(slots), dtype=bool)  # victims holding a host port the pod needs
    if check_ports and pod.host_ports:
        wanted = {(p.protocol, p.port) for p in pod.host_ports}
        for i in np.flatnonzero(cols.has_ports[slots]):
            held = cache.pods[cols.keys[slots[i]]].info.host_ports
            blocker[i] = any((p.protocol, p.port) in wanted for p in held)
        for key in wanted:
            used = table.ports.get(key)
            if used is None:
                continue
            holders = np.flatnonzero(blocker)
            freed = np.bincount(rows_of[holders], minlength=n)[:n] if len(holders) else 0
            taken = fits & (used[:n] - freed > 0)
            if taken.any():
                reasons.append((PORTS_REASON, taken))
            fits &= ~taken

    # 3. Reprieve, most important first; round k decides every row's k-th victim. Victims whose
    # removal would break a PodDisruptionBudget come first, so they are the likeliest to stay.
    keep = fits[rows_of]
    slots, rows_of, blocker = slots[keep], rows_of[keep], blocker[keep]
    victim_amounts = {name: v[keep] for name, v in victim_amounts.items()}
    order = cols.importance_order(slots, rows_of)
    slots, rows_of, blocker = slots[order], rows_of[order], blocker[order]
    terminating = cols.terminating[slots]
    victim_amounts = {name: v[order] for name, v in victim_amounts.items()}
    violating = _budget_violations(cache, slots, rows_of, terminating)
    if violating.any():
        order = np.lexsort((np.arange(len(slots)), ~violating, rows_of))  # stable: importance within
        slots, rows_of, blocker, terminating, violating = (slots[order], rows_of[order], blocker[order],
                                                           terminating[order], violating[order])
        victim_amounts = {name: v[order] for name, v in victim_amounts.items()}
    reprieved = np.zeros(len(slots), dtype=bool)
    if len(slots):
        first, group = _groups(rows_of)
        rank = np.arange(len(slots)) - first[group]
        by_rank = np.argsort(rank, kind="stable")
        bounds = np.r_[0, np.cumsum(np.bincount(rank))]
        for k in range(len(bounds) - 1):
            idx = by_rank[bounds[k]:bounds[k + 1]]
            idx = idx[~blocker[idx] & ~terminating[idx]]
            r = rows_of[idx]
            ok = np.ones(len(idx), dtype=bool)
            for name, s in slack.items():
                ok &= s[r] >= victim_amounts[name][idx]
            idx, r = idx[ok], r[ok]
            for name, s in slack.items():
                s[r] -= victim_amounts[name][idx]
            reprieved[idx] = True
    victims = ~reprieved & ~terminating
    v_slots, v_rows = slots[victims], rows_of[victims]
    violations = np.bincount(v_rows, weights=violating[victims], minlength=n)[:n]

    # 4. Rank the candidate rows.
    cand = np.flatnonzero(fits)
    count = np.bincount(v_rows, minlength=n)[:n]
    prio = cols.priority[v_slots]
    sums = np.bincount(v_rows, weights=prio.astype(np.float64) + PRIORITY_OFFSET, minlength=n)[:n]
    highest = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    earliest = np.full(n, np.inf)
    if len(v_rows):  # per row, the highest priority and the earliest start among those of that priority
        # (the victims are in importance order within each row, unless budgets reordered them)
        order = cols.importance_order(v_slots, v_rows) if violating.any() else np.arange(len(v_rows))
        heads = order[_groups(v_rows[order])[0]]
        highest[v_rows[heads]] = prio[heads]
        earliest[v_rows[heads]] = cols.start[v_slots[heads]]
    c = cand
    ranking = np.lexsort((c, -earliest[c], count[c], sums[c], highest[c], violations[c], count[c] > 0))
    return Candidates(c[ranking], v_slots, v_rows, no_lower, violations.astype(np.int64), reasons)
