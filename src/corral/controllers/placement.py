"""The Placement controller: carries out the scheduler's decisions, one copy of the template on each
selected node, rolled out within the strategy's budgets.

For each Placement (queued when it or one of its pods changes):

- **Wanted nodes** are those ``status.decisions`` marks selected: the scheduler decides
  (:mod:`corral.scheduler.batch`), this controller only acts, so the two never disagree about
  where copies go and a decision is never re-taken here.
- **Copies** are pods of the template for a node (:mod:`corral.controllers.workloads.node_rollout`, as the
  DaemonSet controller makes them): required node affinity on the node's name, the policy's
  tolerations added, labelled with the template's hash. The scheduler binds each one there.
- **Rollout**: a changed template replaces copies while at most ``maxUnavailable`` selected nodes
  lack an available copy, starting up to ``maxSurge`` new copies beside old ones (both default
  25 %; if both come to 0, one copy at a time may be unavailable, as Kubernetes does). A changed
  decision (a new policy) moves copies the same way: new ones on the newly selected nodes, at most
  ``maxSurge`` beyond the count, and a copy on a node let go stays until enough of the new ones
  are available. A copy is available once it has been ready for ``unavailablePeriodSeconds`` (60).
- **Policy snapshots**: each policy the Placement has had is kept as a ControllerRevision in its
  namespace (:mod:`corral.controllers.workloads.revisions`), named after the policy's hash (the name the
  scheduler's decisions give, ``status.policySnapshot``), labelled with the Placement
  (``placement.corral.dev/name``) and its index (``placement.corral.dev/policy-index``, also its
  ``revision``), holding the policy as ``data``, never rewritten. A change of ``numberOfNodes``
  alone is no new policy: the current snapshot's ``placement.corral.dev/number-of-nodes``
  annotation follows it. A policy changed back renumbers its snapshot the newest; the oldest
  beyond ``SNAPSHOT_LIMIT`` go.
- **Status**: ``available`` and the conditions ``Applied`` (every selected node has a copy of the
  current template) and ``Available`` (and every one of them is available), each with
  ``observedGeneration``; ``Scheduled`` is the scheduler's and is kept as it is.

Pods carry the Placement as their controller owner, so deleting it removes them (the garbage
collector). Idempotent: each sync reads the current state and does what is missing.
"""

from __future__ import annotations

import time
from typing import Any

from corral.api.defaults import now_rfc3339
from corral.api.kinds.apps import percent_or_count
from corral.api.kinds.placement import NUMBER_OF_NODES_ANNOTATION, PLACEMENT_LABEL, POLICY_INDEX_LABEL, policy_hash, \
    snapshot_name
from corral.api.resources import by_kind
from corral.controllers.workloads.deployment import template_hash
from corral.controllers.workloads.node_rollout import HASH_LABEL, carry_out, node_of, plan, pods_by_node, revision_of
from corral.controllers.workloads.pods import deletion_order, is_available, is_ready, owner_reference
from corral.controllers.queued import OwnedIndex, QueuedController
from corral.controllers.workloads.revisions import record_revision
from corral.server import errors
from corral.server.rest import ResourceAPI

__all__ = ["PlacementController", "APPLIED", "AVAILABLE", "SNAPSHOT_LIMIT"]

APPLIED, AVAILABLE = "Applied", "Available"
SNAPSHOT_LIMIT = 10  # policy snapshots kept besides the current one (Fleet's revisionHistoryLimit)
Obj = dict[str, Any]


def selected_nodes(placement: Obj) -> set[str]:
    return {d["nodeName"] for d in ((placement.get("status") or {}).get("decisions") or ())
            if d.get("selected") and d.get("nodeName")}


class PlacementController(QueuedController):
    name = "placement"
    component = "placement-controller"

    def __init__(self, api: ResourceAPI, *, clock=time.time) -> None:
        super().__init__(api)
        self.clock = clock
        self._placements = by_kind("Placement")
        self.index = OwnedIndex(api.cache, self._placements, by_kind("Pod"))

    async def sync(self, key: str) -> float | None:
        record = self.api.cache.get(key)
        if record is None or record.obj["metadata"].get("deletionTimestamp"):
            return None
        placement = record.obj
        await self._record_snapshot(placement)
        spec = placement.get("spec") or {}
        template = spec.get("template") or {}
        revision = template_hash(template)
        wanted = selected_nodes(placement)
        by_node = pods_by_node(self.index.objects_of(placement))
        rolling = spec["strategy"]["rollingUpdate"]  # the API's defaults fill all three in
        min_ready = rolling["unavailablePeriodSeconds"]
        budget = percent_or_count(rolling["maxUnavailable"], len(wanted), round_up=False)
        surge = percent_or_count(rolling["maxSurge"], len(wanted), round_up=True)
        if budget == 0 and surge == 0:
            budget = 1
        now = self.clock()
        todo = plan(by_node, wanted, revision, min_ready=min_ready, now=now, surge=surge, max_unavailable=budget)
        doomed = self._within_budget(todo.doomed, by_node, wanted, min_ready, now, budget)
        total = sum(len(pods) for pods in by_node.values()) - len(doomed)
        creating = todo.missing[:max(len(wanted) + surge - total, 0)]  # never more than maxSurge extra copies
        await carry_out(self, placement, template, revision, doomed, creating,
                        ((spec.get("policy") or {}).get("tolerations")) or ())
        return await self._write_status(placement, wanted, todo.live, revision, min_ready, now)

    async def _record_snapshot(self, placement: Obj) -> None:
        """The current policy kept as a snapshot (see the module's docstring)."""
        meta = placement["metadata"]
        policy = (placement.get("spec") or {}).get("policy") or {}
        digest = policy_hash(placement)
        count = {NUMBER_OF_NODES_ANNOTATION: str(policy["numberOfNodes"])} if "numberOfNodes" in policy else {}

        def make(number: int) -> Obj:
            return {"apiVersion": "apps/v1", "kind": "ControllerRevision",
                    "metadata": {"name": snapshot_name(placement), "namespace": meta["namespace"],
                                 "labels": {PLACEMENT_LABEL: meta["name"], POLICY_INDEX_LABEL: str(number),
                                            HASH_LABEL: digest},
                                 "annotations": count, "ownerReferences": [owner_reference(placement)]},
                    "data": {"policy": {k: v for k, v in policy.items() if k != "numberOfNodes"}},
                    "revision": number}

        def refresh(current: Obj, number: int) -> Obj:
            meta_patch: Obj = {}
            if (current["metadata"].get("labels") or {}).get(POLICY_INDEX_LABEL) != str(number):
                meta_patch["labels"] = {POLICY_INDEX_LABEL: str(number)}
            if count and (current["metadata"].get("annotations") or {}).get(NUMBER_OF_NODES_ANNOTATION) != count[
                    NUMBER_OF_NODES_ANNOTATION]:
                meta_patch["annotations"] = count
            return {"metadata": meta_patch} if meta_patch else {}

        await record_revision(self, placement, digest, make, limit=SNAPSHOT_LIMIT, refresh=refresh)

    @staticmethod
    def _within_budget(doomed: list[Obj], by_node: dict[str, list[Obj]], wanted: set[str], min_ready: int,
                       now: float, budget: int) -> list[Obj]:
        """Of the copies the plan would delete, those that may go now. A copy on a node the decision
        let go keeps serving until enough copies on selected nodes are available: it goes while the
        available copies would stay at least ``len(wanted) - maxUnavailable`` (a policy change rolls
        out within the budget, not all at once); one that is not available goes at once."""
        gone = {id(p) for p in doomed}
        leaving = [p for p in doomed if node_of(p) not in wanted]
        out = [p for p in doomed if node_of(p) in wanted or not is_available(p, min_ready, now)]
        serving = sum(1 for node in wanted for p in by_node.get(node, ()) if id(p) not in gone
                      and is_available(p, min_ready, now))
        serving += sum(1 for p in leaving if is_available(p, min_ready, now))
        for pod in sorted((p for p in leaving if is_available(p, min_ready, now)), key=deletion_order):
            if serving - 1 < len(wanted) - budget:
                break
            out.append(pod)
            serving -= 1
        return out

    async def _write_status(self, placement: Obj, wanted: set[str], live: dict[str, list[Obj]], revision: str,
                            min_ready: int, now: float) -> float | None:
        meta = placement["metadata"]
        current = {node: [p for p in live.get(node, ()) if revision_of(p) == revision] for node in wanted}
        applied = all(current.values())
        available = sum(1 for pods in current.values() if any(is_available(p, min_ready, now) for p in pods))
        generation = meta["generation"]
        status = dict(placement.get("status") or {})
        conditions = [c for c in status.get("conditions") or () if c.get("type") not in (APPLIED, AVAILABLE)]
        for kind, ok, reason, message in (
                (APPLIED, applied, "Applied" if applied else "Applying",
                 f"{sum(1 for pods in current.values() if pods)} of {len(wanted)} selected node(s) have a copy of "
                 "the current template"),
                (AVAILABLE, applied and available == len(wanted), "Available" if available == len(wanted) else "NotAvailableYet",
                 f"{available} of {len(wanted)} cop(ies) available")):
            before = next((c for c in status.get("conditions") or () if c.get("type") == kind), None)
            value = "True" if ok else "False"
            since = before["lastTransitionTime"] if before and before.get("status") == value and before.get(
                "lastTransitionTime") else now_rfc3339()
            conditions.append({"type": kind, "status": value, "reason": reason, "message": message,
                               "observedGeneration": generation, "lastTransitionTime": since})
        new = {**status, "available": available, "conditions": conditions}
        if new != status:  # a condition's time changes only with its status
            try:
                await self.api.update(self._placements, meta["namespace"], meta["name"], {**placement, "status": new},
                                      self.opts, subresource="status")
            except errors.ApiError as exc:
                if exc.code not in (404, 409):  # gone, or changed meanwhile: its own event brings it back
                    raise
        waiting = [p for pods in current.values() for p in pods if is_ready(p) and not is_available(p, min_ready, now)]
        return float(min_ready) if waiting else None

