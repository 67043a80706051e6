"""A Placement's policy as the batch decision reads it, and the pod it decides for.

``spec.policy`` of a ``placement.corral.dev/v1`` Placement (validated by the API before it gets
here, so this module only reads):

- ``placementType``: ``PickAll`` (every feasible node), ``PickN`` (``numberOfNodes`` of them, best
  first), ``PickFixed`` (``nodeNames``).
- ``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms``: ORed
  terms a node must match, on top of the template's own node affinity.
- ``affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution``: ``{weight, preference}``
  (a NodeSelectorTerm: its weight, −100..100, for each node it matches) or ``{weight,
  propertySorter: {name, sortOrder}}`` (the weight scaled by where the node's number lies between
  the smallest and the largest among the nodes considered, as Kubernetes Fleet scales it).
- ``topologySpreadConstraints`` (PickN): ``maxSkew``, ``topologyKey``, ``whenUnsatisfiable``.
- ``tolerations``: added to the template's.

The decision pod is the template as a pod named after the Placement, with the policy's required
terms ANDed into its own and the policy's tolerations added: the plugins filter and score it as
they would one copy.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from corral.api.kinds.placement import PROPERTIES
from corral.scheduler.framework.podinfo import NodeSelectorTerm, _node_term

__all__ = ["Policy", "Preference", "PropertySorter", "Spread", "read_policy", "decision_pod", "PROPERTIES",
           "PICK_ALL", "PICK_N", "PICK_FIXED"]  # PROPERTIES: the node numbers a property sorter may name

PICK_ALL, PICK_N, PICK_FIXED = "PickAll", "PickN", "PickFixed"



@dataclass(frozen=True, slots=True)
class PropertySorter:
    name: str
    descending: bool  # sortOrder Descending: the largest value earns the whole weight


@dataclass(frozen=True, slots=True)
class Preference:
    weight: int  # −100..100
    term: NodeSelectorTerm | None = None
    sorter: PropertySorter | None = None


@dataclass(frozen=True, slots=True)
class Spread:
    max_skew: int
    topology_key: str
    hard: bool  # whenUnsatisfiable: DoNotSchedule (hard) or ScheduleAnyway


@dataclass(frozen=True, slots=True)
class Policy:
    placement_type: str
    number_of_nodes: int = 0
    node_names: tuple[str, ...] = ()
    preferences: tuple[Preference, ...] = ()
    spread: tuple[Spread, ...] = ()


def _node_affinity(policy: dict[str, Any]) -> dict[str, Any]:
    return ((policy.get("affinity") or {}).get("nodeAffinity")) or {}


def read_policy(placement: dict[str, Any]) -> Policy:
    policy = (placement.get("spec") or {}).get("policy") or {}
    preferences = []
    for entry in _node_affinity(policy).get("preferredDuringSchedulingIgnoredDuringExecution") or ():
        weight = entry["weight"]
        sorter = entry.get("propertySorter")
        if sorter:
            preferences.append(Preference(weight, sorter=PropertySorter(sorter["name"],
                                                                        sorter["sortOrder"] == "Descending")))
        else:
            preferences.append(Preference(weight, term=_node_term(entry.get("preference") or {})))
    spread = tuple(Spread(c["maxSkew"], c["topologyKey"], c["whenUnsatisfiable"] == "DoNotSchedule")
                   for c in policy.get("topologySpreadConstraints") or ())
    return Policy(policy["placementType"], policy.get("numberOfNodes", 0),  # a count only PickN has
                  tuple(policy.get("nodeNames") or ()), tuple(preferences), spread)


def decision_pod(placement: dict[str, Any]) -> dict[str, Any]:
    """The template as one copy's pod, with the policy's required node terms and tolerations."""
    meta = placement.get("metadata") or {}
    spec = placement.get("spec") or {}
    template = copy.deepcopy(spec.get("template") or {})
    pod_spec = template.get("spec") or {}
    policy = spec.get("policy") or {}
    required = ((_node_affinity(policy).get("requiredDuringSchedulingIgnoredDuringExecution")) or {}).get(
        "nodeSelectorTerms") or []
    if required:
        node_affinity = pod_spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        own = (node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
        # (a or b) and (c or d) == (a and c) or (a and d) or ...: a term is an AND of its requirements.
        terms = [_and(o, r) for o in own for r in required] if own else required
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    if policy.get("tolerations"):
        pod_spec["tolerations"] = [*(pod_spec.get("tolerations") or ()), *policy["tolerations"]]
    return {"metadata": {**(template.get("metadata") or {}), "name": meta["name"], "namespace": meta["namespace"],
                         "uid": meta["uid"]},
            "spec": pod_spec}


def _and(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return {key: [*(a.get(key) or ()), *(b.get(key) or ())] for key in ("matchExpressions", "matchFields")}
