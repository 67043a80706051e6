"""One pod per wanted node, rolled out within budgets: what the DaemonSet and Placement controllers share.

An owner (a DaemonSet, a Placement) wants one pod of its current template on each node of a set.
:func:`plan` looks at its active pods, grouped by the node each is for, and says what to do now:

- a pod on a node no longer wanted goes, and so does a second pod on one node (the current
  revision's, the readiest, the oldest is kept) — unless it is a surge in progress;
- ``RollingUpdate``: old pods go while at most ``max_unavailable`` wanted nodes lack an available
  pod (not-available old pods cost nothing to replace and go at once); with ``surge``, the new pod
  starts beside the old one on that many nodes at a time and the old one goes once the new is
  available; ``max_unavailable`` None (``OnDelete``) replaces a pod only when someone deletes it;
- every wanted node without a pod gets one.

Pods are made for a node with required node affinity on its name (``matchFields metadata.name``),
so the scheduler binds them there, checking resources and ports, as Kubernetes does for daemons.
:func:`plan` is pure; :func:`carry_out` makes a controller's deletes and creates, with their events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable

from corral.api.resources import by_kind
from corral.controllers.batches import record_creates, slow_start
from corral.controllers.workloads.pods import deletion_order, is_active, is_available, pod_from_template

__all__ = ["HASH_LABEL", "Plan", "plan", "node_of", "revision_of", "pod_for_node", "pods_by_node", "carry_out"]

HASH_LABEL = "controller-revision-hash"
Obj = dict[str, Any]


def node_of(pod: Obj) -> str:
    """The node a pod is for: where it is bound, or the node its affinity names."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return spec["nodeName"]
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or ()
    for term in terms:
        for field in term.get("matchFields") or ():  # whose only key is metadata.name (validation)
            if field["operator"] == "In" and len(field["values"]) == 1:
                return field["values"][0]
    return ""


def pods_by_node(pods: Iterable[Obj]) -> dict[str, list[Obj]]:
    """The active pods (not finished, not being deleted) by the node each is for."""
    out: dict[str, list[Obj]] = {}
    for pod in pods:
        if is_active(pod):
            out.setdefault(node_of(pod), []).append(pod)
    return out


def revision_of(pod: Obj) -> str:
    return (pod["metadata"].get("labels") or {}).get(HASH_LABEL, "")


def pod_for_node(owner: Obj, template: Obj, node: str, revision: str, tolerations: Iterable[Obj] = ()) -> Obj:
    """A pod of ``template`` for ``node``, labelled with its revision, with ``tolerations`` added."""
    pod = pod_from_template(owner, template)
    pod["metadata"].setdefault("labels", {})[HASH_LABEL] = revision
    spec = pod["spec"]
    extra = list(tolerations)
    if extra:
        spec["tolerations"] = [*(spec.get("tolerations") or ()), *(t for t in extra if t not in (spec.get("tolerations") or ()))]
    affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    return pod


@dataclass(slots=True)
class Plan:
    doomed: list[Obj]  # pods to delete now
    missing: list[str]  # nodes to create a pod for now
    live: dict[str, list[Obj]]  # node → the pods that stay


def plan(by_node: dict[str, list[Obj]], wanted: set[str], revision: str, *, min_ready: int, now: float,
         surge: int, max_unavailable: int | None) -> Plan:
    """What to delete and create for one owner now (see the module's docstring)."""
    doomed: list[Obj] = []
    for node, on_node in by_node.items():
        if node not in wanted:
            doomed += on_node  # the node no longer takes it (or is gone)
        elif len(on_node) > 1:
            new = [p for p in on_node if revision_of(p) == revision]
            if surge and len(new) == 1:  # a surge: the old pod goes once the new one is available
                if is_available(new[0], min_ready, now):
                    doomed += [p for p in on_node if p is not new[0]]
                continue
            # one per node: keep the current revision's, the readiest, the oldest
            keep = max(on_node, key=lambda p: (revision_of(p) == revision, deletion_order(p)))
            doomed += [p for p in on_node if p is not keep]
    if max_unavailable is not None:
        doomed += _rolling(by_node, wanted, revision, min_ready, now, doomed, surge, max_unavailable)
    missing = sorted(node for node in wanted if not by_node.get(node))
    if surge:  # new pods beside old available ones, as many nodes at a time as maxSurge allows
        surging = sum(1 for node in wanted if len(by_node.get(node, ())) > 1)
        missing += [node for node in sorted(wanted) if by_node.get(node) and len(by_node[node]) == 1
                    and revision_of(by_node[node][0]) != revision
                    and id(by_node[node][0]) not in {id(p) for p in doomed}][:max(surge - surging, 0)]
    gone = {id(p) for p in doomed}
    live = {n: [p for p in ps if id(p) not in gone] for n, ps in by_node.items()}
    return Plan(doomed, missing, live)


def _rolling(by_node: dict[str, list[Obj]], wanted: set[str], revision: str, min_ready: int, now: float,
             doomed: list[Obj], surge: int, budget: int) -> list[Obj]:
    """Old pods to delete now: as many as ``budget`` (maxUnavailable) allows, not-available ones
    first (with ``surge``, only those: an available one goes once its successor is available)."""
    gone = {id(p) for p in doomed}
    unavailable, old = 0, []
    for node in wanted:
        pods = [p for p in by_node.get(node, ()) if id(p) not in gone]
        if not any(is_available(p, min_ready, now) for p in pods):
            unavailable += 1
        old += [p for p in pods if revision_of(p) != revision]
    # An old pod that is not available costs nothing to replace; the others spend the budget.
    free = [p for p in old if not is_available(p, min_ready, now)]
    if surge:
        return free
    busy = sorted((p for p in old if is_available(p, min_ready, now)), key=deletion_order)
    return free + busy[:max(budget - unavailable, 0)]


async def carry_out(controller: Any, owner: Obj, template: Obj, revision: str, doomed: list[Obj], nodes: list[str],
                    tolerations: Iterable[Obj] = ()) -> None:
    """Delete ``doomed`` (each only if unchanged) and create a pod of ``template`` for each of
    ``nodes`` (in batches that double while creates succeed), recording each on ``owner`` as
    Kubernetes' controllers do. A failed create raises (the key is retried with backoff) after its
    FailedCreate event."""
    pods_resource = by_kind("Pod")
    for pod in doomed:
        if await controller.delete_if_unchanged(pods_resource, pod):
            controller.events.record(owner, "Normal", "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}")
    tolerations = list(tolerations)
    namespace = owner["metadata"]["namespace"]

    def create(node: str) -> Callable[[], Awaitable[Any]]:
        return lambda: controller.api.create(pods_resource, namespace,
                                             pod_for_node(owner, template, node, revision, tolerations),
                                             controller.opts)

    results = await slow_start([create(node) for node in nodes])  # batches that double while creates succeed
    record_creates(controller, owner, results, lambda result, i: f"Created pod on node {nodes[i]}")
