"""What the workload controllers know about pods: which are active, ready, available; who controls
one; a pod made from a template; and the order in which surplus pods go, as Kubernetes orders them."""

from __future__ import annotations

import copy
from typing import Any

from corral.scheduler.cache.node_table import parse_timestamp

__all__ = ["FINISHED", "controller_of", "is_active", "is_ready", "ready_since", "is_available", "owner_reference",
           "pod_from_template", "deletion_order"]

Obj = dict[str, Any]


def controller_of(obj: Obj) -> Obj | None:
    """The ownerReference marked ``controller: true``, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


FINISHED = ("Succeeded", "Failed")  # the phases of a pod that no longer runs


def is_active(pod: Obj) -> bool:
    """Counted as one of a workload's replicas: not finished, not being deleted."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return (pod.get("status") or {}).get("phase") not in FINISHED


def _ready_condition(pod: Obj) -> Obj | None:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond
    return None


def is_ready(pod: Obj) -> bool:
    cond = _ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def ready_since(pod: Obj) -> float:
    """When the pod last became ready (0 when unknown)."""
    cond = _ready_condition(pod)
    return parse_timestamp(cond.get("lastTransitionTime")) if cond else 0.0


def is_available(pod: Obj, min_ready_seconds: int, now: float) -> bool:
    """Ready for at least ``min_ready_seconds``: what a rollout counts as serving."""
    if not is_ready(pod):
        return False
    return min_ready_seconds <= 0 or now - ready_since(pod) >= min_ready_seconds


def owner_reference(owner: Obj) -> Obj:
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def pod_from_template(owner: Obj, template: Obj) -> Obj:
    """A new pod of ``owner`` (a ReplicaSet, a Job, ...): the template's labels, annotations and spec,
    a name generated from the owner's, controlled by it."""
    meta = template.get("metadata") or {}
    pod_meta: Obj = {"generateName": f"{owner['metadata']['name']}-", "namespace": owner["metadata"]["namespace"],
                     "ownerReferences": [owner_reference(owner)]}
    for key in ("labels", "annotations"):
        if meta.get(key):
            pod_meta[key] = dict(meta[key])
    if meta.get("finalizers"):
        pod_meta["finalizers"] = list(meta["finalizers"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": copy.deepcopy(template.get("spec") or {})}


_PHASE_RANK = {"Pending": 0, "Scheduled": 0, "Unknown": 1, "Running": 2}


def _restarts(pod: Obj) -> int:
    return max((s.get("restartCount") or 0 for s in (pod.get("status") or {}).get("containerStatuses") or ()), default=0)


def deletion_order(pod: Obj) -> tuple:
    """Sort key: the pods to delete first come first — Kubernetes' order for a scale-down: not yet
    placed before placed; Pending before Unknown before Running; not ready before ready; ready for less
    time before longer; more restarts before fewer; newer before older."""
    status, meta = pod.get("status") or {}, pod.get("metadata") or {}
    ready = is_ready(pod)
    return (
        bool((pod.get("spec") or {}).get("nodeName")),
        _PHASE_RANK.get(status.get("phase"), 0),
        ready,
        -ready_since(pod) if ready else 0.0,
        -_restarts(pod),
        -parse_timestamp(meta.get("creationTimestamp")),
    )
