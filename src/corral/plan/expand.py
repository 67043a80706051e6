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

from corral.controllers.workloads.daemonset import DAEMON_TOLERATIONS, eligible
from corral.controllers.workloads.node_rollout import pod_for_node
from corral.controllers.workloads.pods import pod_from_template

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
    """A DaemonSet's or Placement's admitted pod, for ``node`` instead (only its name and node
    affinity differ)."""
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
    them at once). ``nodes``: the snapshot's nodes, for DaemonSets. More than :data:`MAX_PODS` in
    all is refused, naming the manifest that passed the limit."""
    out = Expansion()
    nodes = list(nodes)
    for index, item in enumerate(items):
        where = f"items[{index}]"
        kind = item.get("kind") if isinstance(item, dict) else None
        if not isinstance(kind, str) or not kind:
            raise PlanInputError(f"{where}.kind", "Required value")
        obj = await admit(kind, item, where)
        out.pods += await _pods_of(kind, obj, index, admit, nodes, out.notes, room=MAX_PODS - len(out.pods))
    return out


def _too_many(field: str) -> PlanInputError:
    return PlanInputError(field, f"the plan would make more than {MAX_PODS} pods; plan fewer at once")


async def _pods_of(kind: str, obj: Obj, index: int, admit: Admit, nodes: list[Obj], notes: list[str], *,
                   room: int) -> list[PlannedPod]:
    """One admitted manifest's pods (at most ``room`` of them: more is refused, naming the field
    that sets how many)."""
    where, meta = f"items[{index}]", obj["metadata"]
    label = f"{kind} {meta.get('namespace') or ''}{'/' if meta.get('namespace') else ''}{meta['name']}"
    spec = obj.get("spec") or {}
    if kind in ("Pod", "Placement") and room < 1:
        raise _too_many(where)
    if kind == "Pod":
        return [PlannedPod(obj, label)]
    if kind == "CronJob":
        notes.append(f"{label}: makes no pods until its schedule fires (plan its jobTemplate as a Job)")
        return []
    if kind == "Placement":  # one copy per node its decision selects, made when the plan runs
        tolerations = (spec.get("policy") or {}).get("tolerations") or ()
        copy = pod_for_node(_owner(obj, index), spec.get("template") or {}, "-", "plan", tolerations)
        admitted = await admit("Pod", _named(copy, f"{meta['name']}-copy"), f"{where}.spec.template")
        return [PlannedPod(admitted, label, placement=obj)]
    if kind not in _TEMPLATED:
        return []  # makes no pods (a Service, a ConfigMap, a PriorityClass, ...)
    owner, template = _owner(obj, index), spec.get("template") or {}
    if kind == "DaemonSet":
        names = [n["metadata"]["name"] for n in nodes if eligible(template.get("spec") or {}, n)]
        if not names:
            notes.append(f"{label}: no node is eligible for it (selector, affinity or taints)")
            return []
        if len(names) > room:
            raise _too_many(where)
        first = pod_for_node(owner, template, names[0], "plan", DAEMON_TOLERATIONS)
        admitted = await admit("Pod", _named(first, f"{meta['name']}-{names[0]}"), f"{where}.spec.template")
        return [PlannedPod(on_node(admitted, node, f"{meta['name']}-{node}"), label) for node in names]
    if kind == "Job":
        parallelism = _count(spec, "parallelism", 1)
        completions = spec.get("completions")
        n, field = (parallelism if completions is None else min(parallelism, int(completions))), "parallelism"
    else:
        n, field = _count(spec, "replicas", 1), "replicas"
    if n > room:  # refused before any copy is made
        raise _too_many(f"{where}.spec.{field}")
    if n <= 0:
        return []
    admitted = await admit("Pod", _named(pod_from_template(owner, template), f"{meta['name']}-1"),
                           f"{where}.spec.template")
    return [PlannedPod(p, label) for p in _copies(admitted, f"{meta['name']}-", n)]
