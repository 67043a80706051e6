"""``placement.corral.dev/v1``: Placement, copies of one pod template placed on nodes by a policy,
as Kubernetes Fleet places resources on clusters.

::

    apiVersion: placement.corral.dev/v1
    kind: Placement
    metadata: {name: cache}
    spec:
      template: {metadata: {labels: {app: cache}}, spec: {containers: [...]}}
      policy:
        placementType: PickN            # PickAll (default) | PickN | PickFixed
        numberOfNodes: 3                # PickN
        nodeNames: []                   # PickFixed
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [...]}
            preferredDuringSchedulingIgnoredDuringExecution:
            - {weight: 50, preference: {matchExpressions: [...]}}                 # -100..100
            - {weight: 100, propertySorter: {name: network/download, sortOrder: Descending}}
        topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone}]   # PickN
        tolerations: []
      strategy:
        type: RollingUpdate
        rollingUpdate: {maxUnavailable: 25%, maxSurge: 25%, unavailablePeriodSeconds: 60}

Models, defaults and validation; the decision is :mod:`corral.scheduler.batch`. No I/O here.
"""

from __future__ import annotations

from typing import Any, Callable

import hashlib
import json

import msgspec

from corral.api.kinds.apps import PodTemplateSpec, WorkloadCondition
from corral.api.models import Model, NodeSelector, NodeSelectorTerm, ObjectMeta, Toleration, TopologySpreadConstraint

__all__ = ["policy_hash", "snapshot_name", "DECISION_STATES", "PLACEMENT_LABEL", "POLICY_INDEX_LABEL",
           "NUMBER_OF_NODES_ANNOTATION", "Placement", "PlacementSpec", "PlacementPolicy", "PlacementStatus", "NodeDecision", "PLACEMENT_DEFAULTS",
           "PLACEMENT_CHECKS", "PLACEMENT_UPDATE_CHECKS", "PLACEMENT_TYPES", "MAX_NODE_NAMES", "PROPERTIES"]

PLACEMENT_TYPES = ("PickAll", "PickN", "PickFixed")
SORT_ORDERS = ("Ascending", "Descending")
DEFAULT_UNAVAILABLE_PERIOD = 60  # seconds a copy must have run before it counts as available (Fleet's)
DEFAULT_BUDGET = "25%"  # maxUnavailable and maxSurge
MAX_NODE_NAMES = 10_000
# Node numbers a property sorter may name. ``allocatable/R``, ``available/R`` and ``capacity/R``
# (``status.capacity``) take any resource R the nodes report (cpu in millicores, memory in bytes,
# an extended resource in its units);
# ``network/download`` is the throughput the agent measured (bytes/s; unmeasured nodes get no score).
PROPERTIES = ("allocatable/", "available/", "capacity/", "network/download")
# A decision's state, as Kubernetes Fleet's bindings: the scheduler selected the node (Scheduled), a
# copy is bound there (Bound), or the node was let go while its copy still runs (Unscheduled).
DECISION_STATES = ("Scheduled", "Bound", "Unscheduled")
# Policy snapshots: each policy a Placement had is kept as a ControllerRevision in its namespace,
# owned by it, named after the policy's hash, labelled with the Placement and the snapshot's index.
PLACEMENT_LABEL = "placement.corral.dev/name"
POLICY_INDEX_LABEL = "placement.corral.dev/policy-index"
NUMBER_OF_NODES_ANNOTATION = "placement.corral.dev/number-of-nodes"


def policy_hash(placement: dict[str, Any]) -> str:
    """The policy without its count, hashed: a change of it is a new policy, decided afresh; a
    change of ``numberOfNodes`` alone only scales."""
    policy = dict(((placement.get("spec") or {}).get("policy")) or {})
    policy.pop("numberOfNodes", None)
    return hashlib.sha256(json.dumps(policy, sort_keys=True).encode()).hexdigest()[:16]


def snapshot_name(placement: dict[str, Any]) -> str:
    """The name of the snapshot of the Placement's current policy (both the scheduler, which decides
    for it, and the controller, which keeps it, derive it: neither waits for the other)."""
    return f"{placement['metadata']['name'][:242]}-{policy_hash(placement)[:10]}"


class PropertySorter(Model):
    name: str | None = None
    sort_order: str | None = None


class PlacementPreference(Model):
    """A preferred term: ``weight`` for the nodes ``preference`` matches, or scaled by ``propertySorter``."""

    weight: int | None = None
    preference: NodeSelectorTerm | None = None
    property_sorter: PropertySorter | None = None


class PlacementNodeAffinity(Model):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PlacementPreference] | None = None


class PlacementAffinity(Model):
    node_affinity: PlacementNodeAffinity | None = None


class PlacementPolicy(Model):
    placement_type: str | None = None
    number_of_nodes: int | None = None
    node_names: list[str] | None = None
    affinity: PlacementAffinity | None = None
    topology_spread_constraints: list[TopologySpreadConstraint] | None = None
    tolerations: list[Toleration] | None = None


class RollingUpdatePlacement(Model):
    max_unavailable: int | str | None = None
    max_surge: int | str | None = None
    unavailable_period_seconds: int | None = None


class PlacementStrategy(Model):
    type: str | None = None
    rolling_update: RollingUpdatePlacement | None = None


class PlacementSpec(Model):
    template: PodTemplateSpec | None = None
    policy: PlacementPolicy | None = None
    strategy: PlacementStrategy | None = None


class NodeDecision(Model):
    node_name: str | None = None
    selected: bool | None = None
    score: float | None = None
    scores: dict[str, float] | None = None  # the score by plugin and preferred term
    reason: str | None = None
    state: str | None = None  # Scheduled | Bound | Unscheduled (DECISION_STATES)
    policy_snapshot: str | None = None  # an Unscheduled decision's snapshot, when not the current one


class PlacementStatus(Model):
    observed_generation: int | None = None
    policy_hash: str | None = None  # the policy (less numberOfNodes) the decisions were taken for
    policy_snapshot: str | None = None  # the ControllerRevision that keeps that policy
    conditions: list[WorkloadCondition] | None = None
    decisions: list[NodeDecision] | None = None
    desired: int | None = None
    scheduled: int | None = None
    bound: int | None = None
    available: int | None = None
    message: str | None = None


class Placement(Model, tag_field="kind", tag="Placement"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: PlacementSpec | None = None
    status: PlacementStatus | None = None


def _defaults(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    policy = spec.setdefault("policy", {})
    if isinstance(policy, dict):
        policy.setdefault("placementType", "PickAll")
        for c in policy.get("topologySpreadConstraints") or ():
            if isinstance(c, dict):
                c.setdefault("whenUnsatisfiable", "DoNotSchedule")
    strategy = spec.setdefault("strategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            if isinstance(rolling, dict):
                rolling.setdefault("maxUnavailable", DEFAULT_BUDGET)
                rolling.setdefault("maxSurge", DEFAULT_BUDGET)
                rolling.setdefault("unavailablePeriodSeconds", DEFAULT_UNAVAILABLE_PERIOD)


def _policy(policy: PlacementPolicy | None) -> list:
    from corral.api.validation import FORBIDDEN, REQUIRED, Cause, _invalid, _not_supported, _spread, _tolerations, \
        dns1123_subdomain, required_node_selector

    p = "spec.policy"
    policy = policy or PlacementPolicy()
    kind = policy.placement_type or "PickAll"
    if kind not in PLACEMENT_TYPES:
        return [_not_supported(f"{p}.placementType", policy.placement_type, PLACEMENT_TYPES)]
    causes = []
    if kind == "PickN":
        if policy.number_of_nodes is None:
            causes.append(Cause(f"{p}.numberOfNodes", REQUIRED, "Required value: PickN needs numberOfNodes"))
        elif policy.number_of_nodes < 0:
            causes.append(_invalid(f"{p}.numberOfNodes", policy.number_of_nodes, "must be greater than or equal to 0"))
    elif policy.number_of_nodes is not None:
        causes.append(Cause(f"{p}.numberOfNodes", FORBIDDEN, f"Forbidden: only PickN takes numberOfNodes, not {kind}"))
    if kind == "PickFixed":
        names = policy.node_names or []
        if not names:
            causes.append(Cause(f"{p}.nodeNames", REQUIRED, "Required value: PickFixed needs at least one node name"))
        elif len(names) > MAX_NODE_NAMES:
            causes.append(_invalid(f"{p}.nodeNames", len(names), f"must have at most {MAX_NODE_NAMES} items"))
        seen: set[str] = set()
        for i, name in enumerate(names[:MAX_NODE_NAMES]):
            causes += dns1123_subdomain(f"{p}.nodeNames[{i}]", name)
            if name in seen:
                causes.append(Cause(f"{p}.nodeNames[{i}]", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
            seen.add(name)
        for field in ("affinity", "topologySpreadConstraints"):
            if getattr(policy, "affinity" if field == "affinity" else "topology_spread_constraints"):
                causes.append(Cause(f"{p}.{field}", FORBIDDEN, f"Forbidden: PickFixed names its nodes; {field} "
                                    "does not apply"))
    elif policy.node_names:
        causes.append(Cause(f"{p}.nodeNames", FORBIDDEN, f"Forbidden: only PickFixed takes nodeNames, not {kind}"))
    if policy.topology_spread_constraints and kind == "PickAll":
        causes.append(Cause(f"{p}.topologySpreadConstraints", FORBIDDEN,
                            "Forbidden: PickAll takes every eligible node; only PickN spreads"))
    # Checked as the server checks them, before the defaults: whenUnsatisfiable may be left out.
    spread = [msgspec.structs.replace(c, when_unsatisfiable=c.when_unsatisfiable or "DoNotSchedule")
              for c in policy.topology_spread_constraints or ()]
    causes += _spread(f"{p}.topologySpreadConstraints", spread)
    causes += _tolerations(f"{p}.tolerations", policy.tolerations)
    node_affinity = (policy.affinity or PlacementAffinity()).node_affinity
    if node_affinity is not None:
        causes += required_node_selector(f"{p}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                                         node_affinity.required_during_scheduling_ignored_during_execution)
        path = f"{p}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        for i, pref in enumerate(node_affinity.preferred_during_scheduling_ignored_during_execution or ()):
            causes += _preference(f"{path}[{i}]", pref)
    return causes


def _preference(path: str, pref: PlacementPreference) -> list:
    from corral.api.validation import REQUIRED, Cause, _invalid, _node_selector_term, _not_supported

    causes = []
    if pref.weight is None or not -100 <= pref.weight <= 100:
        causes.append(_invalid(f"{path}.weight", pref.weight, "must be in the range -100 to 100"))
    if (pref.preference is None) == (pref.property_sorter is None):
        causes.append(Cause(path, REQUIRED, "Required value: exactly one of preference and propertySorter"))
    causes += _node_selector_term(f"{path}.preference", pref.preference)
    sorter = pref.property_sorter
    if sorter is not None:
        name = sorter.name or ""
        if not any((name.startswith(p) and len(name) > len(p)) if p.endswith("/") else name == p for p in PROPERTIES):
            causes.append(_invalid(f"{path}.propertySorter.name", sorter.name,
                                   "must be allocatable/RESOURCE, available/RESOURCE, capacity/RESOURCE or "
                                   "network/download"))
        if sorter.sort_order not in SORT_ORDERS:
            causes.append(_not_supported(f"{path}.propertySorter.sortOrder", sorter.sort_order, SORT_ORDERS))
    return causes


def _strategy(strategy: PlacementStrategy | None) -> list:
    from corral.api.kinds.apps_validation import _rolling_update, non_negative
    from corral.api.validation import FORBIDDEN, Cause, _not_supported

    if strategy is None:
        return []
    kinds = ("RollingUpdate",)
    if strategy.type not in (None, *kinds):
        return [_not_supported("spec.strategy.type", strategy.type, kinds)]
    rolling = strategy.rolling_update
    if rolling is None:
        return []
    if (strategy.type or "RollingUpdate") != "RollingUpdate":
        return [Cause("spec.strategy.rollingUpdate", FORBIDDEN, "Forbidden: only RollingUpdate takes it")]
    # Checked before the defaults, as the server checks: a budget left out is its default, 25 %.
    rolling = msgspec.structs.replace(
        rolling, max_unavailable=DEFAULT_BUDGET if rolling.max_unavailable is None else rolling.max_unavailable,
        max_surge=DEFAULT_BUDGET if rolling.max_surge is None else rolling.max_surge)
    return (_rolling_update("spec.strategy.rollingUpdate", rolling)
            + non_negative("spec.strategy.rollingUpdate.unavailablePeriodSeconds", rolling.unavailable_period_seconds))


def _check(placement: Placement) -> list:
    from corral.api.kinds.apps_validation import pod_template

    spec = placement.spec or PlacementSpec()
    return pod_template(spec.template, None) + _policy(spec.policy) + _strategy(spec.strategy)


def _check_update(kind: str, current: dict[str, Any], new: dict[str, Any]) -> list:
    """The placement type is fixed once created: a PickAll that became a PickN would re-decide
    every node at once (delete the Placement and create it anew to change it)."""
    from corral.api.validation import INVALID, Cause

    def placement_type(obj: dict[str, Any]) -> Any:
        spec = obj.get("spec")
        policy = spec.get("policy") if isinstance(spec, dict) else None
        return (policy.get("placementType") if isinstance(policy, dict) else None) or "PickAll"

    old, now = placement_type(current), placement_type(new)
    if old != now:
        return [Cause("spec.policy.placementType", INVALID, f"Invalid value: {now!r}: field is immutable (was {old!r})")]
    return []


PLACEMENT_DEFAULTS: dict[str, Callable[[dict[str, Any]], None]] = {"Placement": _defaults}
PLACEMENT_CHECKS: dict[str, Callable[[Any], list]] = {"Placement": _check}
PLACEMENT_UPDATE_CHECKS: dict[str, Callable[[str, dict[str, Any], dict[str, Any]], list]] = {"Placement": _check_update}
