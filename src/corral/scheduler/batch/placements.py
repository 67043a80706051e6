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

The status is written only when it differs from what was last written, with the Placement's
resourceVersion pinned: the ``Scheduled`` condition is the scheduler's, the other conditions the
placement controller's, and a write that raced with the controller's is refused (409) and taken
again at the next flush, on the newer object.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from corral.api.defaults import now_rfc3339
from corral.scheduler.batch.decide import BatchDecision, decide

__all__ = ["PlacementDecisions", "SCHEDULED", "policy_hash"]

log = logging.getLogger(__name__)
SCHEDULED = "Scheduled"
KIND = "Placement"


def policy_hash(obj: dict[str, Any]) -> str:
    """The policy without its count, hashed: what, changed, means deciding afresh."""
    policy = dict(((obj.get("spec") or {}).get("policy")) or {})
    policy.pop("numberOfNodes", None)
    return hashlib.sha256(json.dumps(policy, sort_keys=True).encode()).hexdigest()[:16]


def _selected(obj: dict[str, Any]) -> list[str]:
    return [d["nodeName"] for d in ((obj.get("status") or {}).get("decisions") or ())
            if d.get("selected") and d.get("nodeName")]


class PlacementDecisions:
    def __init__(self, frameworks: dict[str, Any], cache: Any) -> None:
        self.frameworks, self.cache = frameworks, cache
        self.objects: dict[str, dict[str, Any]] = {}  # namespace/name → the Placement as last seen
        self.pending: set[str] = set()  # to decide at the next write
        self._written: dict[str, dict[str, Any]] = {}  # key → the status fields last written

    def placement_changed(self, key: str, obj: dict[str, Any] | None) -> None:
        if obj is None:
            for book in (self.objects, self._written):
                book.pop(key, None)
            self.pending.discard(key)
            return
        if obj["metadata"].get("deletionTimestamp"):
            self.objects.pop(key, None)
            self.pending.discard(key)
            return
        first = key not in self.objects
        self.objects[key] = obj
        status = obj.get("status") or {}
        if first or status.get("observedGeneration") != obj["metadata"].get("generation"):
            self.pending.add(key)

    def nodes_changed(self) -> None:
        self.pending.update(self.objects)

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
        return decide(fwk, self.cache, obj, keep=() if fresh else _selected(obj))

    async def write(self, writer: Any) -> None:
        """Decide every pending Placement and write the statuses that changed."""
        pending, self.pending = self.pending, set()
        for key in sorted(pending):
            obj = self.objects.get(key)
            result = self.decide(key)
            if obj is None or result is None:
                continue
            status = _status(obj, result)
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


def _status(obj: dict[str, Any], result: BatchDecision) -> dict[str, Any]:
    policy = result.policy
    selected = len(result.selected)
    desired = {"PickN": policy.number_of_nodes, "PickFixed": len(policy.node_names)}.get(policy.placement_type, selected)
    return {
        "observedGeneration": obj["metadata"].get("generation"),
        "policyHash": policy_hash(obj),
        "desired": desired,
        "scheduled": selected,
        "message": result.summary,
        "decisions": [{"nodeName": d.node, "selected": d.selected, "reason": d.reason,
                       **({"score": round(d.score, 2)} if d.score is not None else {})} for d in result.decisions],
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
