"""Remembered decisions: a pod signature's feasible rows and scores, kept between cycles and brought
up to date row by row.

The pods of one workload ask the same of every node, and between two of them usually one node
changed: the one the last was assumed on. When every filter and scorer that runs for a pod is
row-local (see :mod:`corral.scheduler.framework.interface`), the framework keeps, per signature
(what those plugins read of the pod), which rows passed and their weighted totals, and for the next
pod of that signature evaluates again only the rows the node table logged as changed since. The
answer is the full evaluation's: the same feasible rows, the same totals bit for bit (the same
plugin calls on fewer rows, summed in the same order), the same tie-break draw; a property test
compares the two paths. One filter may instead be a domain filter (PodTopologySpread with one hard
constraint): a node's verdict follows its domain, so the domains' sums are kept from the changed
rows. Over a few domains (zones) the rows are also counted and ranked per domain, and a domain's
verdict that changes costs a pass over the domains; over many (hostnames) every row's feasibility is
worked out again when a domain's verdict changes. A pod with a plugin that is neither, sampling
(``percentageOfNodesToScore`` below 100) and a pod no node fits (its diagnosis names every node)
take the full evaluation. The signature itself is worked out once per template (spec, namespace)
and labels when every plugin declares that it reads no more (``TEMPLATE_SIGNATURE``).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.scheduler.framework.interface import CycleState, Plugin
from corral.scheduler.framework.podinfo import PodInfo, label_key
from corral.scheduler.framework.runtime import PRE_FILTERED, Scores

__all__ = ["Remembered", "MAX_SIGNATURES"]

MAX_SIGNATURES = 64  # remembered per profile; the oldest is dropped first
SCALAR_ROWS = 4  # up to this many changed rows are evaluated in plain Python (numpy's per-call cost is higher)
FULL_SHARE = 8  # more changed rows than that and size / FULL_SHARE: every row is evaluated afresh instead
SHARED_SIGNATURES = 64  # label sets per template whose signatures are kept (PodInfo.shared)
NARROW_DOMAINS = 32  # up to this many domain codes: the best row kept per domain (see DomainBests)
_NONE = np.zeros(0, dtype=np.int64)
_NO_ROWS = np.zeros(0, dtype=bool)


@dataclass(frozen=True, slots=True)
class _Bulk:
    """The changed rows of a decision whose domain verdict changed: their scores are brought up to
    date, then every row's masked total is worked out again."""

    rows: list[int] | np.ndarray

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(slots=True)
class Entry:
    epoch: int  # the node table's epoch and size it was computed for
    size: int
    memo: tuple  # the filters' memo_key() then
    tick: int  # the table's change log, read up to here
    local: np.ndarray  # bool per row: every row-local filter passes it
    feasible: np.ndarray  # bool per row: and the domain filter too (a copy of local without one)
    count: int = 0  # feasible rows
    rows: np.ndarray | None = None  # the feasible rows, ascending (None: to be found)
    scorers: tuple[str, ...] | None = None  # what the totals are summed from (None: not yet scored)
    score: np.ndarray | None = None  # weighted total per row (current where local)
    total: np.ndarray | None = None  # the same, -inf where infeasible
    by_plugin: dict[str, np.ndarray] | None = None  # each scorer's weighted part per row
    best: list[int] | None = None  # the rows whose total is the highest, ascending (None: to be found)
    best_total: float = -np.inf
    domains: "Domains | None" = None
    bests: "DomainBests | None" = None  # with few domains: the best rows per domain, instead of total/best


@dataclass(slots=True)
class Domains:
    """A domain filter's reductions (PodTopologySpread's one hard constraint): per row its domain
    code, whether it counts (eligible) and the matching pods it holds; per code their sums, and the
    codes whose nodes pass. Rows' parts change row by row; the verdict per code is worked out from
    the sums again at every decision."""

    code: np.ndarray  # int64 per row
    eligible: np.ndarray  # bool per row
    pods: np.ndarray  # int64 per row, 0 where not eligible
    totals: np.ndarray  # int64 per code
    present: np.ndarray  # int64 per code: eligible rows
    allowed: np.ndarray  # bool per code

    def update(self, rows: np.ndarray, code: np.ndarray, eligible: np.ndarray, pods: np.ndarray) -> None:
        pods = np.where(eligible, pods, 0)
        np.subtract.at(self.totals, self.code[rows], self.pods[rows])
        np.subtract.at(self.present, self.code[rows], self.eligible[rows].astype(np.int64))
        width = int(code.max(initial=0)) + 1
        if width > len(self.totals):
            self.totals = np.concatenate([self.totals, np.zeros(width - len(self.totals), dtype=np.int64)])
            self.present = np.concatenate([self.present, np.zeros(width - len(self.present), dtype=np.int64)])
        self.code[rows], self.eligible[rows], self.pods[rows] = code, eligible, pods
        np.add.at(self.totals, code, pods)
        np.add.at(self.present, code, eligible.astype(np.int64))

    def update_one(self, row: int, code: int, eligible: bool, pods: int) -> bool:
        """:meth:`update` for one row, in plain Python; False when its part did not change."""
        pods = pods if eligible else 0
        was = int(self.code[row])
        if code == was and eligible == bool(self.eligible[row]) and pods == int(self.pods[row]):
            return False
        self.totals[was] -= self.pods[row]
        self.present[was] -= self.eligible[row]
        if code >= len(self.totals):
            extra = np.zeros(code + 1 - len(self.totals), dtype=np.int64)
            self.totals, self.present = np.concatenate([self.totals, extra]), np.concatenate([self.present, extra])
        self.code[row], self.eligible[row], self.pods[row] = code, eligible, pods
        self.totals[code] += pods
        self.present[code] += eligible
        return True


@dataclass(slots=True)
class DomainBests:
    """With a domain filter over few domains (zones, not hostnames): the rows every row-local filter
    passes, counted and ranked per domain, so that a change in the domains' verdict (a zone reaching
    its skew) costs a pass over the domains, not over every row. A row is feasible when it passes
    (``code`` is its domain then, else -1) and its domain is allowed; the best feasible rows are the
    best of the allowed domains' bests, merged in ascending order, as the full evaluation lists them."""

    code: np.ndarray  # int64 per row: its domain code where the row-local filters pass it, else -1
    passing: np.ndarray  # int64 per domain code: rows passing there
    top: list[float]  # per domain code: the highest total there (when ``best`` is known)
    best: list[list[int] | None]  # per domain code: the rows at ``top``, ascending; None or []: to be found
    members: list[np.ndarray | None]  # per domain code: its passing rows (None: to be found)

    @classmethod
    def build(cls, local: np.ndarray, code: np.ndarray, width: int) -> "DomainBests":
        counted = np.where(local, code, -1)
        passing = np.bincount(counted[counted >= 0], minlength=width).astype(np.int64)
        return cls(counted, passing, [-np.inf] * width, [None] * width, [None] * width)

    def widen(self, width: int) -> None:
        extra = width - len(self.passing)
        if extra > 0:
            self.passing = np.concatenate([self.passing, np.zeros(extra, dtype=np.int64)])
            self.top += [-np.inf] * extra
            self.best += [None] * extra
            self.members += [None] * extra

    def recount(self, row: int, code: int) -> None:
        """Row ``row`` now counts under ``code`` (-1: nowhere)."""
        old = int(self.code[row])
        if old != code:
            self.code[row] = code
            for c in (old, code):
                if c >= 0:
                    self.members[c] = None
            if old >= 0:
                self.passing[old] -= 1
                best = self.best[old]
                if best:
                    i = bisect.bisect_left(best, row)
                    if i < len(best) and best[i] == row:
                        del best[i]  # emptied: found again when its domain is next selected
            if code >= 0:
                self.passing[code] += 1

    def rank(self, code: int, row: int, total: float) -> None:
        """Keep ``code``'s best rows (when known) current after ``row``'s total became ``total``."""
        best = self.best[code]
        if not best:
            return
        top = self.top[code]
        if total > top:
            self.best[code], self.top[code] = [row], total
            return
        i = bisect.bisect_left(best, row)
        present = i < len(best) and best[i] == row
        if total == top:
            if not present:
                best.insert(i, row)
        elif present:
            del best[i]

    def count(self, allowed: np.ndarray) -> int:
        return int(self.passing[allowed].sum())

    def feasible(self, allowed: np.ndarray) -> np.ndarray:
        return (self.code >= 0) & np.append(allowed, False)[self.code]  # code -1: the False appended

    def select(self, allowed: np.ndarray, score: np.ndarray) -> list[list[int]]:
        """The feasible rows with the highest total: the best rows of each allowed domain at that
        total (each list ascending; together, in ascending order, what the full evaluation lists)."""
        tops: list[tuple[float, int]] = []
        for c in np.flatnonzero(allowed & (self.passing > 0)).tolist():
            if not self.best[c]:
                rows = self.members[c]
                if rows is None:
                    rows = self.members[c] = np.flatnonzero(self.code == c)
                totals = score[rows]
                self.top[c] = top = float(totals.max())
                self.best[c] = rows[totals == top].tolist()
            tops.append((self.top[c], c))
        top = max(tops)[0]
        return [self.best[c] for t, c in tops if t == top]  # type: ignore[misc]


def _rank(entry: Entry, row: int, total: float) -> None:
    """Keep ``entry.best`` (when known) current after ``row``'s total became ``total``."""
    best = entry.best
    if best is None:
        return
    if total > entry.best_total:  # above every other row: the only best
        entry.best, entry.best_total = [row], total
        return
    i = bisect.bisect_left(best, row)
    present = i < len(best) and best[i] == row
    if total == entry.best_total:
        if not present:
            best.insert(i, row)
    elif present:
        del best[i]  # an empty list: found again at the next selection


class Remembered:
    """One profile's remembered signatures (see the module's docstring)."""

    def __init__(self, fwk: Any) -> None:
        self.fwk = fwk
        self.entries: dict[tuple, Entry] = {}
        plugins = {id(p): p for p in (*fwk.filters, *fwk.scorers)
                   if p.ROW_LOCAL_FILTER or p.ROW_LOCAL_SCORE or hasattr(p, "domain_constraint")}
        self._signers: list[Plugin] = list(plugins.values())
        self._memo_key = ("signature", tuple(p.NAME for p in self._signers))
        self._of_template = all(p.TEMPLATE_SIGNATURE for p in self._signers)
        self.enabled = True
        self._plans: dict[tuple[str, ...], tuple] = {}  # by the filters PreFilter skipped (in profile order)
        # By the active scorers (the Framework's tuples): what :meth:`_scoring` says of them.
        self._scorings: dict[tuple, tuple[tuple[str, ...] | None, list | None]] = {}
        self.hits = 0  # decisions answered here (for tests and benchmarks)

    def _signature(self, pod: PodInfo) -> tuple:
        """The signers' signatures of ``pod``: shared by the pods of its template and labels when every
        signer reads no more (kept in PodInfo.shared, a few label sets per template), else its own."""
        if not self._of_template:
            sig = pod.memo.get(self._memo_key)
            if sig is None:
                sig = pod.memo[self._memo_key] = tuple(p.signature(pod) for p in self._signers)
            return sig
        shared = pod.shared
        key = (self._memo_key, label_key(pod))
        sig = shared.get(key)
        if sig is None:
            if len(shared) >= SHARED_SIGNATURES:  # pods of one template with labels of their own
                shared.clear()
            sig = shared[key] = tuple(p.signature(pod) for p in self._signers)
        return sig

    def decide(self, state: CycleState, pod: PodInfo, table: Any, *, scores: bool = False) -> tuple[int, int, Any] | None:
        """(row, feasible rows, Scores if ``scores`` else None) for ``pod``, or None: take the full
        evaluation.

        Leaves ``state`` as the full evaluation would after its PreFilter step when it returns None
        (the caller continues from there: PRE_FILTERED holds that step's Status; the caller removes
        it after a decision)."""
        fwk = self.fwk
        if not self.enabled or fwk.percentage < 100:
            return None
        status = state[PRE_FILTERED] = fwk.pre_filter(state, pod)
        if not status.ok:
            return None
        skipped = state["__skip_filter"]
        plan = self._plans.get(skipped)
        if plan is None:
            plan = self._plan(skipped)
        filters, names, local, one_by_one, depends, domain, keyed = plan
        if not local:
            return None
        for p in depends:
            if not p.row_local(pod):
                return None
        constraint = None
        if domain is not None:
            constraint = domain.domain_constraint(pod)
            if constraint is None:
                return None
        key = (names, self._signature(pod))
        memo = tuple([p.memo_key() for p in keyed]) if keyed else ()
        size = table.size
        entry = self.entries.get(key)
        dirty: list[int] | np.ndarray | None = None  # None: every row evaluated afresh
        if entry is None or entry.epoch != table.epoch or entry.size != size or entry.memo != memo:
            entry = self._remember(key, Entry(table.epoch, size, memo, table.tick, _NO_ROWS, _NO_ROWS))
        else:
            changed = table.changed_since(entry.tick)
            entry.tick = table.tick
            if len(changed) <= SCALAR_ROWS + size // FULL_SHARE:
                dirty = self._refilter(entry, state, pod, table, filters, changed, one_by_one) if changed else _NONE
        if dirty is None:
            self._refilter_all(entry, state, pod, table, filters)
        if domain is not None:
            same = self._redomain(entry, pod, domain, constraint, table, dirty)
            narrow = len(entry.domains.totals) <= NARROW_DOMAINS  # type: ignore[union-attr]
            if narrow != (entry.bests is not None):  # the other way's state was kept: build this one's
                dirty, entry.bests = None, None
            if narrow:
                return self._decide_by_domain(entry, state, pod, table, dirty, scores)
            if not same or dirty is None:
                dirty = self._reconcile_all(entry, dirty)
            elif len(dirty):
                self._reconcile(entry, dirty)
        elif dirty is not None and len(dirty):
            self._reconcile(entry, dirty)
        count = entry.count
        if count == 0:
            entry.scorers = None  # the totals missed the changed rows: summed afresh next time
            return None  # the full evaluation says why, node by node
        rows = None
        if count < size:
            rows = entry.rows
            if rows is None:
                rows = entry.rows = np.flatnonzero(entry.feasible)
        if count == 1:
            entry.scorers = None
            self.hits += 1
            return (0 if rows is None else int(rows[0])), 1, None  # rows is None: the one row there is
        found = self._scorers(entry, state, pod, slice(0, size) if rows is None else rows)
        if found is None:
            return None
        scorers, scorer_names = found
        if dirty is None or entry.scorers != scorer_names:
            self._score_all(entry, state, pod, scorers, scorer_names, size)
            entry.total = np.where(entry.feasible, entry.score, -np.inf)
            entry.best = None
        elif isinstance(dirty, _Bulk):
            self._rescore(entry, state, pod, scorers, dirty.rows)
            entry.total = np.where(entry.feasible, entry.score, -np.inf)
            entry.best = None
        elif len(dirty):
            self._rescore(entry, state, pod, scorers, dirty)
        self.hits += 1
        return self._select(entry, table), count, self._scores(entry, rows, size) if scores else None

    def _decide_by_domain(self, entry: Entry, state: CycleState, pod: PodInfo, table: Any,
                          dirty: list[int] | np.ndarray | None, scores: bool) -> tuple[int, int, Any] | None:
        """:meth:`decide` from the domains' reductions being current: with few domains, the rows are
        counted and ranked per domain (:class:`DomainBests`)."""
        fwk, size, d = self.fwk, table.size, entry.domains
        assert d is not None
        bests = entry.bests
        if dirty is None or bests is None:
            bests = entry.bests = DomainBests.build(entry.local, d.code, len(d.totals))
            dirty = None
        else:
            bests.widen(len(d.totals))
            local, code = entry.local, d.code
            if isinstance(dirty, list):
                for row in dirty:
                    bests.recount(row, int(code[row]) if local[row] else -1)
            else:
                now = np.where(local[dirty], code[dirty], -1)
                moved = now != bests.code[dirty]
                for row, c in zip(dirty[moved].tolist(), now[moved].tolist()):
                    bests.recount(row, c)
        allowed = d.allowed
        count = entry.count = bests.count(allowed)
        if count == 0 or count == 1:
            entry.scorers = None  # the totals missed the changed rows: summed afresh next time
            if count == 0:
                return None  # the full evaluation says why, node by node
            self.hits += 1
            return int(np.flatnonzero(bests.feasible(allowed))[0]), 1, None
        sel: slice | np.ndarray = slice(0, size)
        if count < size and fwk.pre_scores_read_rows(pod):
            sel = np.flatnonzero(bests.feasible(allowed))
        found = self._scorers(entry, state, pod, sel)
        if found is None:
            return None
        scorers, scorer_names = found
        if dirty is None or entry.scorers != scorer_names:
            self._score_all(entry, state, pod, scorers, scorer_names, size)
            bests.best = [None] * len(bests.best)
        elif len(dirty):
            self._rescore(entry, state, pod, scorers, dirty, bests)
        self.hits += 1
        assert entry.score is not None
        row = self._pick_among(bests.select(allowed, entry.score), table)
        if not scores:
            return row, count, None
        rows = np.flatnonzero(bests.feasible(allowed))
        return row, count, Scores(rows, entry.score[rows], {name: v[rows] for name, v in (entry.by_plugin or {}).items()})

    def _scorers(self, entry: Entry, state: CycleState, pod: PodInfo,
                 sel: slice | np.ndarray) -> tuple[tuple[Plugin, ...], tuple[str, ...]] | None:
        """The PreScore step over ``sel`` (the feasible rows): the scorers and their names, or None when
        one of them is not row-local (the full evaluation decides; the totals are summed afresh next
        time)."""
        scorers = self.fwk.active_scorers(state, pod, sel)
        names = self._scoring(scorers)[0]
        if names is None:
            entry.scorers = None
            return None
        return scorers, names

    def _scoring(self, scorers: tuple[Plugin, ...]) -> tuple[tuple[str, ...] | None, list | None]:
        """For a set of active scorers (worked out once per set): their names, None if one is not
        row-local; their (score_one, weight) pairs, None if one scores only in columns."""
        known = self._scorings.get(scorers)
        if known is None:
            weights = self.fwk.weights
            known = self._scorings[scorers] = (
                tuple(p.NAME for p in scorers) if all(p.ROW_LOCAL_SCORE for p in scorers) else None,
                [(p.score_one, weights.get(p.NAME, 1)) for p in scorers]
                if all(hasattr(p, "score_one") for p in scorers) else None)
        return known

    def _score_all(self, entry: Entry, state: CycleState, pod: PodInfo, scorers: tuple[Plugin, ...],
                   names: tuple[str, ...], size: int) -> None:
        total, by_plugin = self.fwk.sum_scores(state, pod, scorers, slice(0, size), size)
        entry.score = np.array(total, dtype=np.float64)
        entry.by_plugin = {name: np.array(v, dtype=np.float64) for name, v in by_plugin.items()}
        entry.scorers = names

    def _plan(self, skipped: tuple[str, ...]) -> tuple:
        """For the filters PreFilter left on: (the row-local ones, every one's name, whether the others
        are at most one domain filter, whether the row-local ones all answer one row, those row-local
        only for some pods (their row_local(pod) says), the domain filter or None, the row-local ones
        with a memo_key of their own)."""
        active = [p for p in self.fwk.filters if p.NAME not in skipped]
        domains = [p for p in active if hasattr(p, "domain_constraint")]
        filters = [p for p in active if p not in domains]
        plan = (filters, tuple(p.NAME for p in active), len(domains) <= 1 and all(p.ROW_LOCAL_FILTER for p in filters),
                all(hasattr(p, "filter_one") for p in filters), [p for p in filters if hasattr(p, "row_local")],
                domains[0] if domains else None, [p for p in filters if type(p).memo_key is not Plugin.memo_key])
        self._plans[skipped] = plan
        return plan

    def _refilter_all(self, entry: Entry, state: CycleState, pod: PodInfo, table: Any, filters: list[Plugin]) -> None:
        size = table.size
        every = np.arange(size)
        passed = table.valid[:size].copy()
        for p in filters:
            passed &= p.filter_rows(state, pod, every)
        entry.local, entry.feasible, entry.count, entry.rows = passed, passed.copy(), int(np.count_nonzero(passed)), None
        entry.scorers = None

    def _refilter(self, entry: Entry, state: CycleState, pod: PodInfo, table: Any, filters: list[Plugin],
                  changed: list[int], one_by_one: bool) -> list[int] | np.ndarray:
        """Filter the changed rows again (``entry.local``); returns them (unique, ascending: a list
        when they were few)."""
        local = entry.local
        if len(changed) <= SCALAR_ROWS and one_by_one:
            rows = sorted(set(changed))
            valid = table.valid
            for row in rows:
                passed = bool(valid[row])
                if passed:
                    for p in filters:
                        if not p.filter_one(state, pod, row):
                            passed = False
                            break
                local[row] = passed
            return rows
        dirty = np.unique(np.array(changed, dtype=np.int64))
        passed = table.valid[dirty]
        for p in filters:
            passed &= p.filter_rows(state, pod, dirty)
        local[dirty] = passed
        return dirty

    def _reconcile(self, entry: Entry, dirty: list[int] | np.ndarray) -> None:
        """``feasible`` of the changed rows from ``local`` and the domains' verdict, counted."""
        feasible, local, d = entry.feasible, entry.local, entry.domains
        if isinstance(dirty, list):
            for row in dirty:
                passed = local.item(row) and (d is None or bool(d.allowed[d.code[row]]))
                if passed is not feasible.item(row):
                    feasible[row] = passed
                    entry.count += 1 if passed else -1
                    entry.rows = None
            return
        passed = local[dirty] if d is None else local[dirty] & d.allowed[d.code[dirty]]
        before = feasible[dirty]
        if not np.array_equal(before, passed):
            entry.count += int(np.count_nonzero(passed)) - int(np.count_nonzero(before))
            entry.rows = None
            feasible[dirty] = passed

    def _reconcile_all(self, entry: Entry, dirty: list[int] | np.ndarray | None) -> "_Bulk | None":
        """The domains' verdict changed: ``feasible`` of every row again. Returns what the scores
        must do: None (sum every row afresh) or a _Bulk of the changed rows."""
        d = entry.domains
        assert d is not None
        entry.feasible = entry.local & d.allowed[d.code]
        entry.count, entry.rows = int(np.count_nonzero(entry.feasible)), None
        return None if dirty is None else _Bulk(dirty)

    def _redomain(self, entry: Entry, pod: PodInfo, domain: Plugin, constraint: Any, table: Any,
                  dirty: list[int] | np.ndarray | None) -> bool:
        """The domain filter's sums brought up to date; False when its verdict changed (or is new)."""
        d = entry.domains
        if dirty is None or d is None:
            rows = np.arange(table.size)
            code, eligible, pods = domain.domain_rows(pod, constraint, rows)
            pods = np.where(eligible, pods, 0)
            width = max(int(code.max(initial=0)) + 1, 1)
            totals = np.bincount(code, weights=pods, minlength=width).astype(np.int64)
            present = np.bincount(code[eligible], minlength=width).astype(np.int64)
            d = entry.domains = Domains(code.astype(np.int64), eligible, pods.astype(np.int64), totals, present,
                                        np.zeros(0, dtype=bool))
        elif isinstance(dirty, list) and hasattr(domain, "domain_one"):
            changed = False
            for row in dirty:
                changed |= d.update_one(row, *domain.domain_one(pod, constraint, row))
            if not changed and len(d.allowed) == len(d.totals):
                return True  # the sums are as they were: so is the verdict
        elif len(dirty):
            rows = np.asarray(dirty, dtype=np.int64)
            code, eligible, pods = domain.domain_rows(pod, constraint, rows)
            d.update(rows, code.astype(np.int64), eligible, pods.astype(np.int64))
        elif len(d.allowed) == len(d.totals):
            return True  # no row changed
        allowed = domain.domain_allowed(pod, constraint, d.totals, d.present > 0)
        same = np.array_equal(allowed, d.allowed)
        d.allowed = allowed
        return same

    def _rescore(self, entry: Entry, state: CycleState, pod: PodInfo, scorers: tuple[Plugin, ...],
                 dirty: list[int] | np.ndarray, bests: DomainBests | None = None) -> None:
        """Score the changed rows again, summed as Framework.sum_scores sums them, and rank them: among
        every row, or with ``bests`` within their domains."""
        assert entry.score is not None and entry.by_plugin is not None
        assert bests is not None or entry.total is not None
        one_by_one = self._scoring(scorers)[1]
        if len(dirty) <= SCALAR_ROWS and one_by_one is not None:
            for row in (dirty if isinstance(dirty, list) else dirty.tolist()):
                parts = []
                for score_one, weight in one_by_one:
                    raw = score_one(state, pod, row)
                    if raw is None:
                        break
                    parts.append(raw if weight == 1 else raw * weight)
                else:
                    total = parts[0] if parts else 0.0
                    for part in parts[1:]:
                        total += part
                    entry.score[row] = total
                    if bests is not None:
                        if bests.code[row] >= 0:
                            bests.rank(int(bests.code[row]), row, total)
                    else:
                        total = total if entry.feasible[row] else -np.inf
                        entry.total[row] = total  # type: ignore[index]
                        _rank(entry, row, total)
                    for p, part in zip(scorers, parts):
                        entry.by_plugin[p.NAME][row] = part
                    continue
                break  # a plugin answers only in columns: score every changed row that way
            else:
                return
        dirty = np.asarray(dirty, dtype=np.int64)
        total, by_plugin = self.fwk.sum_scores(state, pod, scorers, dirty, len(dirty))
        entry.score[dirty] = total
        for name, v in by_plugin.items():
            entry.by_plugin[name][dirty] = v
        if bests is None:
            entry.total[dirty] = np.where(entry.feasible[dirty], total, -np.inf)  # type: ignore[index]
            entry.best = None
            return
        for c in np.unique(bests.code[dirty]).tolist():  # their domains' best rows found again
            if c >= 0:
                bests.best[c] = None

    def _remember(self, key: tuple, entry: Entry) -> Entry:
        if key not in self.entries and len(self.entries) >= MAX_SIGNATURES:
            del self.entries[next(iter(self.entries))]
        self.entries[key] = entry
        return entry

    def _select(self, entry: Entry, table: Any) -> int:
        """As Framework.select_host over the feasible rows (ascending, so a tie's draw picks the same row)."""
        best = entry.best
        if not best:  # unknown, or its last row scored lower: find it among all rows
            total = entry.total
            entry.best_total = float(total.max())
            best = entry.best = np.flatnonzero(total == entry.best_total).tolist()
        return self._pick(best, table)

    def _pick_among(self, bests: list[list[int]], table: Any) -> int:
        """As :meth:`_pick` over the rows of ``bests`` (ascending lists of disjoint rows) in ascending
        order, without merging them (thousands of tied rows, at every decision): the draw's index is
        found by bisecting on the row."""
        if len(bests) == 1:
            return self._pick(bests[0], table)
        tied = sum(len(best) for best in bests)
        if tied == 1 or self.fwk.tie_break == "name":
            return self._pick(sorted(row for best in bests for row in best), table)
        i = self.fwk.rng.randrange(tied)
        low, high = min(best[0] for best in bests), max(best[-1] for best in bests)
        right = bisect.bisect_right
        while low < high:  # the lowest row with more than i tied rows at or below it
            mid = (low + high) >> 1
            at_or_below = 0
            for best in bests:
                at_or_below += right(best, mid)
            if at_or_below > i:
                high = mid
            else:
                low = mid + 1
        return low

    def _pick(self, best: list[int], table: Any) -> int:
        """One of the rows tied at the best total (ascending), as Framework.select_host draws it."""
        if len(best) == 1:
            return best[0]
        fwk = self.fwk
        if fwk.tie_break == "name":
            return int(min((table.names[r], r) for r in best)[1])
        return best[fwk.rng.randrange(len(best))]

    @staticmethod
    def _scores(entry: Entry, rows: np.ndarray | None, size: int) -> Any:
        rows = np.arange(size) if rows is None else rows
        return Scores(rows, entry.total[rows], {name: v[rows] for name, v in (entry.by_plugin or {}).items()})
