"""The pods a set of manifests would ask the scheduler to place, made as their controllers make them.

A Pod is itself; a ReplicaSet or Deployment is ``replicas`` copies of its template; a Job is the
pods it starts at once (``parallelism``, at most ``completions``); a DaemonSet is one pod per node
it is eligible for, each tied to its node by name as the DaemonSet controller ties it; a Placement
is its copy, one per node its decision selects (the decision is taken when the plan runs). Every pod
first goes through ``admit`` (the server's validation, defaults and admission, written nowhere),
so a plan sees the priority, defaults and refusals the real create would. Kinds that make no pods
(Services, ConfigMaps, ...) are noted and skipped; a CronJob makes none until its schedule fires.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable

from corral.controllers.daemonset import DAEMON_TOLERATIONS, eligible
from corral.controllers.node_rollout import pod_for_node
from corral.controllers.pods import pod_from_template

__all__ = ["PlannedPod", "Expansion", "expand", "PlanInputError", "on_node", "MAX_PODS"]

Obj = dict[str, Any]
# (kind, object, where in the request) → the object as the server would store it.
Admit = Callable[[str, Obj, str], Awaitable[Obj]]

_TEMPLATED = ("ReplicaSet", "Deployment", "Job", "DaemonSet")
MAX_PODS = 10_000  # pods one plan may make in all (a plan of 1,000 takes about a second of server time)


class PlanInputError(ValueError):
    """A manifest the plan cannot use; ``path`` is the field that is wrong (``items[2].spec...``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@dataclass(frozen=True, slots=True)
class PlannedPod:
    pod: Obj  # as created: defaulted and admitted, with a name
    source: str  # what makes it: "Pod default/web", "Deployment default/web"
    # A Placement's copy, before its nodes are chosen: the plan decides the Placement on the copy
    # of the cluster (as the scheduler decides it at once), then places one such pod per node.
    placement: Obj | None = None


@dataclass(slots=True)
class Expansion:
    pods: list[PlannedPod] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was not planned, and why


def _owner(obj: Obj, index: int) -> Obj:
    """``obj`` with the uid its controller's pods would name (a plan has none: made up, stable)."""
    meta = {**obj["metadata"], "uid": obj["metadata"].get("uid") or f"plan-{index}"}
    return {**obj, "metadata": meta}


def _count(spec: Obj, name: str, default: int) -> int:
    value = spec.get(name)
    return default if value is None else int(value)


def _named(pod: Obj, name: str) -> Obj:
    meta = {k: v for k, v in pod["metadata"].items() if k != "generateName"}
    return {**pod, "metadata": {**meta, "name": name}}


def on_node(pod: Obj, node: str, name: str) -> Obj:
    """A DaemonSet's admitted pod, for ``node`` instead (only its name and node affinity differ)."""
    spec = dict(pod["spec"])
    affinity = dict(spec["affinity"])
    affinity["nodeAffinity"] = {**affinity["nodeAffinity"], "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}
    spec["affinity"] = affinity
    return {**_named(pod, name), "spec": spec}


def _copies(admitted: Obj, prefix: str, n: int) -> list[Obj]:
    """``n`` pods of one admitted template, named ``prefix1`` … (one admission for all)."""
    return [_named(admitted, f"{prefix}{i}") for i in range(1, n + 1)]


async def expand(items: list[Obj], admit: Admit, nodes: Iterable[Obj]) -> Expansion:
    """Each manifest's pods, in manifest order (a workload's pods together, as its controller makes
    them at once). ``nodes``: the snapshot's nodes, for DaemonSets."""
    out = Expansion()
    nodes = list(nodes)
    for index, item in enumerate(items):
        where = f"items[{index}]"
        if len(out.pods) > MAX_PODS:
            raise PlanInputError(f"items[{index - 1}]", f"the plan would make more than {MAX_PODS} pods; plan fewer at once")
        kind = item.get("kind") if isinstance(item, dict) else None
        if not isinstance(kind, str) or not kind:
            raise PlanInputError(f"{where}.kind", "Required value")
        obj = await admit(kind, item, where)
        meta = obj["metadata"]
        label = f"{kind} {meta.get('namespace') or ''}{'/' if meta.get('namespace') else ''}{meta['name']}"
        if kind == "Pod":
            out.pods.append(PlannedPod(obj, label))
            continue
        if kind == "CronJob":
            out.notes.append(f"{label}: makes no pods until its schedule fires (plan its jobTemplate as a Job)")
            continue
        if kind == "Placement":
            tolerations = ((obj.get("spec") or {}).get("policy") or {}).get("tolerations") or ()
            template = (obj.get("spec") or {}).get("template") or {}
            copy = pod_for_node(_owner(obj, index), template, "-", "plan", tolerations)
            admitted = await admit("Pod", _named(copy, f"{meta['name']}-copy"), f"{where}.spec.template")
            out.pods.append(PlannedPod(admitted, label, placement=obj))
            continue
        if kind not in _TEMPLATED:
            continue  # makes no pods (a Service, a ConfigMap, a PriorityClass, ...)
        spec = obj.get("spec") or {}
        owner = _owner(obj, index)
        template = spec.get("template") or {}
        if kind == "DaemonSet":
            names = [n["metadata"]["name"] for n in nodes if eligible(template.get("spec") or {}, n)]
            if not names:
                out.notes.append(f"{label}: no node is eligible for it (selector, affinity or taints)")
                continue
            first = pod_for_node(owner, template, names[0], "plan", DAEMON_TOLERATIONS)
            admitted = await admit("Pod", _named(first, f"{meta['name']}-{names[0]}"), f"{where}.spec.template")
            out.pods += [PlannedPod(on_node(admitted, node, f"{meta['name']}-{node}"), label) for node in names]
            continue
        if kind == "Job":
            parallelism = _count(spec, "parallelism", 1)
            completions = spec.get("completions")
            n = parallelism if completions is None else min(parallelism, int(completions))
        else:
            n = _count(spec, "replicas", 1)
        if n <= 0:
            continue
        if len(out.pods) + n > MAX_PODS:
            field = "parallelism" if kind == "Job" else "replicas"
            raise PlanInputError(f"{where}.spec.{field}", f"the plan would make more than {MAX_PODS} pods; plan fewer at once")
        admitted = await admit("Pod", _named(pod_from_template(owner, template), f"{meta['name']}-1"),
                               f"{where}.spec.template")
        out.pods += [PlannedPod(p, label) for p in _copies(admitted, f"{meta['name']}-", n)]
    return out
