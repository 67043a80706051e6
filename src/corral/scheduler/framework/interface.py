"""The plugin API: extension points as optional methods, answered over node columns.

A plugin is a class with a ``NAME`` and any of these methods; the framework calls only the ones a
plugin defines, in the order the profile lists the plugins.

- ``pre_enqueue(pod) -> Status``: may keep a pod out of the active queue (``PENDING``).
- ``less(a, b) -> bool``: QueueSort; exactly one per profile.
- ``pre_filter(state, pod) -> Status``: per-pod preparation, kept in ``state``; ``SKIP`` means
  this plugin's ``filter`` has nothing to check for this pod; a rejecting status fails every node.
- ``filter(state, pod, candidates) -> FilterResult``: for *all* rows at once, which pass
  (``passed=None``: all of them); each rejected row carries reasons. Pure: no I/O, no change to
  the cache.
- ``post_filter(state, pod, diagnosis) -> PostFilterResult``: when no node fits; may nominate a
  node and name the pods to remove there (preemption). Pure, like Filter: the scheduler carries the
  result out.
- ``pre_score(state, pod, rows) -> Status``: ``SKIP`` means ``score`` has nothing to add.
- ``score(state, pod, rows) -> ndarray``: one number per feasible row. ``rows`` indexes the
  columns: an array of row numbers, or a slice when every row is feasible (cheaper to take), so
  write ``column[rows]`` and never ``len(rows)``.
- ``normalize(state, pod, scores) -> ndarray``: scale this plugin's scores to 0–100.
- ``reserve(state, pod, node) -> Status`` / ``unreserve(state, pod, node)``: right after the pod is
  assumed on its node; a failing Reserve (or a failed binding) calls Unreserve in reverse order.
- ``async permit(state, pod, node) -> Status``: before binding; may wait, or refuse (the pod is
  un-assumed and retried after backoff).
- ``async bind(state, pod, node) -> Status``: write the binding (I/O allowed here only).

Row-local plugins (``ROW_LOCAL_FILTER`` / ``ROW_LOCAL_SCORE``) let the framework remember a pod
signature's feasible rows and scores and re-evaluate only the rows that changed since (see
:mod:`corral.scheduler.framework.remembered`). Such a plugin promises that its answer for a row
depends only on that row's columns, on the pod through ``signature(pod)`` (hashable: two pods of one
signature get the same answers), on what a filter's ``memo_key()`` returns (NodeReady's: how often
ageing heartbeats changed its answer) and on table-wide facts that change only with
``NodeTable.epoch``; its ``pre_score`` must not depend on the rows, and a row-local scorer has no
``normalize``. A plugin whose ``pre_score`` reads its rows (the feasible ones) says when it does in
``pre_score_reads_rows(pod)``: remembered decisions then list them, which they otherwise skip. A
row-local filter also answers ``filter_rows(state, pod, rows) -> ndarray`` (bool per given row);
``filter_one(state, pod, row) -> bool`` and ``score_one(state, pod, row) -> float``
(None: only the columns answer) are optional, in plain Python with the same float operations, for
the one or few rows that changed. A filter row-local for some pods only also answers
``row_local(pod) -> bool`` (InterPodAffinity: anti-affinity over hostnames). A domain filter
(PodTopologySpread) answers ``domain_constraint(pod)`` (the one constraint it judges, or None),
``domain_rows(pod, c, rows)`` (each row's domain code, eligibility and counted pods; optionally
``domain_one(pod, c, row)``, the same for one row in plain Python) and
``domain_allowed(pod, c, totals, present)`` (the verdict per domain from their sums).

Plugins get what they may read through :class:`Handle` (the cache, the clock, the profile's
arguments) when they are built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar

import numpy as np

if TYPE_CHECKING:
    from corral.scheduler.cache.cache import Cache

__all__ = ["Plugin", "Handle", "CycleState", "FilterResult", "PostFilterResult", "ALL_PASS", "count_rows", "Reason", "NodeView", "NodeFilterAdapter",
           "WANT_CANDIDATES"]


@dataclass(slots=True)
class Handle:
    """What a plugin may use: the cache (read-only in plugins), a clock, its own arguments."""

    cache: "Cache"
    clock: Callable[[], float]
    args: dict[str, Any] = field(default_factory=dict)
    binder: Any = None  # used by Bind plugins only
    framework: Any = None  # the profile's Framework, set once it is built (PostFilter runs its filters)


class CycleState(dict):
    """Per-attempt scratch space; each plugin keeps its data under its own ``NAME``."""


# Set in the CycleState by the scheduler when extenders will judge preemption's candidates: a
# PostFilter then lists every candidate node it finds (up to its limit) in PostFilterResult.candidates.
WANT_CANDIDATES = "PostFilter/candidates"


@dataclass(frozen=True, slots=True)
class Reason:
    """Why some rows were rejected: the message, the rows it applies to, and whether removing pods
    (preemption) could help."""

    message: str
    rows: np.ndarray  # bool, one per row
    unresolvable: bool = False


@dataclass(slots=True)
class FilterResult:
    passed: np.ndarray | None  # bool, one per row; None: every row passes
    reasons: list[Reason] = field(default_factory=list)

    @classmethod
    def reject_where(cls, bad: np.ndarray, message: str, *, unresolvable: bool = False) -> "FilterResult":
        return cls(~bad, [Reason(message, bad, unresolvable)])


ALL_PASS = FilterResult(None)


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """What a PostFilter plugin found: ``status`` success with a ``nominated_node`` and the
    ``victims`` to remove there, or a failure. ``message`` joins the FailedScheduling summary
    either way; ``clear_nomination`` drops a nomination the pod had (its search found nothing).
    ``candidates``, when the state asked for them (:data:`WANT_CANDIDATES`): every candidate node,
    best first, as (node, victims, PodDisruptionBudget violations)."""

    status: Any  # a Status
    nominated_node: str = ""
    victims: tuple[Any, ...] = ()  # PodInfo of each pod to remove, most important first
    message: str = ""
    clear_nomination: bool = False
    candidates: tuple[tuple[str, tuple[Any, ...], int], ...] = ()


def count_rows(rows: "np.ndarray | slice") -> int:
    """How many rows a score call covers (``rows`` is an index array or a slice)."""
    return rows.stop - rows.start if isinstance(rows, slice) else len(rows)


class Plugin:
    """Base class: holds the handle. Subclasses set ``NAME`` and define extension-point methods."""

    NAME: ClassVar[str] = ""
    ROW_LOCAL_FILTER: ClassVar[bool] = False
    ROW_LOCAL_SCORE: ClassVar[bool] = False
    # signature(pod) reads only what the pods of one template share (their spec, namespace and
    # labels): such pods then share the signature, worked out once (PodInfo.shared).
    TEMPLATE_SIGNATURE: ClassVar[bool] = False

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self.cache: "Cache" = handle.cache  # read on every cycle: an attribute, not a property

    def pre_score_reads_rows(self, pod: Any) -> bool:
        """Whether ``pre_score`` for ``pod`` reads which rows it is given (see the module's docstring)."""
        return False

    def signature(self, pod: Any) -> Any:
        """What of ``pod`` a row-local plugin's answers depend on (hashable)."""
        return None

    def memo_key(self) -> Any:
        """What besides the rows and the pod a row-local plugin's answers depend on right now."""
        return None


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node, for plugins written node by node (see :class:`NodeFilterAdapter`)."""

    name: str
    labels: dict[str, str]
    obj: dict[str, Any]
    allocatable: dict[str, int]
    requested: dict[str, int]


class NodeFilterAdapter(Plugin):
    """Turns a per-node function into a column Filter, for simple custom plugins.

    ``check(pod, node) -> str | None`` returns a rejection reason or None. It runs once per
    candidate node in Python, so it costs what the column plugins avoid; use it for rules that are
    rare or cheap, and write a column plugin when it matters.
    """

    check: Callable[[Any, NodeView], str | None]

    def filter(self, state: CycleState, pod: Any, candidates: np.ndarray) -> FilterResult:
        table = self.cache.table
        passed = candidates.copy()
        reasons: dict[str, np.ndarray] = {}
        for row in np.flatnonzero(candidates):
            view = NodeView(
                name=table.names[row] or "",
                labels=table.node_labels(row),
                obj=table.objects[row] or {},
                allocatable={k: int(v[row]) for k, v in table.allocatable.items()},
                requested={k: int(v[row]) for k, v in table.requested.items()},
            )
            why = type(self).check(pod, view)
            if why is not None:
                passed[row] = False
                reasons.setdefault(why, np.zeros_like(candidates))[row] = True
        return FilterResult(passed, [Reason(m, rows) for m, rows in reasons.items()])
