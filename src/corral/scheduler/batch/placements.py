"""The scheduler's side of Placements: decide when a Placement or the nodes change, and write the
decision into the Placement's status, where the placement controller carries it out.

A decision is taken again when:

- a Placement is seen for the first time (a scheduler that starts decides each one once: nodes may
  have come or gone while none ran) or its spec changed (its generation is not the one its status
  observed);
- a node joined, left, or changed what the filters read (labels, taints, cordon, readiness,
  allocatable): PickAll may gain nodes, PickN may fill a gap, PickFixed may now fit a named node.

Nodes that hold a copy (selected in ``status.decisions``) are kept (IgnoredDuringExecution), except
when the policy itself changed — a change of ``numberOfNodes`` alone excepted, so scaling out only
adds and scaling in drops the lowest scored. Which policy the decisions were taken for is written
beside them (``status.policyHash``, a hash of the policy without its count), so a policy changed
while no scheduler ran is still decided afresh, and a restart alone never moves a copy.

Each decision has a state, as Kubernetes Fleet's bindings have: **Scheduled** (selected, no copy
bound there yet), **Bound** (a copy is bound to the node) or **Unscheduled** (the node was let go
and its copy still runs, until the rollout removes it). The scheduler follows the copies from the
pod events it sees anyway: a copy gone re-decides at the next flush; a copy bound only changes a
state, written from the last decision once due (a status of thousands of decisions is rewritten at
most once a second per thousand of them, see ``RESTATE_PER_DECISION``). A kept node whose copy was
evicted by a NoExecute taint (a lost node, after the node lifecycle's timeout) is kept no longer:
PickN places that copy elsewhere.

Each decision names the policy snapshot it was taken for (``status.policySnapshot``; an
Unscheduled one from an earlier policy names its own), the ControllerRevision the placement
controller keeps of each policy. Its score comes with the breakdown by plugin and preferred term
for up to ``BREAKDOWN_LIMIT`` decisions: a PickAll over thousands of nodes would otherwise pass
the object size limit (``corral explain placement`` gives every node's breakdown).

The status is written only when it differs from what was last written, with the Placement's
resourceVersion pinned: the ``Scheduled`` condition is the scheduler's, the other conditions the
placement controller's, and a write that raced with the controller's is refused (409) and taken
again at the next flush, on the newer object.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from corral.api.defaults import now_rfc3339
from corral.api.kinds.placement import policy_hash, snapshot_name
from corral.scheduler.batch.decide import BatchDecision, NodeDecision, decide

__all__ = ["PlacementDecisions", "SCHEDULED", "policy_hash", "copy_of", "BREAKDOWN_LIMIT",
           "BOUND", "UNSCHEDULED"]

log = logging.getLogger(__name__)
SCHEDULED = "Scheduled"
BOUND, UNSCHEDULED = "Bound", "Unscheduled"  # the other decision states; Scheduled is the first
KIND = "Placement"
BREAKDOWN_LIMIT = 1000  # decisions written with their score by plugin
LEAVING = "let go: its copy goes as the rollout allows"
# A status with thousands of decisions costs its size to write: when copies are only bound, it is
# rewritten at most once per RESTATE_PER_DECISION second per decision (a second per thousand), and
# at least every RESTATE_MAX seconds while binds go on.
RESTATE_PER_DECISION, RESTATE_MAX = 0.001, 5.0


def copy_of(pod: dict[str, Any]) -> tuple[str, str] | None:
    """(the Placement's namespace/name, the node) for a copy bound to a node and not finished."""
    meta = pod["metadata"]
    refs = meta.get("ownerReferences")
    if not refs:
        return None
    node = (pod.get("spec") or {}).get("nodeName")
    if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return None
    for ref in refs:
        if ref.get("controller") and ref.get("kind") == KIND and str(ref.get("apiVersion", "")).startswith(
                "placement.corral.dev/"):
            return f"{meta.get('namespace') or 'default'}/{ref.get('name', '')}", node
    return None


def _selected(obj: dict[str, Any]) -> list[str]:
    return [d["nodeName"] for d in ((obj.get("status") or {}).get("decisions") or ())
            if d.get("selected") and d.get("nodeName")]


class PlacementDecisions:
    def __init__(self, frameworks: dict[str, Any], cache: Any, *, clock: Callable[[], float] = time.monotonic,
                 urgent: Callable[[], None] = lambda: None) -> None:
        self.frameworks, self.cache, self.clock = frameworks, cache, clock
        self.urgent = urgent  # called when a decision should not wait for the next flush
        self.objects: dict[str, dict[str, Any]] = {}  # namespace/name → the Placement as last seen
        self.pending: set[str] = set()  # to decide at the next write
        self.restate: set[str] = set()  # a copy was bound: its state to write when due (RESTATE_PER_DECISION)
        self._last: dict[str, BatchDecision] = {}  # key → the decision last taken
        self._written_at: dict[str, float] = {}  # key → when its status was last written
        self._written: dict[str, dict[str, Any]] = {}  # key → the status fields last written
        self._copy_at: dict[str, tuple[str, str]] = {}  # pod key → (Placement key, node) of a bound copy
        self.bound: dict[str, dict[str, int]] = {}  # Placement key → node → bound copies there

    def placement_changed(self, key: str, obj: dict[str, Any] | None) -> None:
        if obj is None:
            for book in (self.objects, self._written, self._last, self._written_at):
                book.pop(key, None)
            self.pending.discard(key)
            self.restate.discard(key)
            return
        if obj["metadata"].get("deletionTimestamp"):
            self.objects.pop(key, None)
            self.pending.discard(key)
            self.restate.discard(key)
            return
        first = key not in self.objects
        self.objects[key] = obj
        status = obj.get("status") or {}
        if first or status.get("observedGeneration") != obj["metadata"].get("generation"):
            self.pending.add(key)
            self.urgent()

    def nodes_changed(self) -> None:
        self.pending.update(self.objects)

    def pod_changed(self, key: str, pod: dict[str, Any] | None) -> None:
        """A pod event: a copy bound, finished or gone changes its decision's state."""
        if not self._copy_at and (pod is None or not pod["metadata"].get("ownerReferences")):
            return  # the common case: no copy is followed and this is none
        now = copy_of(pod) if pod is not None else None
        before = self._copy_at.pop(key, None)
        if before == now:
            if now is not None:
                self._copy_at[key] = now
            return
        if before is not None:
            nodes = self.bound.get(before[0], {})
            nodes[before[1]] = nodes.get(before[1], 1) - 1
            if nodes[before[1]] <= 0:
                del nodes[before[1]]
            if not nodes:
                self.bound.pop(before[0], None)
            if before[0] in self.objects:
                self.pending.add(before[0])
        if now is not None:
            self._copy_at[key] = now
            nodes = self.bound.setdefault(now[0], {})
            nodes[now[1]] = nodes.get(now[1], 0) + 1
            if now[0] in self.objects:
                self.restate.add(now[0])  # a bind changes a state, not what to decide

    def decide(self, key: str) -> BatchDecision | None:
        """The decision for one Placement now (None: no such Placement, or no profile for it)."""
        obj = self.objects.get(key)
        if obj is None:
            return None
        template = (obj.get("spec") or {}).get("template") or {}
        fwk = self.frameworks.get(((template.get("spec") or {}).get("schedulerName")) or "default-scheduler")
        if fwk is None:
            return None
        decided_for = (obj.get("status") or {}).get("policyHash")
        fresh = decided_for is not None and decided_for != policy_hash(obj)
        return decide(fwk, self.cache, obj, keep=() if fresh else _selected(obj), held=self.bound.get(key, {}))

    async def write(self, writer: Any) -> None:
        """Decide every pending Placement and write the statuses that changed; a Placement whose
        copies were only bound gets its states written once due, from its last decision."""
        now = self.clock()
        pending, self.pending = self.pending, set()
        due = {key for key in self.restate if key in pending or key not in self._last or now - self._written_at.get(
            key, -1e18) >= min(RESTATE_MAX, len(self._last[key].decisions) * RESTATE_PER_DECISION)}
        self.restate -= due
        for key in sorted(pending | due):
            obj = self.objects.get(key)
            result = self.decide(key) if key in pending or key not in self._last else self._last[key]
            if obj is None or result is None:
                continue
            self._last[key] = result
            status = _status(obj, result, self.bound.get(key, {}))
            current = obj.get("status") or {}
            if self._written.get(key) == status or {k: current.get(k) for k in status} == status:
                continue  # written already, or the Placement says so already (a restart)
            meta = obj["metadata"]
            patch = {"metadata": {"resourceVersion": meta["resourceVersion"]},
                     "status": {**status, "conditions": _conditions(obj, status)}}
            try:
                await writer.patch_object_status(KIND, meta["namespace"], meta["name"], patch)
            except Exception as exc:  # raced with the controller, or gone: the next flush sees the newer object
                log.debug("status of Placement %s not written: %s", key, exc)
                if key in self.objects:
                    self.pending.add(key)
                continue
            self._written[key] = status
            self._written_at[key] = now


def _status(obj: dict[str, Any], result: BatchDecision, bound: dict[str, int]) -> dict[str, Any]:
    policy = result.policy
    selected = len(result.selected)
    desired = {"PickN": policy.number_of_nodes, "PickFixed": len(policy.node_names)}.get(policy.placement_type, selected)
    snapshot = snapshot_name(obj)
    before = {d.get("nodeName"): d for d in ((obj.get("status") or {}).get("decisions") or ()) if isinstance(d, dict)}
    earlier = (obj.get("status") or {}).get("policySnapshot")
    chosen = set(result.selected)
    leaving = [node for node in sorted(bound) if node not in chosen]  # let go, a copy still there
    listed = [d for d in result.decisions if d.selected or d.node not in bound]
    breakdown = len(listed) + len(leaving) <= BREAKDOWN_LIMIT
    by_node = {d.node: d for d in result.decisions}

    def entry(d: NodeDecision, state: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {"nodeName": d.node, "selected": d.selected, "reason": d.reason}
        if d.score is not None:
            out["score"] = round(d.score, 2)
            if breakdown:
                out["scores"] = {k: round(v, 2) for k, v in d.scores.items() if round(v, 2)}
        if state:
            out["state"] = state
        return out

    decisions = [entry(d, (BOUND if d.node in bound else SCHEDULED) if d.selected else None) for d in listed]
    for node in leaving:
        d = by_node.get(node) or NodeDecision(node, False, None, LEAVING)
        leaving_entry = entry(d, UNSCHEDULED)
        leaving_entry["reason"] = f"{LEAVING} ({d.reason})" if d.reason and d.reason != LEAVING else LEAVING
        came_from = (before.get(node) or {}).get("policySnapshot") or earlier
        if came_from and came_from != snapshot:
            leaving_entry["policySnapshot"] = came_from
        decisions.append(leaving_entry)
    return {
        "observedGeneration": obj["metadata"].get("generation"),
        "policyHash": policy_hash(obj),
        "policySnapshot": snapshot,
        "desired": desired,
        "scheduled": selected,
        "bound": sum(1 for node in result.selected if node in bound),
        "message": result.summary,
        "decisions": decisions,
    }


def _conditions(obj: dict[str, Any], status: dict[str, Any]) -> list[dict[str, Any]]:
    """The object's conditions with the scheduler's own (``Scheduled``) replaced."""
    done = status["scheduled"] >= status["desired"]
    mine = {"type": SCHEDULED, "status": "True" if done else "False",
            "reason": "Scheduled" if done else "NotEnoughNodes", "message": status["message"],
            "observedGeneration": status["observedGeneration"]}
    current = [c for c in ((obj.get("status") or {}).get("conditions") or ()) if isinstance(c, dict)]
    before = next((c for c in current if c.get("type") == SCHEDULED), None)
    same = before is not None and before.get("status") == mine["status"]
    mine["lastTransitionTime"] = before.get("lastTransitionTime") if same and before else now_rfc3339()
    return [c for c in current if c.get("type") != SCHEDULED] + [mine]
