"""The Placement kind (placement.corral.dev/v1): Fleet's policy fields validated by path, defaults
filled in, the placement type fixed once created."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from corral.api.defaults import apply_create_defaults
from corral.api.resources import by_kind
from corral.api.validation import update_causes, validate

PLACEMENT = by_kind("Placement")
GPU_TERM = {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}


def placement(**policy: Any) -> dict[str, Any]:
    return {"apiVersion": "placement.corral.dev/v1", "kind": "Placement", "metadata": {"name": "web"},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                     "policy": policy}}


def bad_fields(obj: dict[str, Any]) -> set[str]:
    """As the server checks a create: before the defaults."""
    return {c.field for c in validate(PLACEMENT, obj)[1]}


def preferred(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": list(entries)}}


@pytest.mark.parametrize("obj, fields", [
    pytest.param(placement(), set(), id="a placement with no policy is PickAll"),
    pytest.param(placement(placementType="PickN", numberOfNodes=3), set(), id="PickN with a count is valid"),
    pytest.param(placement(placementType="PickN"), {"spec.policy.numberOfNodes"}, id="PickN needs numberOfNodes"),
    pytest.param(placement(placementType="PickN", numberOfNodes=-1), {"spec.policy.numberOfNodes"},
                 id="a negative count is refused"),
    pytest.param(placement(placementType="PickAll", numberOfNodes=2), {"spec.policy.numberOfNodes"},
                 id="only PickN takes numberOfNodes"),
    pytest.param(placement(placementType="PickSome"), {"spec.policy.placementType"}, id="an unknown type is named"),
    pytest.param(placement(placementType="PickFixed"), {"spec.policy.nodeNames"}, id="PickFixed needs node names"),
    pytest.param(placement(placementType="PickFixed", nodeNames=["a", "B_2", "a"]),
                 {"spec.policy.nodeNames[1]", "spec.policy.nodeNames[2]"},
                 id="node names must be names, each once"),
    pytest.param(placement(placementType="PickFixed", nodeNames=["a"], affinity=preferred({"weight": 1, "preference": GPU_TERM})),
                 {"spec.policy.affinity"}, id="PickFixed takes no affinity"),
    pytest.param(placement(nodeNames=["a"]), {"spec.policy.nodeNames"}, id="only PickFixed takes nodeNames"),
    pytest.param(placement(topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone"}]),
                 {"spec.policy.topologySpreadConstraints"}, id="PickAll does not spread"),
    pytest.param(placement(placementType="PickN", numberOfNodes=3,
                           topologySpreadConstraints=[{"maxSkew": 0, "topologyKey": "zone"}]),
                 {"spec.policy.topologySpreadConstraints[0].maxSkew"}, id="spread constraints are checked as a pod's"),
    pytest.param(placement(affinity=preferred({"weight": -100, "preference": GPU_TERM},
                                              {"weight": 100, "propertySorter": {"name": "allocatable/nvidia.com/gpu",
                                                                                 "sortOrder": "Ascending"}})),
                 set(), id="weights run from -100 to 100 and sorters name a node number"),
    pytest.param(placement(affinity=preferred({"weight": 101, "preference": GPU_TERM})),
                 {"spec.policy.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"},
                 id="a weight beyond 100 is refused"),
    pytest.param(placement(affinity=preferred({"weight": 5})),
                 {"spec.policy.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"},
                 id="a preferred term needs a preference or a sorter"),
    pytest.param(placement(affinity=preferred({"weight": 5, "preference": GPU_TERM,
                                               "propertySorter": {"name": "network/download", "sortOrder": "Ascending"}})),
                 {"spec.policy.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"},
                 id="a preferred term takes one of them, not both"),
    pytest.param(placement(affinity=preferred({"weight": 5, "propertySorter": {"name": "allocatable/",
                                                                               "sortOrder": "Up"}})),
                 {"spec.policy.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].propertySorter.name",
                  "spec.policy.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].propertySorter.sortOrder"},
                 id="a sorter needs a known number and an order"),
    pytest.param(placement(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Near"}]}]}}}),
                 {"spec.policy.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
                  ".matchExpressions[0].operator"}, id="required terms are checked as a pod's"),
    pytest.param(placement(tolerations=[{"key": "a", "operator": "Maybe"}]), {"spec.policy.tolerations[0].operator"},
                 id="tolerations are checked as a pod's"),
])
def test_placement_validation_names_every_bad_field(obj, fields):
    assert bad_fields(obj) == fields


def test_the_template_is_checked_as_a_pod_and_the_strategy_as_a_rolling_update():
    obj = placement()
    obj["spec"]["template"]["spec"]["containers"] = []
    obj["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0,
                                                                          "unavailablePeriodSeconds": -1}}
    assert bad_fields(obj) == {"spec.template.spec.containers", "spec.strategy.rollingUpdate.maxUnavailable",
                               "spec.strategy.rollingUpdate.unavailablePeriodSeconds"}
    obj["spec"]["strategy"] = {"type": "Recreate"}
    assert "spec.strategy.type" in bad_fields(obj)
    obj["spec"]["template"]["spec"]["containers"] = [{"name": "c", "image": "busybox"}]
    obj["spec"]["strategy"] = {"rollingUpdate": {"maxSurge": 1}}  # the type left to its default
    assert bad_fields(obj) == set()
    obj["spec"]["strategy"] = {"rollingUpdate": {"unavailablePeriodSeconds": 0}}  # both budgets at their 25 %
    assert bad_fields(obj) == set()


def test_defaults_fill_the_type_the_spread_rule_and_the_rolling_update():
    obj = placement(placementType="PickN", numberOfNodes=2, topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "z"}])
    del obj["spec"]["policy"]["placementType"]
    apply_create_defaults(PLACEMENT, obj, "default")
    spec = obj["spec"]
    assert spec["policy"]["placementType"] == "PickAll"
    assert spec["policy"]["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "DoNotSchedule"
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {
        "maxUnavailable": "25%", "maxSurge": "25%", "unavailablePeriodSeconds": 60}}
    assert spec["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"  # the template as a pod


def test_the_placement_type_is_fixed_once_created_and_the_rest_may_change():
    old = placement(placementType="PickN", numberOfNodes=2)
    new = copy.deepcopy(old)
    new["spec"]["policy"]["numberOfNodes"] = 5
    assert update_causes(PLACEMENT, old, new) == []
    new["spec"]["policy"] = {"placementType": "PickAll"}
    (cause,) = update_causes(PLACEMENT, old, new)
    assert (cause.field, cause.message) == ("spec.policy.placementType",
                                            "Invalid value: 'PickAll': field is immutable (was 'PickN')")
