"""Batch decisions for Placements: every node filtered and scored once, then PickAll, PickN (with
spread) or PickFixed; nodes holding a copy are kept; every node left out has its reason."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from corral.api.defaults import apply_create_defaults
from corral.api.resources import by_kind
from corral.scheduler.batch import decide, decision_pod
from corral.scheduler.batch.decide import KEPT, NOT_FOUND
from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import Harness

ZONE = "topology.kubernetes.io/zone"
PLACEMENTS = by_kind("Placement")


def placement(policy: dict[str, Any], cpu: str = "1", **template_spec: Any) -> dict[str, Any]:
    """A Placement as the server stores it (with the API's defaults), whose uid the tests know."""
    pod = make_pod("t").requests(cpu=cpu).obj
    obj = {"apiVersion": "placement.corral.dev/v1", "kind": "Placement", "metadata": {"name": "web"},
           "spec": {"policy": copy.deepcopy(policy), "template": {"metadata": {"labels": {"app": "web"}},
                                                                  "spec": {**pod["spec"], **template_spec}}}}
    apply_create_defaults(PLACEMENTS, obj, "default")
    obj["metadata"]["uid"] = "uid-web"
    return obj


def node(name: str, cpu: int = 4, **labels: str):
    return make_node(name).capacity(cpu=cpu, memory="16Gi", pods=20).labels(**labels)


def run(nodes: list, policy: dict[str, Any], *, pods: list = (), keep: tuple[str, ...] = (), unselected_limit: int = 20,
        **kw: Any):
    h = Harness()
    for n in nodes:
        h.add_node(n.heartbeat_age(0))
    for p in pods:
        h.add_pod(p)
    return decide(h.scheduler.frameworks["default-scheduler"], h.scheduler.cache, placement(policy, **kw), keep=keep,
                  unselected_limit=unselected_limit)


def reasons(result) -> dict[str, str]:
    return {d.node: d.reason for d in result.decisions if not d.selected}


# --- PickAll ------------------------------------------------------------------------------------------


def test_pick_all_takes_every_node_a_copy_fits_and_says_why_not_for_the_others():
    result = run([node("a"), node("b"), node("small", cpu=0), node("tainted").taint("gpu", "yes"),
                  node("cordoned").unschedulable()], {"placementType": "PickAll"})
    assert sorted(result.selected) == ["a", "b"]
    assert reasons(result) == {
        "small": "NodeResourcesFit: Insufficient cpu",
        "tainted": "TaintToleration: node(s) had untolerated taint(s)",
        "cordoned": "NodeUnschedulable: node(s) were unschedulable"}
    assert result.summary == ("2/5 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s), "
                              "1 node(s) were unschedulable. PickAll: 2 node(s) selected.")


@pytest.mark.parametrize("policy", [{"placementType": "PickAll"},
                                    {"placementType": "PickFixed", "nodeNames": ["a", "short"]}])
def test_a_node_one_plugin_refuses_for_several_reasons_names_them_all(policy):
    short = make_node("short").capacity(cpu=0, memory="0", pods=20)
    result = run([node("a"), short], policy, containers=[
        {"name": "c", "image": "registry.local/app:1", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}])
    assert reasons(result) == {"short": "NodeResourcesFit: Insufficient cpu, Insufficient memory"}


def test_the_policys_required_terms_and_tolerations_add_to_the_templates_own():
    nodes = [node("gpu-a", gpu="yes", disk="ssd"), node("gpu-b", gpu="yes").taint("dedicated", "ml"),
             node("cpu", disk="ssd")]
    policy = {"placementType": "PickAll",
              "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                  "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["yes"]}]}]}}},
              "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]}
    assert sorted(run(nodes, policy).selected) == ["gpu-a", "gpu-b"]
    own = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}]}}}
    assert run(nodes, policy, affinity=own).selected == ["gpu-a"]  # both the template's and the policy's


def test_the_decision_pod_is_one_copy_of_the_template_named_after_the_placement():
    pod = decision_pod(placement({"placementType": "PickAll", "tolerations": [{"operator": "Exists"}]},
                                 tolerations=[{"key": "a", "operator": "Exists"}]))
    assert pod["metadata"] == {"labels": {"app": "web"}, "name": "web", "namespace": "default", "uid": "uid-web"}
    assert pod["spec"]["tolerations"] == [{"key": "a", "operator": "Exists"}, {"operator": "Exists"}]


# --- PickN --------------------------------------------------------------------------------------------


def test_pick_n_takes_the_best_scored_nodes():
    # LeastAllocated prefers the emptiest nodes: the two with the most free cpu.
    result = run([node("n2", cpu=2), node("n8", cpu=8), node("n4", cpu=4), node("n16", cpu=16)],
                 {"placementType": "PickN", "numberOfNodes": 2})
    assert result.selected == ["n16", "n8"]
    assert [d.score for d in result.decisions[:2]] == sorted((d.score for d in result.decisions[:2]), reverse=True)
    assert reasons(result)["n4"].startswith("not among the 2 best (score ")
    assert result.summary.endswith("PickN: 2 of 2 node(s) selected.")


def test_pick_n_over_three_zones_with_max_skew_one_picks_the_best_node_of_each_zone():
    nodes = [node(f"{zone}-{size}", cpu=size, **{ZONE: zone}) for zone in ("a", "b", "c") for size in (4, 8, 16)]
    nodes.append(node("a-32", cpu=32, **{ZONE: "a"}))  # the best node of all is in zone a
    policy = {"placementType": "PickN", "numberOfNodes": 3,
              "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]}
    result = run(nodes, policy)
    assert result.selected == ["a-32", "b-16", "c-16"]
    assert reasons(result)["a-16"] == "not among the 3 best (score 191.0)"  # a fourth copy could go there


def test_pick_n_stops_short_rather_than_break_a_hard_spread_constraint():
    nodes = [node("a-1", cpu=32, **{ZONE: "a"}), node("a-2", cpu=32, **{ZONE: "a"}), node("a-3", cpu=32, **{ZONE: "a"}),
             node("b-1", cpu=4, **{ZONE: "b"})]
    policy = {"placementType": "PickN", "numberOfNodes": 4,
              "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]}
    result = run(nodes, policy)
    assert result.selected == ["a-1", "b-1", "a-2"]
    assert reasons(result)["a-3"] == f"topology spread: another copy in its {ZONE} would exceed maxSkew 1"
    assert result.summary.endswith("PickN: 3 of 4 node(s) selected.")


def test_a_hard_spread_constraint_leaves_out_nodes_without_the_key_and_may_select_fewer_than_asked():
    nodes = [node("a", **{ZONE: "a"}), node("b", **{ZONE: "b"}), node("plain", cpu=64)]
    policy = {"placementType": "PickN", "numberOfNodes": 4,
              "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE}]}
    result = run(nodes, policy)
    assert sorted(result.selected) == ["a", "b"]
    assert reasons(result)["plain"] == f"topology spread: the node has no {ZONE} label"
    assert result.summary.endswith("PickN: 2 of 4 node(s) selected.")


def test_a_soft_spread_constraint_prefers_spreading_but_still_fills_the_count():
    nodes = [node("a-1", cpu=16, **{ZONE: "a"}), node("a-2", cpu=16, **{ZONE: "a"}), node("b-1", cpu=4, **{ZONE: "b"})]
    policy = {"placementType": "PickN", "numberOfNodes": 3,
              "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}]}
    result = run(nodes, policy)
    assert result.selected[:2] == ["a-1", "b-1"] and sorted(result.selected) == ["a-1", "a-2", "b-1"]
    region = "topology.kubernetes.io/region"
    nodes = [n.labels(**{region: "r"}) for n in nodes]
    policy["topologySpreadConstraints"].append(  # one region: always kept; the zone one still counts
        {"maxSkew": 1, "topologyKey": region, "whenUnsatisfiable": "ScheduleAnyway"})
    assert run(nodes, policy).selected[:2] == ["a-1", "b-1"]


def test_a_soft_spread_constraint_is_never_the_reason_a_node_is_left_out():
    nodes = [node(f"a-{i}", cpu=16, **{ZONE: "a"}) for i in (1, 2, 3)] + [node("b-1", cpu=4, **{ZONE: "b"})]
    policy = {"placementType": "PickN", "numberOfNodes": 3,
              "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}]}
    result = run(nodes, policy)
    assert sorted(result.selected) == ["a-1", "a-2", "b-1"]
    assert "topology spread" not in reasons(result)["a-3"]  # a third copy in zone a only lowers its score


def test_a_node_left_out_by_spreading_names_the_constraint_it_would_break():
    region = "topology.kubernetes.io/region"
    nodes = [node(f"a-{i}", cpu=32, **{ZONE: "a", region: "r"}) for i in (1, 2, 3)] + [
        node("b-1", cpu=4, **{ZONE: "b", region: "r"})]
    policy = {"placementType": "PickN", "numberOfNodes": 4, "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "ScheduleAnyway"},  # soft: no node has it
        {"maxSkew": 1, "topologyKey": region},  # one region: never broken
        {"maxSkew": 1, "topologyKey": ZONE}]}
    result = run(nodes, policy)
    assert reasons(result)["a-3"] == f"topology spread: another copy in its {ZONE} would exceed maxSkew 1"
    policy["topologySpreadConstraints"].reverse()  # the broken one first: every hard constraint counts
    assert sorted(run(nodes, policy).selected) == ["a-1", "a-2", "b-1"]


def test_a_spread_over_no_nodes_selects_none():
    policy = {"placementType": "PickN", "numberOfNodes": 2, "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE}]}
    result = run([], policy)
    assert result.selected == [] and result.decisions == []


def test_a_spread_over_a_key_no_node_has_selects_none_and_says_why():
    policy = {"placementType": "PickN", "numberOfNodes": 2,
              "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE}]}
    result = run([node("a"), node("b")], policy)
    assert result.selected == [] and set(reasons(result).values()) == {f"topology spread: the node has no {ZONE} label"}


def test_scaling_out_keeps_the_nodes_that_hold_copies_and_adds_the_best_others():
    nodes = [node("n4", cpu=4), node("n8", cpu=8), node("n16", cpu=16), node("n32", cpu=32), node("n64", cpu=64)]
    result = run(nodes, {"placementType": "PickN", "numberOfNodes": 5}, keep=("n4", "n8", "n16"))
    assert sorted(result.selected) == ["n16", "n32", "n4", "n64", "n8"]
    result = run(nodes, {"placementType": "PickN", "numberOfNodes": 4}, keep=("n4", "n8", "n16"))
    assert sorted(result.selected) == ["n16", "n4", "n64", "n8"]  # the three kept, though n32 scores higher than two


def test_scaling_in_lets_go_of_the_lowest_scored_copies():
    nodes = [node("n4", cpu=4), node("n8", cpu=8), node("n16", cpu=16), node("n32", cpu=32), node("n64", cpu=64)]
    result = run(nodes, {"placementType": "PickN", "numberOfNodes": 2}, keep=("n4", "n8", "n16", "n32", "n64"))
    assert result.selected == ["n64", "n32"]
    assert reasons(result)["n4"] == "scaled down: the copies on better-scored nodes are kept"


def test_a_node_holding_a_copy_keeps_it_after_its_labels_or_taints_stop_fitting():
    nodes = [node("gpu", gpu="yes"), node("relabelled"), node("tainted", gpu="yes").taint("drain", "now"),
             node("cordoned", gpu="yes").unschedulable(), node("new-cordoned", gpu="yes").unschedulable()]
    policy = {"placementType": "PickAll", "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}}}
    result = run(nodes, policy, keep=("relabelled", "tainted", "cordoned", "gone"))
    assert sorted(result.selected) == ["cordoned", "gpu", "relabelled", "tainted"]  # new-cordoned gets none
    assert {d.node: d.reason for d in result.decisions if d.selected} == {
        "gpu": "", "relabelled": KEPT, "tainted": KEPT, "cordoned": KEPT}


# --- preferences --------------------------------------------------------------------------------------


def test_a_property_sorter_on_measured_download_picks_the_fastest_node_and_the_score_says_why():
    nodes = [node("slow").download("10Mbps"), node("fast").download("1000Mbps"), node("mid").download("100Mbps"),
             node("unmeasured")]
    policy = {"placementType": "PickN", "numberOfNodes": 1, "affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "propertySorter": {"name": "network/download", "sortOrder": "Descending"}}]}}}
    result = run(nodes, policy)
    assert result.selected == ["fast"]
    by_node = {d.node: d.scores["preference[0]"] for d in result.decisions}
    # Fleet's scaling: weight × (value − smallest) / (largest − smallest); no number, no score.
    assert by_node == {"fast": 100.0, "mid": pytest.approx(100 * 90 / 990), "slow": 0.0, "unmeasured": 0.0}


def test_nodes_with_the_same_number_all_earn_the_whole_weight():
    nodes = [node("x").download("100Mbps"), node("y").download("100Mbps")]
    policy = {"placementType": "PickAll", "affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 40, "propertySorter": {"name": "network/download", "sortOrder": "Ascending"}}]}}}
    assert {d.node: d.scores["preference[0]"] for d in run(nodes, policy).decisions} == {"x": 40.0, "y": 40.0}


@pytest.mark.parametrize("order, expected", [
    pytest.param("Ascending", "small", id="ascending: the smallest number earns the whole weight"),
    pytest.param("Descending", "large", id="descending: the largest number earns the whole weight"),
])
def test_a_property_sorter_on_allocatable_memory_orders_both_ways(order, expected):
    nodes = [make_node("small").capacity(cpu=4, memory="8Gi", pods=20), make_node("large").capacity(cpu=4, memory="64Gi", pods=20)]
    policy = {"placementType": "PickN", "numberOfNodes": 1, "affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "propertySorter": {"name": "allocatable/memory", "sortOrder": order}}]}}}
    result = run(nodes, policy)
    assert result.selected == [expected]
    assert {d.node: d.scores["preference[0]"] for d in result.decisions}[expected] == 100.0


@pytest.mark.parametrize("number, expected", [
    pytest.param("capacity/example.com/gpu", "big", id="capacity: what the node has"),
    pytest.param("allocatable/example.com/gpu", "free", id="allocatable: what pods may use of it"),
])
def test_a_property_sorter_reads_an_extended_resources_capacity_or_allocatable(number, expected):
    def gpu_node(name: str, capacity: str | None, allocatable: str | None):
        obj = node(name).obj
        if capacity is not None:
            obj["status"]["capacity"]["example.com/gpu"] = capacity
        if allocatable is not None:
            obj["status"]["allocatable"]["example.com/gpu"] = allocatable
        return obj

    nodes = [gpu_node("big", "8", "1"), gpu_node("free", "4", "4"), gpu_node("none", None, None)]
    policy = {"placementType": "PickN", "numberOfNodes": 1, "affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 80, "propertySorter": {"name": number, "sortOrder": "Descending"}}]}}}
    h = Harness()
    for n in nodes:
        n["status"]["conditions"] = node("x").heartbeat_age(0).obj["status"]["conditions"]
        h.add_node(n)
    result = decide(h.scheduler.frameworks["default-scheduler"], h.scheduler.cache, placement(policy))
    assert result.selected == [expected]
    by_node = {d.node: d.scores["preference[0]"] for d in result.decisions}
    assert by_node[expected] == 80.0 and by_node["none"] == 0.0  # no such resource: the smallest number


def test_preferred_terms_add_their_weight_and_a_negative_weight_pushes_a_node_back():
    nodes = [node("ssd-big", cpu=16, disk="ssd", old="yes"), node("ssd", cpu=8, disk="ssd"), node("big", cpu=32)]
    prefer = [{"weight": 60, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}},
              {"weight": -80, "preference": {"matchExpressions": [{"key": "old", "operator": "Exists"}]}}]
    result = run(nodes, {"placementType": "PickN", "numberOfNodes": 1,
                         "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": prefer}}})
    assert result.selected == ["ssd"]
    scores = {d.node: (d.scores["preference[0]"], d.scores["preference[1]"]) for d in result.decisions}
    assert scores == {"ssd-big": (60.0, -80.0), "ssd": (60.0, 0.0), "big": (0.0, 0.0)}


# --- PickFixed ----------------------------------------------------------------------------------------


def test_pick_fixed_places_the_named_nodes_that_fit_and_gives_a_reason_for_each_other():
    result = run([node("a"), node("b"), node("tiny", cpu=0), node("unnamed")],
                 {"placementType": "PickFixed", "nodeNames": ["a", "tiny", "missing", "b"]})
    assert sorted(result.selected) == ["a", "b"]
    assert reasons(result) == {"tiny": "NodeResourcesFit: Insufficient cpu", "missing": NOT_FOUND}
    assert result.summary.endswith("PickFixed: 2 of 4 node(s) selected.")


def test_pick_fixed_naming_only_nodes_the_cluster_does_not_have_selects_none_and_says_so():
    result = run([node("a"), node("b")], {"placementType": "PickFixed", "nodeNames": ["gone", "never"]})
    assert result.selected == []
    assert reasons(result) == {"gone": NOT_FOUND, "never": NOT_FOUND}
    assert result.summary.endswith("PickFixed: 0 of 2 node(s) selected.")


def test_pick_fixed_gives_every_named_node_its_reason_past_the_listing_limit():
    names = [f"gone-{i:02d}" for i in range(8)]
    result = run([node("a")], {"placementType": "PickFixed", "nodeNames": names}, unselected_limit=5)
    assert [d.node for d in result.decisions] == names


def test_the_unselected_are_listed_up_to_a_limit_and_counted_in_full():
    nodes = [node(f"n{i:02d}", cpu=0) for i in range(30)] + [node("ok")]
    h = Harness()
    for n in nodes:
        h.add_node(n.heartbeat_age(0))
    result = decide(h.scheduler.frameworks["default-scheduler"], h.scheduler.cache, placement({"placementType": "PickAll"}),
                    unselected_limit=5)
    assert result.selected == ["ok"]
    assert result.summary == "1/31 nodes are available: 30 Insufficient cpu. PickAll: 1 node(s) selected."
    assert len(result.decisions) == 6


# --- the scheduler writes its decisions into the Placement's status ------------------------------------


def stored(policy: dict[str, Any], generation: int = 1, status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj = placement(policy)
    obj["metadata"].update(generation=generation, resourceVersion=str(10 + generation))
    obj["status"] = status or {}
    return obj


async def decided(h: Harness, obj: dict[str, Any]) -> dict[str, Any]:
    h.scheduler.placement_changed("default/web", obj)
    await h.scheduler.placements.write(h.writer)
    return h.writer.placement_statuses["default/web"]


def cluster(*nodes) -> Harness:
    h = Harness()
    for n in nodes:
        h.add_node(n.heartbeat_age(0))
    return h


async def test_a_placement_being_deleted_is_neither_decided_nor_written():
    h = cluster(make_node("a"))
    first = stored({"placementType": "PickAll"})
    first["metadata"]["deletionTimestamp"] = "2026-11-25T10:00:00Z"  # a finalizer holds it
    h.scheduler.placement_changed("default/web", first)  # first seen already leaving (a restart)
    await h.scheduler.placements.write(h.writer)
    assert h.writer.placement_statuses == {}
    status = await decided(h, stored({"placementType": "PickAll"}))
    assert status["decisions"] and h.writer.placement_statuses
    h.writer.placement_statuses.clear()
    leaving = stored({"placementType": "PickAll"}, generation=2, status=status)
    leaving["metadata"]["deletionTimestamp"] = "2026-11-25T10:00:00Z"
    h.scheduler.placement_changed("default/web", leaving)
    await h.scheduler.placements.write(h.writer)
    assert h.writer.placement_statuses == {}


async def test_a_new_placement_gets_its_decisions_counts_and_scheduled_condition():
    h = cluster(node("a", cpu=8), node("b", cpu=4), node("c", cpu=2))
    status = await decided(h, stored({"placementType": "PickN", "numberOfNodes": 2}))
    assert (status["observedGeneration"], status["desired"], status["scheduled"]) == (1, 2, 2)
    assert [(d["nodeName"], d["selected"]) for d in status["decisions"]] == [("a", True), ("b", True), ("c", False)]
    assert status["decisions"][2]["reason"].startswith("not among the 2 best")
    (condition,) = status["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("Scheduled", "True", "Scheduled")
    assert condition["message"] == status["message"] == "3/3 nodes are available. PickN: 2 of 2 node(s) selected."


async def test_a_node_no_copy_fits_is_listed_unselected_with_the_filters_reason_and_no_score():
    status = await decided(cluster(node("a"), node("small", cpu=0)), stored({"placementType": "PickAll"}))
    assert status["decisions"][1] == {"nodeName": "small", "selected": False,
                                      "reason": "NodeResourcesFit: Insufficient cpu"}


async def test_a_decisions_scores_in_the_status_are_rounded_to_hundredths_and_zeros_left_out():
    memory = {"low": "1000Mi", "a-little-more": "1001Mi", "more": "1300Mi", "most": "2000Mi"}
    h = cluster(*(make_node(name).capacity(cpu=4, memory=m, pods=20) for name, m in memory.items()))
    status = await decided(h, stored({"placementType": "PickAll", "affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "propertySorter": {"name": "allocatable/memory", "sortOrder": "Descending"}}]}}}))
    # shares of the weight: 0, 0.001 (0.00 when rounded: left out), 0.3, 1
    assert {d["nodeName"]: d["scores"].get("preference[0]") for d in status["decisions"]} == {
        "low": None, "a-little-more": None, "more": 0.3, "most": 1.0}


async def test_too_few_nodes_is_said_in_the_condition():
    h = cluster(node("a"))
    status = await decided(h, stored({"placementType": "PickN", "numberOfNodes": 3}))
    condition = status["conditions"][0]
    assert (condition["status"], condition["reason"]) == ("False", "NotEnoughNodes")
    assert (status["desired"], status["scheduled"]) == (3, 1)


async def test_a_node_that_joins_gets_a_copy_of_a_pick_all_placement_and_the_others_stay():
    h = cluster(node("a"), node("b"))
    first = await decided(h, stored({"placementType": "PickAll"}))
    h.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"}, status=first))
    h.add_node(node("c").heartbeat_age(0))
    await h.scheduler.placements.write(h.writer)
    assert sorted(d["nodeName"] for d in h.writer.placement_statuses["default/web"]["decisions"] if d["selected"]) == [
        "a", "b", "c"]


async def test_a_node_that_leaves_loses_its_copy_and_pick_n_fills_the_gap():
    h = cluster(node("a", cpu=16), node("b", cpu=8), node("c", cpu=4))
    first = await decided(h, stored({"placementType": "PickN", "numberOfNodes": 2}))
    assert [d["nodeName"] for d in first["decisions"] if d["selected"]] == ["a", "b"]
    h.scheduler.placement_changed("default/web", stored({"placementType": "PickN", "numberOfNodes": 2}, status=first))
    h.scheduler.node_changed("a", None)
    await h.scheduler.placements.write(h.writer)
    assert sorted(d["nodeName"] for d in h.writer.placement_statuses["default/web"]["decisions"] if d["selected"]) == [
        "b", "c"]


async def test_a_policy_changed_while_no_scheduler_ran_is_decided_afresh_and_a_restart_alone_moves_nothing():
    nodes = [node("n4", cpu=4), node("n8", cpu=8), node("n16", cpu=16)]
    status = await decided(cluster(*nodes), stored({"placementType": "PickN", "numberOfNodes": 1}))
    assert [d["nodeName"] for d in status["decisions"] if d["selected"]] == ["n16"]
    prefer = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n4"]}]}}]}}
    restarted = cluster(*nodes, node("n64", cpu=64))  # a new scheduler, which never saw the first policy
    again = await decided(restarted, stored({"placementType": "PickN", "numberOfNodes": 1}, generation=2, status=status))
    assert [d["nodeName"] for d in again["decisions"] if d["selected"]] == ["n16"]  # n64 is better, but n16 has the copy
    moved = await decided(cluster(*nodes), stored({"placementType": "PickN", "numberOfNodes": 1, "affinity": prefer},
                                                  generation=3, status=again))
    assert [d["nodeName"] for d in moved["decisions"] if d["selected"]] == ["n4"]
    assert moved["policyHash"] != again["policyHash"] == status["policyHash"]


async def test_a_scheduler_that_starts_decides_each_placement_once_and_writes_only_what_changed():
    status = await decided(cluster(node("a")), stored({"placementType": "PickAll"}))
    same = cluster(node("a"))  # restarted, nothing changed
    same.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"}, status=status))
    await same.scheduler.placements.write(same.writer)
    assert same.writer.placement_statuses == {}
    grown = cluster(node("a"), node("b"))  # restarted after a node joined
    grown.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"}, status=status))
    await grown.scheduler.placements.write(grown.writer)
    assert sorted(d["nodeName"] for d in grown.writer.placement_statuses["default/web"]["decisions"]) == ["a", "b"]


async def test_a_status_already_observed_is_not_decided_again_until_the_spec_or_the_nodes_change():
    h = cluster(node("a"))
    status = await decided(h, stored({"placementType": "PickAll"}))
    h.writer.placement_statuses.clear()
    h.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"}, status=status))
    await h.scheduler.placements.write(h.writer)
    assert h.writer.placement_statuses == {}  # its own status write came back: nothing to decide
    h.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"}, generation=2, status=status))
    await h.scheduler.placements.write(h.writer)
    assert h.writer.placement_statuses["default/web"]["observedGeneration"] == 2


async def test_scaling_keeps_the_nodes_with_copies_but_another_policy_decides_afresh():
    h = cluster(node("n4", cpu=4), node("n8", cpu=8), node("n16", cpu=16))
    status = await decided(h, stored({"placementType": "PickN", "numberOfNodes": 1}))
    assert [d["nodeName"] for d in status["decisions"] if d["selected"]] == ["n16"]
    h.add_node(node("n64", cpu=64).heartbeat_age(0))  # both better than n16 now
    h.add_node(node("n32", cpu=32).heartbeat_age(0))
    status = await decided(h, stored({"placementType": "PickN", "numberOfNodes": 2}, generation=2, status=status))
    assert sorted(d["nodeName"] for d in status["decisions"] if d["selected"]) == ["n16", "n64"]  # n16 kept
    status = await decided(h, stored({"placementType": "PickN", "numberOfNodes": 1}, generation=3, status=status))
    assert [d["nodeName"] for d in status["decisions"] if d["selected"]] == ["n64"]  # the lowest scored went
    prefer = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n4"]}]}}]}}
    status = await decided(h, stored({"placementType": "PickN", "numberOfNodes": 1, "affinity": prefer}, generation=4,
                                     status=status))
    assert [d["nodeName"] for d in status["decisions"] if d["selected"]] == ["n4"]  # a new policy: decided afresh


def test_a_placement_applied_to_a_running_server_shows_its_decisions(cluster_process, tmp_path):
    import json

    from tests.cli.test_cli import corral
    from tests.scheduler.test_end_to_end import manifests, node as api_node, wait_for

    kc = cluster_process.kubeconfig
    nodes = [api_node("fast"), api_node("slow"), api_node("other")]
    nodes[0]["status"]["network"] = {"throughput": {"download": "900Mbps"}}
    nodes[1]["status"]["network"] = {"throughput": {"download": "10Mbps"}}
    corral("apply", "-f", manifests(tmp_path, *nodes), kubeconfig=kc)
    obj = placement({"placementType": "PickN", "numberOfNodes": 1, "affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "propertySorter": {"name": "network/download", "sortOrder": "Descending"}}]}}})
    obj["metadata"] = {"name": "web"}
    corral("apply", "-f", manifests(tmp_path, obj), kubeconfig=kc)

    def status() -> dict | None:
        got = json.loads(corral("get", "placement", "web", "-o", "json", kubeconfig=kc).stdout)
        return got.get("status") if (got.get("status") or {}).get("decisions") else None

    decided = wait_for(status, what="the Placement's decisions")
    assert [(d["nodeName"], d["selected"]) for d in decided["decisions"]][0] == ("fast", True)
    assert (decided["desired"], decided["scheduled"]) == (1, 1)
    assert {c["type"]: c["status"] for c in decided["conditions"]}["Scheduled"] == "True"
    described = corral("describe", "placement", "web", kubeconfig=kc).stdout
    assert "Placement Type:   PickN" in described and "Number Of Nodes:  1" in described
    decision_lines = described.split("Decisions:")[1].splitlines()
    assert decision_lines[1].split() == ["Node", "Selected", "State", "Score", "Reason", "/", "Score", "By", "Plugin"]
    assert decision_lines[2].split()[:2] == ["fast", "yes"]
    assert decision_lines[2].split()[3] == f"{decided['decisions'][0]['score']:g}"
    assert "preference[0]=100" in decision_lines[2]
    explained = corral("explain", "placement", "web", kubeconfig=kc).stdout.splitlines()
    assert explained[0] == "Placement default/web: 3/3 nodes are available. PickN: 1 of 1 node(s) selected."
    assert explained[1] == "Selected: fast"
    why = {line.split()[0]: line for line in explained[3:]}
    assert "preference[0]=100" in why["fast"] and "not among the 1 best" in why["slow"]
    table = corral("get", "placements", kubeconfig=kc).stdout.splitlines()
    assert table[0].split() == ["NAME", "TYPE", "DESIRED", "SCHEDULED", "AVAILABLE", "AGE"]
    assert table[1].split()[:5] == ["web", "PickN", "1", "1", "0"]

    def copies() -> dict[str, str]:
        items = json.loads(corral("get", "pods", "-o", "json", kubeconfig=kc).stdout)["items"]
        return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in items
                if not p["metadata"].get("deletionTimestamp")}

    # The placement controller makes the copy, the scheduler binds it on the decided node.
    placed = wait_for(lambda: (lambda c: c if list(c.values()) == ["fast"] else None)(copies()), what="the copy bound")
    assert list(placed)[0].startswith("web-")
    bound = wait_for(lambda: (lambda s: s if s["decisions"][0].get("state") == "Bound" else None)(status()),
                     what="the decision Bound")
    assert bound["bound"] == 1
    snapshot = json.loads(corral("get", "controllerrevisions", "-l", "placement.corral.dev/name=web", "-o", "json",
                                 kubeconfig=kc).stdout)["items"]
    assert [r["metadata"]["name"] for r in snapshot] == [bound["policySnapshot"]]
    assert snapshot[0]["metadata"]["annotations"]["placement.corral.dev/number-of-nodes"] == "1"
    assert "Policy Snapshot:" in corral("describe", "placement", "web", kubeconfig=kc).stdout
    corral("delete", "placement", "web", kubeconfig=kc)
    wait_for(lambda: copies() == {}, what="the copies gone with their Placement")


# --- decision states, snapshots, score breakdown, lost nodes --------------------------------------------


def copy_on(node_name: str, name: str = "") -> dict[str, Any]:
    """A copy of the Placement web bound to ``node_name``, as the placement controller makes them."""
    pod = make_pod(name or f"web-{node_name}").node(node_name).obj
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "placement.corral.dev/v1", "kind": "Placement",
                                          "name": "web", "uid": "uid-web", "controller": True}]
    return pod


def states(status: dict[str, Any]) -> dict[str, str | None]:
    return {d["nodeName"]: d.get("state") for d in status["decisions"]}


async def test_each_decision_moves_scheduled_to_bound_and_a_node_let_go_is_unscheduled_until_its_copy_goes():
    from corral.api.kinds.placement import snapshot_name

    h = cluster(node("a", cpu=16), node("b", cpu=8), node("c", cpu=4))
    policy = {"placementType": "PickN", "numberOfNodes": 2}
    status = await decided(h, stored(policy))
    assert states(status) == {"a": "Scheduled", "b": "Scheduled", "c": None}
    assert status["policySnapshot"] == snapshot_name(stored(policy)) and status["bound"] == 0
    h.scheduler.placement_changed("default/web", stored(policy, status=status))
    h.add_pod(copy_on("a"))  # the scheduler bound the first copy
    h.queue_clock.advance(1)  # the state is written once due
    await h.scheduler.placements.write(h.writer)
    status = h.writer.placement_statuses["default/web"]
    assert states(status) == {"a": "Bound", "b": "Scheduled", "c": None} and status["bound"] == 1
    h.add_pod(copy_on("b"))
    # Another policy: only c; a and b are let go, each keeps its copy (Unscheduled) until the rollout removes it.
    only_c = {**policy, "numberOfNodes": 1, "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]}]}}}}
    moved = await decided(h, stored(only_c, generation=2, status=h.writer.placement_statuses["default/web"]))
    assert states(moved) == {"c": "Scheduled", "a": "Unscheduled", "b": "Unscheduled"}
    old = {d["nodeName"]: d for d in moved["decisions"]}
    assert moved["policySnapshot"] == snapshot_name(stored(only_c)) != status["policySnapshot"]
    assert old["a"]["policySnapshot"] == old["b"]["policySnapshot"] == status["policySnapshot"]
    assert not old["a"]["selected"] and old["a"]["reason"].startswith("let go")
    h.scheduler.placement_changed("default/web", stored(only_c, generation=2, status=moved))
    h.delete_pod("default/web-a")  # the rollout removed the copy on a
    await h.scheduler.placements.write(h.writer)
    after = h.writer.placement_statuses["default/web"]
    assert states(after) == {"c": "Scheduled", "a": None, "b": "Unscheduled"}  # a: only its reason now
    assert next(d for d in after["decisions"] if d["nodeName"] == "a")["reason"].startswith("NodeAffinity")
    assert [d.get("policySnapshot") for d in after["decisions"] if d["nodeName"] == "b"] == [status["policySnapshot"]]


async def test_scaling_keeps_the_snapshot_and_a_copy_let_go_by_scaling_in_is_unscheduled():
    h = cluster(node("a", cpu=16), node("b", cpu=8), node("c", cpu=4))
    two = await decided(h, stored({"placementType": "PickN", "numberOfNodes": 2}))
    for n in ("a", "b"):
        h.add_pod(copy_on(n))
    one = await decided(h, stored({"placementType": "PickN", "numberOfNodes": 1}, generation=2, status=two))
    assert one["policySnapshot"] == two["policySnapshot"]  # the count is no new policy
    assert states(one) == {"a": "Bound", "b": "Unscheduled", "c": None}
    assert (one["scheduled"], one["bound"]) == (1, 1)  # b's copy is leaving, not counted
    b = next(d for d in one["decisions"] if d["nodeName"] == "b")
    assert "scaled down" in b["reason"] and "policySnapshot" not in b  # the current snapshot let it go


async def test_every_decision_has_its_score_by_plugin_up_to_a_limit(monkeypatch):
    from corral.scheduler.batch import placements

    prefer = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 40, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}
    nodes = (node("a", cpu=16, disk="ssd"), node("b", cpu=8), node("c", cpu=4))
    status = await decided(cluster(*nodes), stored({"placementType": "PickAll", "affinity": prefer}))
    for d in status["decisions"]:
        assert d["score"] == pytest.approx(sum(d["scores"].values()), abs=0.05)
        assert d["scores"].get("preference[0]", 0) == (40 if d["nodeName"] == "a" else 0)
    assert status["decisions"][0]["scores"]["NodeResourcesFit"] > 0
    monkeypatch.setattr(placements, "BREAKDOWN_LIMIT", 2)  # three decisions: only the totals
    status = await decided(cluster(*nodes), stored({"placementType": "PickAll", "affinity": prefer}))
    assert all("scores" not in d and d["score"] > 0 for d in status["decisions"])


async def test_a_lost_node_keeps_its_copy_until_the_node_lifecycle_evicts_it_then_pick_n_places_it_elsewhere():
    h = cluster(node("a", cpu=16), node("b", cpu=8))
    policy = {"placementType": "PickN", "numberOfNodes": 1}
    status = await decided(h, stored(policy))
    assert [d["nodeName"] for d in status["decisions"] if d["selected"]] == ["a"]
    h.add_pod(copy_on("a"))
    h.add_node(node("a", cpu=16).taint("node.kubernetes.io/unreachable", effect="NoExecute").heartbeat_age(0))
    status = await decided(h, stored(policy, status=h.writer.placement_statuses["default/web"]))
    assert [(d["nodeName"], d["state"]) for d in status["decisions"] if d["selected"]] == [("a", "Bound")]
    h.delete_pod("default/web-a")  # evicted after the lifecycle's timeout
    h.scheduler.placement_changed("default/web", stored(policy, status=status))
    await h.scheduler.placements.write(h.writer)
    status = h.writer.placement_statuses["default/web"]
    assert [(d["nodeName"], d["state"]) for d in status["decisions"] if d["selected"]] == [("b", "Scheduled")]


async def test_a_no_schedule_taint_never_moves_a_copy_even_once_it_is_gone():
    h = cluster(node("a", cpu=16), node("b", cpu=8))
    policy = {"placementType": "PickN", "numberOfNodes": 1}
    status = await decided(h, stored(policy))
    h.add_node(node("a", cpu=16).taint("dedicated", effect="NoSchedule").heartbeat_age(0))
    status = await decided(h, stored(policy, status=status))
    assert [d["nodeName"] for d in status["decisions"] if d["selected"]] == ["a"]  # IgnoredDuringExecution


async def test_binds_alone_rewrite_a_large_status_at_most_once_a_second_per_thousand_decisions():
    from corral.scheduler.batch.placements import RESTATE_PER_DECISION

    h = cluster(*(node(f"n{i:02d}") for i in range(20)))
    status = await decided(h, stored({"placementType": "PickAll"}))
    h.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"}, status=status))
    h.writer.placement_statuses.clear()
    due = 20 * RESTATE_PER_DECISION  # seconds, for 20 decisions
    h.add_pod(copy_on("n00"))
    h.queue_clock.advance(due / 2)
    await h.scheduler.placements.write(h.writer)
    assert h.writer.placement_statuses == {}  # not due yet: written with the next flush that is
    h.queue_clock.advance(due)
    await h.scheduler.placements.write(h.writer)
    assert states(h.writer.placement_statuses["default/web"])["n00"] == "Bound"
    h.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"},
                                                        status=h.writer.placement_statuses.pop("default/web")))
    h.delete_pod("default/web-n00")  # a copy gone may need a new decision: at once
    await h.scheduler.placements.write(h.writer)
    assert states(h.writer.placement_statuses["default/web"])["n00"] == "Scheduled"


async def test_a_template_change_is_no_new_decision_the_nodes_with_copies_stay():
    h = cluster(node("n4", cpu=4), node("n8", cpu=8), node("n16", cpu=16))
    policy = {"placementType": "PickN", "numberOfNodes": 2}
    status = await decided(h, stored(policy))
    assert sorted(d["nodeName"] for d in status["decisions"] if d["selected"]) == ["n16", "n8"]
    h.add_node(node("n64", cpu=64).heartbeat_age(0))  # better than both, but the policy did not change
    changed = stored(policy, generation=2, status=status)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"  # rolled out in place
    again = await decided(h, changed)
    assert sorted(d["nodeName"] for d in again["decisions"] if d["selected"]) == ["n16", "n8"]
    assert again["observedGeneration"] == 2 and again["policySnapshot"] == status["policySnapshot"]


async def test_a_new_or_changed_placement_is_decided_at_once_and_node_changes_wait_for_the_flush():
    import asyncio

    h = Harness(flush_interval=3600)  # a flush would never come within this test
    h.add_node(node("a").heartbeat_age(0))
    h.scheduler.start()
    try:
        h.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"}))
        for _ in range(100):
            await asyncio.sleep(0.01)
            if "default/web" in h.writer.placement_statuses:
                break
        status = h.writer.placement_statuses.pop("default/web")
        assert [d["nodeName"] for d in status["decisions"]] == ["a"]
        h.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"}, status=status))
        h.add_node(node("b").heartbeat_age(0))
        await asyncio.sleep(0.2)
        assert h.writer.placement_statuses == {}  # nodes changing: decided at the next flush
    finally:
        await h.scheduler.stop()


async def test_node_changes_are_decided_at_the_next_flush_without_a_spec_change():
    import asyncio

    async def written() -> dict[str, Any]:
        for _ in range(1000):  # at most 10 s: a flush every 0.1 s
            await asyncio.sleep(0.01)
            if "default/web" in h.writer.placement_statuses:
                return h.writer.placement_statuses.pop("default/web")
        raise AssertionError("no decision written")

    h = Harness(flush_interval=0.1)
    h.add_node(node("a").heartbeat_age(0))
    h.scheduler.start()
    try:
        h.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"}))
        status = await written()
        h.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"}, status=status))
        await asyncio.sleep(0.3)
        h.writer.placement_statuses.clear()
        h.add_node(node("b").heartbeat_age(0))
        status = await written()
        assert sorted(d["nodeName"] for d in status["decisions"]) == ["a", "b"]
    finally:
        await h.scheduler.stop()


def test_a_copy_is_a_bound_unfinished_pod_the_placement_controls():
    from corral.scheduler.batch.placements import copy_of

    def pod(node: str | None = "a", phase: str = "Running", namespace: str | None = "team", refs=None):
        obj = copy_on(node or "x")
        if node is None:
            del obj["spec"]["nodeName"]
        obj["status"]["phase"] = phase
        if namespace is None:
            del obj["metadata"]["namespace"]
        else:
            obj["metadata"]["namespace"] = namespace
        if refs is not None:
            obj["metadata"]["ownerReferences"] = refs
        return obj

    placement_ref = {"apiVersion": "placement.corral.dev/v1", "kind": "Placement", "name": "web", "controller": True}
    assert copy_of(pod()) == ("team/web", "a")
    assert copy_of(pod(namespace=None)) == ("default/web", "a")
    assert copy_of(pod(phase="Pending")) == ("team/web", "a")  # bound, not started yet
    for gone in (pod(node=None), pod(phase="Succeeded"), pod(phase="Failed")):
        assert copy_of(gone) is None
    assert copy_of(pod(refs=[{**placement_ref, "controller": False}])) is None  # owned, not controlled
    assert copy_of(pod(refs=[{**placement_ref, "kind": "ReplicaSet"}])) is None
    assert copy_of(pod(refs=[{**placement_ref, "apiVersion": "example.com/v1"}])) is None  # another group's kind
    assert copy_of(pod(refs=[{**placement_ref, "name": "other"}])) == ("team/other", "a")
    assert copy_of(pod(refs=[{"apiVersion": "v1", "kind": "Node", "name": "n"}, placement_ref])) == ("team/web", "a")
    bare = pod()
    del bare["status"]
    assert copy_of(bare) == ("team/web", "a")  # no status yet: bound is enough


async def test_a_node_stays_bound_while_any_of_its_copies_runs_and_a_finished_copy_is_gone():
    h = cluster(node("a"))
    policy = {"placementType": "PickAll"}
    status = await decided(h, stored(policy))

    async def state() -> str:
        h.scheduler.placement_changed("default/web", stored(policy, status=status))
        h.queue_clock.advance(1)
        await h.scheduler.placements.write(h.writer)
        written = h.writer.placement_statuses.get("default/web") or status
        return states(written)["a"]

    h.add_pod(copy_on("a", "old"))
    h.add_pod(copy_on("a", "new"))  # a surge: two copies on one node
    assert await state() == "Bound"
    running = copy_on("a", "new")
    running["status"]["phase"] = "Running"
    h.add_pod(running)  # the same copy again: still one copy
    h.delete_pod("default/old")
    assert await state() == "Bound"  # the new one is still there
    status = h.writer.placement_statuses.pop("default/web", status)
    finished = copy_on("a", "new")
    finished["status"]["phase"] = "Failed"
    h.add_pod(finished)
    assert await state() == "Scheduled"


async def test_the_scheduled_condition_keeps_the_controllers_and_its_time_until_it_changes():
    h = cluster(node("a"), node("b"))
    applied = {"type": "Applied", "status": "True", "reason": "Applied", "lastTransitionTime": "2030-01-01T00:00:00Z"}
    policy = {"placementType": "PickN", "numberOfNodes": 2}
    first = await decided(h, stored(policy))
    since = first["conditions"][0]["lastTransitionTime"]
    earlier = {**first, "conditions": [applied, {**first["conditions"][0], "lastTransitionTime": "2029-01-01T00:00:00Z"}]}
    again = await decided(h, stored({**policy, "numberOfNodes": 1}, generation=2, status=earlier))
    assert again["conditions"][0] == applied  # the controller's, untouched
    scheduled = again["conditions"][1]
    assert (scheduled["type"], scheduled["status"], scheduled["observedGeneration"]) == ("Scheduled", "True", 2)
    assert scheduled["lastTransitionTime"] == "2029-01-01T00:00:00Z"  # still True: since then
    short = await decided(h, stored({**policy, "numberOfNodes": 3}, generation=3, status={**again}))
    scheduled = short["conditions"][1]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "NotEnoughNodes")
    assert scheduled["lastTransitionTime"] >= since and scheduled["lastTransitionTime"] != "2029-01-01T00:00:00Z"
    assert [c["type"] for c in short["conditions"]] == ["Applied", "Scheduled"]


async def test_pick_fixed_wants_as_many_copies_as_it_names_nodes():
    status = await decided(cluster(node("a"), node("b", cpu=0)), stored({"placementType": "PickFixed",
                                                                         "nodeNames": ["a", "b", "gone"]}))
    assert (status["desired"], status["scheduled"]) == (3, 1)
    assert {d["nodeName"]: d["reason"] for d in status["decisions"] if not d["selected"]}["gone"] == "node not found"


async def test_scores_are_written_to_the_hundredth_and_the_breakdown_limit_counts_every_decision(monkeypatch):
    from corral.scheduler.batch import placements

    thirds = {"placementType": "PickAll", "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "propertySorter": {"name": "allocatable/cpu", "sortOrder": "Descending"}}]}}}
    status = await decided(cluster(node("a", cpu=7), node("b", cpu=3), node("c", cpu=4)), stored(thirds))
    for d in status["decisions"]:
        assert round(d["score"], 2) == d["score"] and all(round(v, 2) == v and v for v in d["scores"].values())
    by_node = {d["nodeName"]: d for d in status["decisions"]}
    assert by_node["c"]["scores"]["preference[0]"] == 25.0 and by_node["b"]["scores"].get("preference[0]") is None
    middle = await decided(cluster(node("a", cpu=6), node("b", cpu=3), node("c", cpu=4)), stored(thirds))
    c = {d["nodeName"]: d for d in middle["decisions"]}["c"]
    assert c["scores"]["preference[0]"] == 33.33 and round(c["score"], 2) == c["score"] != round(c["score"], 1)
    monkeypatch.setattr(placements, "BREAKDOWN_LIMIT", 3)  # exactly the three decisions: still written
    status = await decided(cluster(node("a", cpu=7), node("b", cpu=3), node("c", cpu=5)),
                           stored({"placementType": "PickAll"}))
    assert all("scores" in d for d in status["decisions"])
    # Two selected, one leaving with its copy: three decisions in all, at the limit.
    h = cluster(node("a", cpu=7), node("b", cpu=3), node("c", cpu=5))
    h.add_pod(copy_on("c"))
    only_ab = {"placementType": "PickAll", "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}]}}}}
    status = await decided(h, stored(only_ab))
    assert len(status["decisions"]) == 3 and all("scores" in d for d in status["decisions"] if d["selected"])
    monkeypatch.setattr(placements, "BREAKDOWN_LIMIT", 2)
    status = await decided(h, stored(only_ab, generation=2))
    assert not any("scores" in d for d in status["decisions"])


async def test_a_node_let_go_beyond_the_listed_ones_is_still_listed_while_its_copy_runs():
    from corral.scheduler.batch.placements import LEAVING

    h = cluster(*(node(f"n{i:02d}", cpu=2) for i in range(30)), node("big", cpu=64))
    h.add_pod(copy_on("n29"))
    big_only = {"placementType": "PickAll", "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["big"]}]}]}}}}
    status = await decided(h, stored(big_only))
    leaving = [d for d in status["decisions"] if d.get("state") == "Unscheduled"]
    assert leaving == [{"nodeName": "n29", "selected": False, "reason": LEAVING, "state": "Unscheduled"}]
    assert len(status["decisions"]) == 1 + 20 + 1  # the selected, 20 others with their reasons, the leaving one
    listed = next(d for d in status["decisions"] if d["nodeName"] == "n00")
    assert listed["reason"].startswith("NodeAffinity") and "state" not in listed


async def test_a_status_write_names_the_version_read_and_a_refused_one_is_taken_again():
    h = cluster(node("a"))
    h.writer.status_failures = 1  # the controller wrote meanwhile: 409
    h.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"}))
    await h.scheduler.placements.write(h.writer)
    assert h.writer.placement_statuses == {}
    await h.scheduler.placements.write(h.writer)  # the next flush, on the newer object
    assert [d["nodeName"] for d in h.writer.placement_statuses["default/web"]["decisions"]] == ["a"]
    assert h.writer.pinned_versions["default/web"] == "11"  # stored() gives generation 1 version 11


async def test_one_placement_skipped_or_refused_never_stops_the_others():
    h = cluster(node("a"))
    first = await decided(h, stored({"placementType": "PickAll"}))
    other = stored({"placementType": "PickAll"})
    other["metadata"]["name"] = "zzz"
    h.writer.placement_statuses.clear()
    h.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"}, status=first))
    h.scheduler.placements.nodes_changed()  # both pending; web's status already says it all
    h.scheduler.placement_changed("default/zzz", other)
    await h.scheduler.placements.write(h.writer)
    assert list(h.writer.placement_statuses) == ["default/zzz"]
    h.writer.placement_statuses.clear()
    h.writer.status_failures = 1  # web's write is refused (sorted first); zzz's still goes
    h.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"}, generation=2, status=first))
    h.scheduler.placement_changed("default/zzz", {**other, "metadata": {**other["metadata"], "generation": 2}})
    await h.scheduler.placements.write(h.writer)
    assert list(h.writer.placement_statuses) == ["default/zzz"]


def named(name: str, policy: dict[str, Any], **template_spec: Any) -> dict[str, Any]:
    obj = stored(policy)
    obj["metadata"]["name"] = name
    obj["spec"]["template"]["spec"].update(template_spec)
    return obj


async def test_a_placement_for_a_scheduler_not_here_is_left_alone_even_when_its_copies_bind():
    h = cluster(node("a"))
    h.scheduler.placement_changed("default/aaa", named("aaa", {"placementType": "PickAll"}, schedulerName="elsewhere"))
    h.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"}))
    await h.scheduler.placements.write(h.writer)
    assert list(h.writer.placement_statuses) == ["default/web"]  # aaa, sorted first, does not stop web
    copy = copy_on("a", "aaa-a")
    copy["metadata"]["ownerReferences"][0]["name"] = "aaa"
    h.add_pod(copy)  # a bind alone: aaa has no decision of this scheduler to restate
    h.queue_clock.advance(10)
    await h.scheduler.placements.write(h.writer)
    assert list(h.writer.placement_statuses) == ["default/web"]


async def test_a_status_just_written_is_not_written_again_before_the_watch_brings_it_back():
    h = cluster(node("a"))
    await decided(h, stored({"placementType": "PickAll"}))
    h.writer.placement_statuses.clear()
    h.scheduler.placements.nodes_changed()  # decided again on the object as last seen, still without its status
    await h.scheduler.placements.write(h.writer)
    assert h.writer.placement_statuses == {}


async def test_a_bind_alone_is_restated_from_the_last_decision_once_due_not_decided_again(monkeypatch):
    from corral.scheduler.batch import placements

    monkeypatch.setattr(placements, "RESTATE_PER_DECISION", 0.125)  # 20 decisions: due 2.5 s on, exact in binary
    h = cluster(*(node(f"n{i:02d}") for i in range(20)))
    status = await decided(h, stored({"placementType": "PickAll"}))
    h.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"}, status=status))
    h.writer.placement_statuses.clear()
    decided_again = []
    decide_now = h.scheduler.placements.decide
    monkeypatch.setattr(h.scheduler.placements, "decide", lambda key: decided_again.append(key) or decide_now(key))
    h.add_pod(copy_on("n00"))
    h.queue_clock.advance(2.5)  # exactly due
    await h.scheduler.placements.write(h.writer)
    assert states(h.writer.placement_statuses["default/web"])["n00"] == "Bound"
    assert decided_again == []


async def test_a_deleted_or_deleting_placement_is_decided_no_more_and_one_made_again_is_decided_afresh():
    h = cluster(node("a"))
    status = await decided(h, stored({"placementType": "PickAll"}))
    h.writer.placement_statuses.clear()
    deleting = stored({"placementType": "PickAll"}, generation=2, status=status)
    deleting["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    h.scheduler.placement_changed("default/web", deleting)
    h.add_pod(copy_on("a"))
    h.queue_clock.advance(10)
    await h.scheduler.placements.write(h.writer)
    assert h.writer.placement_statuses == {}
    h.scheduler.placement_changed("default/web", None)
    h.scheduler.placements.nodes_changed()
    await h.scheduler.placements.write(h.writer)
    assert h.writer.placement_statuses == {}
    h.delete_pod("default/web-a")
    again = await decided(h, stored({"placementType": "PickAll"}))  # the same name, made anew
    assert [d["nodeName"] for d in again["decisions"]] == ["a"]


async def test_a_placement_for_another_scheduler_is_not_decided_here():
    h = cluster(node("a"))
    mine = stored({"placementType": "PickAll"})
    mine["spec"]["template"]["spec"]["schedulerName"] = "default-scheduler"
    assert [d["nodeName"] for d in (await decided(h, mine))["decisions"]] == ["a"]
    unnamed = stored({"placementType": "PickAll"})
    unnamed["spec"]["template"]["spec"].pop("schedulerName", None)  # none named: the default scheduler's
    assert [d["nodeName"] for d in (await decided(cluster(node("a")), unnamed))["decisions"]] == ["a"]
    theirs = stored({"placementType": "PickAll"})
    theirs["spec"]["template"]["spec"]["schedulerName"] = "gpu-scheduler"
    theirs["metadata"]["name"] = "theirs"
    h.scheduler.placement_changed("default/theirs", theirs)
    await h.scheduler.placements.write(h.writer)
    assert "default/theirs" not in h.writer.placement_statuses


async def test_a_restarted_scheduler_writes_a_copys_bind_though_it_had_nothing_to_write_before():
    status = await decided(cluster(node("a")), stored({"placementType": "PickAll"}))
    h = cluster(node("a"))  # restarted: the status already says its decision
    h.scheduler.placement_changed("default/web", stored({"placementType": "PickAll"}, status=status))
    await h.scheduler.placements.write(h.writer)
    assert h.writer.placement_statuses == {}
    h.add_pod(copy_on("a"))
    await h.scheduler.placements.write(h.writer)  # no status written yet by this scheduler: due at once
    assert states(h.writer.placement_statuses["default/web"]) == {"a": "Bound"}


# --- what a mutation run of the decision found unguarded ------------------------------------------------


def test_a_property_sorter_on_available_cpu_counts_what_pods_already_use():
    nodes = [node("busy", cpu=8), node("idle", cpu=8), node("small", cpu=2)]
    taken = make_pod("taken").requests(cpu="7").node("busy").obj
    policy = {"placementType": "PickN", "numberOfNodes": 1, "affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "propertySorter": {"name": "available/cpu", "sortOrder": "Descending"}}]}}}
    result = run(nodes, policy, pods=[taken])
    scores = {d.node: d.scores["preference[0]"] for d in result.decisions}
    assert result.selected == ["idle"] and scores["idle"] == 100.0
    assert scores["busy"] == 0.0 and scores["small"] == pytest.approx(100 * (2000 - 1000) / (8000 - 1000))


def test_scaling_out_with_a_spread_counts_the_copies_already_placed():
    nodes = [node("a1", cpu=32, **{ZONE: "a"}), node("a2", cpu=16, **{ZONE: "a"}), node("b1", cpu=4, **{ZONE: "b"})]
    policy = {"placementType": "PickN", "numberOfNodes": 2,
              "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]}
    result = run(nodes, policy, keep=("a1",))  # a1 holds a copy: zone a has one already
    assert sorted(result.selected) == ["a1", "b1"]  # a2 scores better than b1 but would make zone a two ahead
    three = {**policy, "numberOfNodes": 3}
    assert sorted(run(nodes, three, keep=("a1",)).selected) == ["a1", "a2", "b1"]  # b1 first, then a2 (skew 1)
    assert sorted(run(nodes, three, keep=("b1",)).selected) == ["a1", "a2", "b1"]  # zone b's copy lets a take two
    # A node without the zone label is no domain: it takes no copy and does not hold the others back.
    unlabelled = [*nodes, node("x", cpu=64)]
    assert sorted(run(unlabelled, three, keep=("a1", "b1")).selected) == ["a1", "a2", "b1"]


def test_the_unselected_listed_are_the_best_scored_of_them_and_never_selected():
    nodes = [node(f"n{cpu:02d}", cpu=cpu) for cpu in (4, 8, 12, 16, 20, 24)]
    every = run(nodes, {"placementType": "PickN", "numberOfNodes": 1}, unselected_limit=10)
    ranked = sorted((d for d in every.decisions if not d.selected), key=lambda d: -d.score)
    assert len({d.score for d in ranked}) == 5  # no ties: the order is the scores'
    result = run(nodes, {"placementType": "PickN", "numberOfNodes": 1}, unselected_limit=2)
    assert result.selected == every.selected
    assert [d.node for d in result.decisions if not d.selected] == [d.node for d in ranked[:2]]
    # The best-scored of the feasible come first; the infeasible fill what is left of the limit.
    three = nodes[:3] + [node(f"small{i}", cpu=0) for i in range(4)]  # 2 feasible left out, 4 infeasible
    left_out = [d.node for d in run(three, {"placementType": "PickN", "numberOfNodes": 1}).decisions if not d.selected]
    assert left_out[:2] == ["n08", "n04"] and sorted(left_out[2:]) == ["small0", "small1", "small2", "small3"]
    for limit in (1, 2, 3):
        result = run(three, {"placementType": "PickN", "numberOfNodes": 1}, unselected_limit=limit)
        assert [d.node for d in result.decisions if not d.selected] == left_out[:limit]
    fixed = run(nodes + [node("tiny", cpu=0)], {"placementType": "PickFixed", "nodeNames": ["n04", "tiny", "gone"]})
    assert [(d.node, d.selected) for d in fixed.decisions] == [("n04", True), ("tiny", False), ("gone", False)]
    assert all(d.selected is False for d in fixed.decisions[1:])


def test_policy_terms_with_match_fields_and_the_templates_own_are_both_required():
    nodes = [node("a", disk="ssd"), node("b", disk="ssd"), node("c")]
    policy = {"placementType": "PickAll", "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b", "c"]}]}]}}}}
    own = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}]}}}
    assert run(nodes, policy, affinity=own).selected == ["b"]


def test_deciding_leaves_the_placement_as_it_was():
    import copy

    obj = placement({"placementType": "PickAll", "tolerations": [{"operator": "Exists"}],
                     "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                         "nodeSelectorTerms": [{"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}]}}}},
                    affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "y", "operator": "DoesNotExist"}]}]}}},
                    tolerations=[{"key": "a", "operator": "Exists"}])
    before = copy.deepcopy(obj)
    decision_pod(obj)
    decision_pod(obj)
    assert obj == before  # the scheduler's copy of the Placement is not grown by each decision


def test_a_property_is_read_per_node_in_the_units_of_its_columns():
    import math

    from corral.scheduler.batch.decide import property_column
    from corral.scheduler.cache.cache import Cache

    odd = make_node("odd").obj
    odd["status"]["capacity"] = {"cpu": "lots"}  # not a quantity: no capacity
    cache = Cache.from_objects([make_node("a").capacity(cpu="1500m", memory="1Ki", pods=10).obj,
                                make_node("b").capacity(memory="2Ki").obj, odd], [], [])
    table = cache.table
    order = [table.row_of[n] for n in ("a", "b", "odd")]

    def read(name: str) -> list[float] | None:
        column = property_column(table, name)
        return None if column is None else [float(column[r]) for r in order]

    assert read("capacity/cpu") == [1500.0, 0.0, 0.0]  # millicores; none reported, or unreadable: 0
    assert read("capacity/memory") == [1024.0, 2048.0, 0.0]  # units
    assert read("allocatable/cpu") == [1500.0, 0.0, float(table.allocatable["cpu"][table.row_of["odd"]])]
    assert read("available/example.com/gpu") == [0.0, 0.0, 0.0]  # no node has it: no column, all 0
    assert read("allocatable/") is None and read("bogus/cpu") is None and read("capacity/") is None
    assert all(math.isnan(v) for v in read("network/download"))  # nobody measured it
    cache.remove_node("b")
    assert math.isnan(float(property_column(table, "capacity/memory")[table.row_of.get("b", order[1])]))
