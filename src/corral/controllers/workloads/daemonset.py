"""The DaemonSet controller: one pod of a template on every eligible node, as Kubernetes' does.

For each DaemonSet (queued when it, one of its pods or any node changes):

- **Eligible nodes**: those whose labels the template's ``nodeSelector`` and required node affinity
  match and whose NoSchedule/NoExecute taints the template tolerates — with the tolerations every
  DaemonSet pod gets (not-ready and unreachable NoExecute; disk, memory and pid pressure and
  unschedulable NoSchedule), so a daemon stays on a node that is cordoned or briefly lost.
- **Placement**: a missing pod is created with required node affinity on the node's name
  (``matchFields metadata.name``); the scheduler binds it there, checking resources and ports, as
  Kubernetes does since 1.12. A pod on a node no longer eligible, or a second pod on one node, is
  deleted.
- **Revisions**: each template is kept as a ControllerRevision (``kubectl rollout history|undo``).
- **Updates**: pods carry ``controller-revision-hash``, the template's hash. ``RollingUpdate``
  deletes old pods while at most ``maxUnavailable`` (1) nodes lack an available new pod, and the
  next sync creates the new one; with ``maxSurge`` it starts the new pod beside the old one on that
  many nodes at a time and deletes the old one once the new is available. ``OnDelete`` replaces a
  pod only when someone deletes it.
- **Status**: desiredNumberScheduled, currentNumberScheduled, numberMisscheduled, numberReady,
  updatedNumberScheduled, numberAvailable (ready for minReadySeconds), numberUnavailable,
  observedGeneration — what ``kubectl rollout status daemonset`` reads.
"""

from __future__ import annotations

import copy
import time
from typing import Any, Iterable

from corral.api.kinds.apps import percent_or_count
from corral.api.resources import ResourceType, by_kind
from corral.controllers.workloads.deployment import template_hash
from corral.controllers.workloads.node_rollout import HASH_LABEL, carry_out, plan, pods_by_node, revision_of
from corral.controllers.workloads.pods import is_available, is_ready, owner_reference
from corral.controllers.queued import OwnedIndex, QueuedController
from corral.controllers.workloads.revisions import record_revision
from corral.scheduler.plugins.taint_toleration import tolerates
from corral.server import errors
from corral.server.rest import ResourceAPI
from corral.store import Event, EventType

__all__ = ["DaemonSetController", "HASH_LABEL", "DAEMON_TOLERATIONS", "eligible"]

CHANGE_CAUSE = "kubernetes.io/change-cause"
# What every DaemonSet pod tolerates, as Kubernetes adds it.
DAEMON_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    *({"key": f"node.kubernetes.io/{key}", "operator": "Exists", "effect": "NoSchedule"}
      for key in ("disk-pressure", "memory-pressure", "pid-pressure", "unschedulable")),
]

Obj = dict[str, Any]


def _requirement(req: Obj, value: str | None) -> bool:
    op, values = req.get("operator"), req.get("values") or []
    if op == "In":
        return value in values
    if op == "NotIn":
        return value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and values:
        try:
            return int(value) > int(values[0]) if op == "Gt" else int(value) < int(values[0])
        except ValueError:
            return False
    return False


def eligible(spec: Obj, node: Obj) -> bool:
    """Whether a pod of ``spec`` (a template's) belongs on ``node``: labels, affinity, taints."""
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    if required and not any(
            all(_requirement(r, labels.get(r["key"])) for r in term.get("matchExpressions") or ())
            and all(_requirement(r, node["metadata"]["name"]) for r in term.get("matchFields") or ())
            for term in required):
        return False
    tolerations = [*(spec.get("tolerations") or ()), *DAEMON_TOLERATIONS]
    return all(tolerates(tolerations, t["key"], t.get("value", ""), t["effect"])
               for t in (node.get("spec") or {}).get("taints") or () if t.get("effect") in ("NoSchedule", "NoExecute"))


def _surge(spec: Obj, nodes: int) -> int:
    """maxSurge as a count of nodes (0: none), for a RollingUpdate (the API defaults every field read here)."""
    strategy = spec["updateStrategy"]
    if strategy["type"] != "RollingUpdate":
        return 0
    return percent_or_count(strategy["rollingUpdate"]["maxSurge"], nodes, round_up=True)


class DaemonSetController(QueuedController):
    name = "daemonset"
    component = "daemonset-controller"

    def __init__(self, api: ResourceAPI, *, clock=time.time) -> None:
        super().__init__(api)
        self.clock = clock
        self._sets, self._pods, self._nodes = by_kind("DaemonSet"), by_kind("Pod"), by_kind("Node")
        self.index = OwnedIndex(api.cache, self._sets, self._pods)
        self._node_shapes: dict[str, tuple] = {}  # node key → (labels, taints) last seen

    def reset(self) -> None:
        super().reset()
        self._node_shapes.clear()

    def watched(self) -> tuple[ResourceType, ...]:
        return (*super().watched(), self._nodes)  # its index's DaemonSets and pods, and the nodes

    def keys_for(self, event: Event) -> Iterable[str]:
        if event.key.startswith(self._nodes.store_prefix):  # a node came or went, or its labels or taints changed
            changed = event.type is not EventType.MODIFIED or self._labels_or_taints_changed(event)
            return self.index.owner_keys() if changed else ()
        return self.index.keys_for(event)

    def _labels_or_taints_changed(self, event: Event) -> bool:
        """A node's heartbeat (status) changes nothing here; its labels or taints may."""
        obj = event.record.obj
        shape = (obj["metadata"].get("labels"), (obj.get("spec") or {}).get("taints"))
        return self._node_shapes.pop(event.key, None) != self._node_shapes.setdefault(event.key, shape)

    # --- one DaemonSet -----------------------------------------------------------------------------------

    async def sync(self, key: str) -> float | None:
        record = self.api.cache.get(key)
        if record is None or record.obj["metadata"].get("deletionTimestamp"):
            return None
        ds = record.obj
        spec = ds.get("spec") or {}
        template = spec.get("template") or {}
        revision = template_hash(template)
        await self._record_revision(ds, template, revision)
        nodes = [r.obj for r in self.api.cache.items(self._nodes.store_prefix)]
        wanted = {n["metadata"]["name"] for n in nodes if eligible(template.get("spec") or {}, n)}
        by_node = pods_by_node(self.index.objects_of(ds))
        # Nodes running a daemon they should not (this sync deletes it), counted as Kubernetes does:
        # existing nodes only.
        misscheduled = sum(1 for n in nodes
                           if n["metadata"]["name"] not in wanted and by_node.get(n["metadata"]["name"]))
        min_ready = spec["minReadySeconds"]
        now = self.clock()
        strategy = spec["updateStrategy"]
        rolling = strategy["type"] == "RollingUpdate"
        budget = percent_or_count(strategy["rollingUpdate"]["maxUnavailable"], len(wanted),
                                  round_up=True) if rolling else None
        todo = plan(by_node, wanted, revision, min_ready=min_ready, now=now, surge=_surge(spec, len(wanted)),
                    max_unavailable=budget)
        await carry_out(self, ds, template, revision, todo.doomed, todo.missing, DAEMON_TOLERATIONS)
        live = todo.live
        return await self._write_status(ds, wanted, live, misscheduled, revision, min_ready, now)

    async def _record_revision(self, ds: Obj, template: Obj, digest: str) -> None:
        """The template as a ControllerRevision (``kubectl rollout history`` lists them, ``undo``
        patches one back): see :mod:`corral.controllers.workloads.revisions`."""
        meta = ds["metadata"]
        cause = (meta.get("annotations") or {}).get(CHANGE_CAUSE)

        def make(number: int) -> Obj:
            labels = {**((template.get("metadata") or {}).get("labels") or {}), HASH_LABEL: digest}
            return {"apiVersion": "apps/v1", "kind": "ControllerRevision",
                    "metadata": {"name": f"{meta['name']}-{digest}", "namespace": meta["namespace"], "labels": labels,
                                 "annotations": {CHANGE_CAUSE: cause} if cause else {},
                                 "ownerReferences": [owner_reference(ds)]},
                    "data": {"spec": {"template": {**copy.deepcopy(template), "$patch": "replace"}}},
                    "revision": number}

        await record_revision(self, ds, digest, make, limit=ds["spec"]["revisionHistoryLimit"])

    async def _write_status(self, ds: Obj, wanted: set[str], live: dict[str, list[Obj]], misscheduled: int,
                            revision: str, min_ready: int, now: float) -> float | None:
        meta = ds["metadata"]
        # Each node counted by its oldest bound daemon, as Kubernetes counts (during a surge, the old
        # one: a node is updated once its old pod is gone).
        bound = [min(ps, key=lambda p: (p["metadata"].get("creationTimestamp") or "", revision_of(p) == revision,
                                        p["metadata"]["name"]))  # in one second, the older revision first
                 for node, pods in live.items() if node in wanted
                 if (ps := [p for p in pods if (p.get("spec") or {}).get("nodeName")])]
        available = sum(1 for p in bound if is_available(p, min_ready, now))
        status = {
            "desiredNumberScheduled": len(wanted),
            "currentNumberScheduled": len(bound),
            "numberMisscheduled": misscheduled,
            "numberReady": sum(1 for p in bound if is_ready(p)),
            "updatedNumberScheduled": sum(1 for p in bound if revision_of(p) == revision),
            "numberAvailable": available,
            "numberUnavailable": len(wanted) - available,
            "observedGeneration": meta["generation"],
        }
        if status != {k: v for k, v in (ds.get("status") or {}).items() if k in status}:
            try:
                await self.api.update(self._sets, meta["namespace"], meta["name"],
                                      {**ds, "status": {**(ds.get("status") or {}), **status}}, self.opts,
                                      subresource="status")
            except errors.ApiError as exc:
                if exc.code not in (404, 409):
                    raise
        waiting = [p for p in bound if is_ready(p) and not is_available(p, min_ready, now)]
        return float(min_ready) if waiting else None
