"""One batch decision for a Placement: every node filtered and scored once, then picked by policy.

The stages, each for a reason:

1. **Filter once** — the decision pod (one copy of the template, with the policy's required terms
   and tolerations) through the profile's filters over every node, as a pod would go: what one
   copy needs decides where copies may go.
2. **Score once** — the profile's score plugins, plus each preferred term of the policy: its weight
   where its node terms match, or its weight scaled by a node number (property sorters).
3. **Keep what runs** (IgnoredDuringExecution) — nodes that already hold a copy stay selected even
   if their labels or taints no longer fit; a smaller ``numberOfNodes`` lets go of the lowest scored.
4. **Pick** — PickAll: every feasible node; PickN: the best by score, greedily, each pick keeping
   every ``DoNotSchedule`` spread constraint within its ``maxSkew`` (and ``ScheduleAnyway`` ones
   where a choice allows); PickFixed: the named nodes, each one that cannot take a copy with its
   reason.

Pure: reads the cache, changes nothing. Every node that is not selected gets a reason, so a
Placement's status and ``corral explain`` can say why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from corral.api.quantity import QuantityError, to_milli, to_units

from corral.scheduler.batch.policy import PICK_FIXED, PICK_N, Policy, Preference, decision_pod, read_policy
from corral.scheduler.framework.interface import CycleState
from corral.scheduler.framework.podinfo import PodInfo
from corral.scheduler.plugins.node_affinity import term_mask
from corral.scheduler.plugins.taint_toleration import untolerated_table

__all__ = ["BatchDecision", "NodeDecision", "decide", "property_column", "NOT_FOUND", "KEPT"]

NOT_FOUND = "node not found"
KEPT = "keeps its copy: the node no longer fits the policy, and running copies are not moved"
DEFAULT_UNSELECTED_LIMIT = 20  # unselected nodes listed by name; the summary counts them all


@dataclass(frozen=True, slots=True)
class NodeDecision:
    node: str
    selected: bool
    score: float | None  # plugins' weighted total plus the preferences; None: not scored (infeasible)
    reason: str = ""
    scores: dict[str, float] = field(default_factory=dict)  # by plugin, and "preference[i]" by term


@dataclass(slots=True)
class BatchDecision:
    policy: Policy
    decisions: list[NodeDecision]  # the selected, best first; then up to the limit of the others (PickFixed: all)
    summary: str  # counts every node, listed or not ("3/40 nodes are available: ...")

    @property
    def selected(self) -> list[str]:
        return [d.node for d in self.decisions if d.selected]


def property_column(table: Any, name: str) -> np.ndarray | None:
    """A node number as a float column (NaN: the node has no such number); None: unknown name."""
    n = table.size
    if name == "network/download":
        return table.download_bps[:n]
    kind, _, resource = name.partition("/")
    if kind == "capacity" and resource:  # status.capacity: no column (only a decision asks), read per node
        return np.array([_capacity(table.objects[row], resource) for row in range(n)], dtype=np.float64)
    columns = {"allocatable": table.allocatable, "available": table.free}.get(kind)
    if columns is None or not resource:
        return None
    column = columns.get(resource)
    return np.zeros(n) if column is None else column[:n].astype(np.float64)


def _capacity(node: dict[str, Any] | None, resource: str) -> float:
    """A node's ``status.capacity`` of ``resource`` in the units allocatable columns use (cpu in
    millicores); 0 when it reports none, NaN for an empty row."""
    if node is None:
        return np.nan
    quantity = ((node.get("status") or {}).get("capacity") or {}).get(resource)
    if quantity is None:
        return 0.0
    try:
        return float(to_milli(quantity) if resource == "cpu" else to_units(quantity))
    except QuantityError:
        return 0.0


def _preference_scores(table: Any, rows: np.ndarray, preference: Preference) -> np.ndarray:
    """One preferred term's score for each of ``rows``."""
    if preference.term is not None:
        return np.where(term_mask(table, preference.term)[rows], float(preference.weight), 0.0)
    sorter = preference.sorter
    column = property_column(table, sorter.name)  # type: ignore[union-attr]
    out = np.zeros(len(rows))
    if column is None:
        return out
    values = column[rows]
    known = ~np.isnan(values)
    if not known.any():
        return out
    low, high = values[known].min(), values[known].max()
    if high == low:
        out[known] = preference.weight  # every node is the best
        return out
    share = (values[known] - low) / (high - low)
    out[known] = preference.weight * (share if sorter.descending else 1.0 - share)  # type: ignore[union-attr]
    return out


def decide(fwk: Any, cache: Any, placement: dict[str, Any], *, keep: Iterable[str] = (),
           held: Iterable[str] | None = None, unselected_limit: int = DEFAULT_UNSELECTED_LIMIT) -> BatchDecision:
    """The nodes ``placement`` should have a copy on, now. ``keep``: nodes selected by an earlier
    decision (they stay, IgnoredDuringExecution). ``held``: the nodes a copy is bound to; given,
    a kept node with a NoExecute taint the copies do not tolerate stays only while its copy is
    there — once the node lifecycle has evicted it, PickN fills the gap elsewhere."""
    policy = read_policy(placement)
    pod = PodInfo.from_object(decision_pod(placement))
    table = cache.table
    state = CycleState()
    feasible, diagnosis = fwk.find_feasible(state, pod, table)
    rows = {table.row_of[n] for n in keep if n in table.row_of and table.valid[table.row_of[n]]}
    if held is not None and rows:
        held_rows = {table.row_of[n] for n in held if n in table.row_of}
        evicting = untolerated_table(table, pod.tolerations, ("NoExecute",))
        rows = {r for r in rows if r in held_rows or not evicting[table.taints[r]].any()}
    kept = np.array(sorted(rows), dtype=np.int64)
    if policy.placement_type == PICK_FIXED:
        named = np.array(sorted({table.row_of[n] for n in policy.node_names if n in table.row_of}), dtype=np.int64)
        feasible = np.intersect1d(feasible, named)
        kept = np.intersect1d(kept, named)
    considered = np.union1d(feasible, kept)
    scores = fwk.prioritize(state, pod, considered, table.size)
    by_plugin = dict(scores.by_plugin)
    total = np.array(scores.total, dtype=np.float64)
    for i, preference in enumerate(policy.preferences):
        extra = _preference_scores(table, considered, preference)
        by_plugin[f"preference[{i}]"] = extra
        total = total + extra
    names = [table.names[r] for r in considered.tolist()]
    order = np.array(sorted(range(len(considered)), key=lambda p: (-total[p], names[p])), dtype=np.int64)
    picker = _Picker(table, policy, considered, total, order, kept)
    chosen, reasons = picker.pick()
    return _report(table, policy, diagnosis, feasible, considered, total, by_plugin, chosen, reasons, unselected_limit)


class _Picker:
    """Stage 3 and 4 over the considered rows (positions into ``considered``)."""

    def __init__(self, table: Any, policy: Policy, considered: np.ndarray, total: np.ndarray,
                 order: np.ndarray, kept: np.ndarray) -> None:
        self.table, self.policy, self.considered, self.total = table, policy, considered, total
        self.order = order  # positions, best score first, then by name
        self.kept = np.isin(considered, kept)

    def pick(self) -> tuple[list[int], dict[int, str]]:
        """Positions chosen (best first) and a reason for each considered position not chosen."""
        if self.policy.placement_type != PICK_N:
            return [int(p) for p in self.order], {}  # PickAll and PickFixed take every considered node
        n = self.policy.number_of_nodes
        kept = [int(p) for p in self.order if self.kept[p]]
        chosen, reasons = kept[:n], {p: "scaled down: the copies on better-scored nodes are kept" for p in kept[n:]}
        spread = _SpreadCounts(self.table, self.policy, self.considered, chosen)
        taken = np.zeros(len(self.considered), dtype=bool)
        taken[kept] = True
        while len(chosen) < n:
            free = self.order[~taken[self.order]]
            if len(free) == 0:
                break
            hard, soft = spread.allowed(free)
            both = np.flatnonzero(hard & soft)
            if len(both):
                pick = both[0]
            elif hard.any():
                pick = np.flatnonzero(hard)[0]
            else:
                break
            position = int(free[pick])
            chosen.append(position)
            taken[position] = True
            spread.add(position)
        rest = self.order[~taken[self.order]]
        if len(rest):
            hard, _ = spread.allowed(rest)
            for position, ok in zip(rest.tolist(), hard.tolist()):
                reasons[position] = (f"not among the {n} best (score {self.total[position]:.1f})" if ok
                                     else spread.why_not(position))
        return chosen, reasons


class _SpreadCounts:
    """Copies per topology domain for each spread constraint of a PickN policy."""

    def __init__(self, table: Any, policy: Policy, considered: np.ndarray, chosen: list[int]) -> None:
        self.constraints = policy.spread
        self.codes, self.counts, self.domains = [], [], []
        for c in self.constraints:
            codes = table.labels.column(c.topology_key)[: table.size][considered]
            counts = np.zeros(int(codes.max(initial=0)) + 1, dtype=np.int64)
            np.add.at(counts, codes[chosen], 1)
            domains = np.unique(codes[codes != 0])  # the domains of the nodes considered
            self.codes.append(codes)
            self.counts.append(counts)
            self.domains.append(domains)

    def _within(self, i: int, positions: np.ndarray) -> np.ndarray:
        """Whether a copy at each of ``positions`` keeps constraint ``i`` (Kubernetes' skew: the
        domain's count plus this copy, less the smallest domain's, within maxSkew)."""
        codes, counts, domains = self.codes[i], self.counts[i], self.domains[i]
        low = counts[domains].min() if len(domains) else 0
        mine = codes[positions]
        return (mine != 0) & (counts[mine] + 1 - low <= self.constraints[i].max_skew)

    def allowed(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each position: would a copy there keep the hard constraints, and the soft ones."""
        hard = np.ones(len(positions), dtype=bool)
        soft = np.ones(len(positions), dtype=bool)
        for i, c in enumerate(self.constraints):
            if c.hard:
                hard &= self._within(i, positions)
            else:
                soft &= self._within(i, positions)
        return hard, soft

    def add(self, position: int) -> None:
        for codes, counts in zip(self.codes, self.counts):
            counts[codes[position]] += 1

    def why_not(self, position: int) -> str:
        for i, c in enumerate(self.constraints):
            if not c.hard or self._within(i, np.array([position]))[0]:
                continue
            if self.codes[i][position] == 0:
                return f"topology spread: the node has no {c.topology_key} label"
            return f"topology spread: another copy in its {c.topology_key} would exceed maxSkew {c.max_skew}"
        return ""


def _report(table: Any, policy: Policy, diagnosis: Any, feasible: np.ndarray, considered: np.ndarray,
            total: np.ndarray, by_plugin: dict[str, np.ndarray], chosen: list[int], reasons: dict[int, str],
            unselected_limit: int) -> BatchDecision:
    def scored(position: int, selected: bool, reason: str) -> NodeDecision:
        return NodeDecision(table.names[considered[position]], selected, float(total[position]), reason,
                            {name: float(column[position]) for name, column in by_plugin.items()})

    feasible_set = set(feasible.tolist())
    decisions = [scored(p, True, "" if int(considered[p]) in feasible_set else KEPT) for p in chosen]
    # Only the best-scored of the others are listed: no decision is built to be thrown away.
    others = [scored(p, False, reasons[p]) for p in sorted(reasons, key=lambda p: -total[p])[:unselected_limit]]
    considered_set = set(considered.tolist())
    if policy.placement_type == PICK_FIXED:
        rejected = []
        for name in policy.node_names:
            row = table.row_of.get(name)
            if row is None or not table.valid[row]:
                rejected.append(NodeDecision(name, False, None, NOT_FOUND))
            elif row not in considered_set:  # every valid row is filtered: a filter rejected it
                plugin, why = diagnosis.node_reasons(row)
                rejected.append(NodeDecision(name, False, None, f"{plugin}: {', '.join(why)}"))
    else:
        rows = np.flatnonzero(table.valid[: table.size])
        rejected = []
        for row in rows[~np.isin(rows, considered)].tolist()[: max(unselected_limit - len(others), 0)]:
            plugin, why = diagnosis.node_reasons(row)
            rejected.append(NodeDecision(table.names[row], False, None, f"{plugin}: {', '.join(why)}"))
    wanted = {PICK_N: f" of {policy.number_of_nodes}", PICK_FIXED: f" of {len(policy.node_names)}"}.get(
        policy.placement_type, "")
    summary = f"{diagnosis.message(len(feasible))} {policy.placement_type}: {len(chosen)}{wanted} node(s) selected."
    return BatchDecision(policy, decisions + others + rejected, summary)
