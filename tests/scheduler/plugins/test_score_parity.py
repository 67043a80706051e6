"""Every score equals kube-scheduler's, to the integer.

The expected numbers are worked out by hand from Kubernetes' formulas (pkg/scheduler/framework/
plugins/...), written next to each case: int64 arithmetic with Go's truncating division, float64
where Kubernetes uses it, rounding where it rounds. Nodes are 4 cpu / 32Gi unless a case says
otherwise; Gi and Mi below are 2**30 and 2**20 bytes.
"""

from __future__ import annotations

import math

import pytest

from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import run_score

MB = 1024 * 1024


def pod(cpu: str | None = None, memory: str | None = None):
    amounts = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return make_pod("p").requests(**amounts) if amounts else make_pod("p")


def on(node: str, cpu: str | None = None, memory: str | None = None, name: str = "e"):
    return pod(cpu, memory).node(node).obj | {"metadata": {"name": name, "namespace": "default",
                                                           "uid": f"uid-{name}"}}


# --- NodeResourcesFit --------------------------------------------------------------------------------

LEAST = None
MOST = {"scoringStrategy": {"type": "MostAllocated"}}
UP = {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
    "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}}}
DOWN = {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
    "shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 3}]}}}


@pytest.mark.parametrize("args, node, existing, incoming, expected", [
    pytest.param(LEAST, make_node("n"), [], pod("1", "1Gi"), 85,
                 id="least allocated: (3000*100/4000=75 + 31Gi*100/32Gi=96) / 2 = 85"),
    pytest.param(LEAST, make_node("n"), [on("n", "1500m", "8Gi")], pod("500m", "1Gi"), 60,
                 id="least allocated counts the pods already there: (50 + 23Gi*100/32Gi=71) / 2 = 60"),
    pytest.param(LEAST, make_node("n"), [], pod(), 98,
                 id="least allocated scores a pod requesting nothing as 100m and 200Mi: (97 + 99) / 2 = 98"),
    pytest.param(LEAST, make_node("n").capacity(cpu=1, memory="32Gi", pods=110), [on("n", "2")], pod("100m", "1Gi"),
                 48, id="least allocated gives 0 for an overcommitted resource: (0 + 96) / 2 = 48"),
    pytest.param({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]}},
                 make_node("n"), [], pod("1", "1Gi"), 80, id="resource weights: (75*3 + 96*1) / 4 = 80"),
    pytest.param({"scoringStrategy": {"resources": [{"name": "cpu"}, {"name": "memory", "weight": 3}]}},
                 make_node("n"), [], pod("1", "1Gi"), 90, id="a weight left out is 1: (75*1 + 96*3) / 4 = 90"),
    pytest.param({"scoringStrategy": {"resources": [{"name": "ephemeral-storage"}]}},
                 make_node("n").allocatable(ephemeral_storage="100Gi"), [],
                 make_pod("p").requests(ephemeral_storage="25Gi"), 75,
                 id="ephemeral storage scored when configured: 75Gi*100/100Gi = 75"),
    pytest.param({"scoringStrategy": {"resources": [{"name": "ephemeral-storage"}, {"name": "cpu"}]}},
                 make_node("n").allocatable(ephemeral_storage="100Gi"),
                 [on("n", "1") | {"spec": {"containers": [{"name": "c", "image": "i", "resources": {
                     "requests": {"cpu": "1", "ephemeral-storage": "60Gi"}}}], "nodeName": "n"}}],
                 pod("1"), 45, id="ephemeral storage counts even when the pod asks for none: (40 + 50) / 2 = 45"),
    pytest.param(MOST, make_node("n"), [on("n", "3", "24Gi")], pod("500m", "1Gi"), 82,
                 id="most allocated: (3500*100/4000=87 + 25Gi*100/32Gi=78) / 2 = 82"),
    pytest.param(MOST, make_node("n"), [], pod("500m", "1Gi"), 7,
                 id="most allocated on an idle node: (12 + 3) / 2 = 7"),
    pytest.param(MOST, make_node("n").capacity(cpu=1, memory="32Gi", pods=110), [on("n", "2")], pod("100m", "1Gi"),
                 51, id="most allocated caps requested at capacity: (100 + 3) / 2 = 51"),
    pytest.param(UP, make_node("n"), [on("n", "2", "16Gi")], pod("1", "1Gi"), 64,
                 id="requested to capacity ratio: utilisation 75 and 53 on a rising line, round(128 / 2) = 64"),
    pytest.param(UP, make_node("n"), [], pod("1", "1Gi"), 14,
                 id="requested to capacity ratio on an idle node: utilisation 25 and 3, round(28 / 2) = 14"),
    pytest.param(DOWN, make_node("n"), [], pod("1", "1Gi"), 91,
                 id="a falling line truncates toward zero (100-17=83, 100-2=98) and the mean rounds half up: 91"),
    pytest.param(UP, make_node("n").capacity(cpu=1, memory="32Gi", pods=110), [on("n", "2")], pod("100m", "1Gi"), 52,
                 id="requested to capacity ratio: over capacity is utilisation 100, round((100 + 3) / 2) = 52"),
    pytest.param({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 0, "score": 2}, {"utilization": 50, "score": 8}, {"utilization": 80, "score": 9}]}}},
                 make_node("n"), [on("n", "2", "27Gi")], pod("1", "1Gi"), 89,
                 id="a three-point shape, flat past its last point: cpu 75 → 80 + 10*25/30 = 88, "
                    "memory 87 → 90: round((88 + 90) / 2) = 89"),
    pytest.param({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 0, "score": 2}, {"utilization": 50, "score": 8}, {"utilization": 80, "score": 9}]}}},
                 make_node("n"), [], pod("1", "1Gi"), 37,
                 id="a three-point shape on its first segment: cpu 25 → 20 + 60*25/50 = 50, "
                    "memory 3 → 20 + 60*3/50 = 23: round(73 / 2) = 37"),
    pytest.param({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 50, "score": 2}, {"utilization": 80, "score": 8},
                  {"utilization": 100, "score": 10}]}}},
                 make_node("n"), [], pod("1", "1Gi"), 20,
                 id="below a shape's first point the score is the first point's: 20 for cpu 25 and memory 3"),
    pytest.param(UP, make_node("n"), [], pod("1"), 25,
                 id="requested to capacity ratio leaves a zero resource score out of the mean: 25, not 12"),
    pytest.param(UP, make_node("n"), [on("n", "3979m", "18Gi")], pod("1m", "1Gi"), 79,
                 id="utilisation is floored to a whole percent: cpu 99.5 → 99, memory 59.375 → 59: round(158 / 2) = 79"),
])
def test_node_resources_fit_scores_equal_kube_scheduler(args, node, existing, incoming, expected):
    assert run_score("NodeResourcesFit", [node], incoming, existing, args=args) == {"n": expected}


def test_an_extended_resource_the_pod_does_not_request_is_left_out_of_the_score():
    # Kubernetes returns (0, 0) for it, so the node's score is cpu's alone: 3000*100/4000 = 75.
    nodes = [make_node("gpu").capacity(cpu=4, memory="32Gi", pods=110, **{"example.com/gpu": 4}), make_node("plain")]
    args = {"scoringStrategy": {"resources": [{"name": "example.com/gpu", "weight": 1}, {"name": "cpu", "weight": 1}]}}
    assert run_score("NodeResourcesFit", nodes, pod("1"), args=args) == {"gpu": 75, "plain": 75}
    only_gpu = {"scoringStrategy": {"resources": [{"name": "example.com/gpu", "weight": 1}]}}
    assert run_score("NodeResourcesFit", nodes, pod("1"), args=only_gpu) == {"gpu": 0, "plain": 0}
    # Left out however much ephemeral storage the pod asks for (that is another resource).
    storage = make_pod("p").requests(cpu="1", ephemeral_storage="1Gi")
    assert run_score("NodeResourcesFit", nodes, storage, args=args) == {"gpu": 75, "plain": 75}


GPU = {"example.com/gpu": 1}


@pytest.mark.parametrize("args, expected", [
    pytest.param({"type": "MostAllocated", "resources": [{"name": "example.com/gpu"}, {"name": "cpu"}]},
                 {"one": 62, "none": 25},
                 id="most allocated, a node with one gpu: (100 + 25) / 2 = 62 (truncated); without: cpu's 25"),
    pytest.param({"type": "MostAllocated", "resources": [{"name": "example.com/gpu"}]}, {"one": 100, "none": 0},
                 id="a node offering none of the scored resources scores 0"),
    pytest.param({"type": "RequestedToCapacityRatio", "resources": [{"name": "example.com/gpu"},
                                                                    {"name": "cpu", "weight": 2}],
                  "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10},
                                                         {"utilization": 100, "score": 3}]}},
                 {"one": 65, "none": 83},
                 id="ratio on a falling line: a gpu it does not offer is left out even though utilisation 0 "
                    "would score 100 there; one: round((30 + 83*2) / 3) = 65"),
])
def test_scores_where_only_some_nodes_offer_a_scored_resource(args, expected):
    nodes = [make_node("one").capacity(cpu=4, memory="32Gi", pods=110, **GPU), make_node("none")]
    incoming = make_pod("p").requests(cpu="1", **GPU)
    assert run_score("NodeResourcesFit", nodes, incoming, args={"scoringStrategy": args}) == expected


def test_requested_to_capacity_ratio_counts_a_resource_score_of_1():
    args = {"scoringStrategy": {"type": "RequestedToCapacityRatio", "resources": [{"name": "cpu"}],
                                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                                       {"utilization": 100, "score": 10}]}}}
    node = make_node("n").capacity(cpu=100, memory="32Gi", pods=110)
    assert run_score("NodeResourcesFit", [node], pod("1"), args=args) == {"n": 1}  # utilisation 1 → 1


def test_a_node_that_does_not_offer_a_scored_resource_is_scored_on_the_others():
    # The pod asks for a gpu; "plain" offers none (allocatable 0), so only cpu counts there.
    nodes = [make_node("gpu").capacity(cpu=4, memory="32Gi", pods=110, **{"example.com/gpu": 4}), make_node("plain")]
    args = {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 1}, {"name": "example.com/gpu", "weight": 1}]}}
    incoming = make_pod("p").requests(cpu="1", **{"example.com/gpu": 1})
    existing = [on("gpu", "2")]
    # gpu: (cpu 1000*100/4000 = 25 + gpu 3*100/4 = 75) / 2 = 50; plain: cpu 75 alone.
    assert run_score("NodeResourcesFit", nodes, incoming, existing, args=args) == {"gpu": 50, "plain": 75}


# --- NodeResourcesBalancedAllocation ---------------------------------------------------------------

@pytest.mark.parametrize("node, existing, incoming, expected", [
    pytest.param(make_node("n"), [], pod("1", "8Gi"), 100, id="equal fractions (0.25, 0.25) score 100"),
    pytest.param(make_node("n"), [], pod("1", "1Gi"), 89, id="fractions 0.25 and 0.03125: (1 - 0.109375) * 100 = 89"),
    pytest.param(make_node("n"), [on("n", "2")], pod("1", "16Gi"), 87,
                 id="pods already there count: fractions 0.75 and 0.5, (1 - 0.125) * 100 = 87"),
    pytest.param(make_node("n").capacity(cpu=1, memory="32Gi", pods=110), [on("n", "2")], pod("100m", "16Gi"), 75,
                 id="a fraction above 1 counts as 1: (1 - |1 - 0.5| / 2) * 100 = 75"),
    pytest.param(make_node("n"), [on("n", name=f"be{i}") for i in range(3)], pod("1"), 87,
                 id="requests count as written, not as the non-zero defaults: fractions 0.25 and 0, 87"),
    pytest.param(make_node("n").capacity(cpu=4, pods=110), [], pod("1", "1Gi"), 100,
                 id="a resource the node does not offer is left out: one fraction has no deviation, 100"),
    pytest.param(make_node("n").capacity(cpu=4, memory="1Gi", pods=110), [on("n", "1", "2Gi")], pod("1", "512Mi"), 75,
                 id="a memory fraction above 1 counts as 1: (1 - |0.5 - 1| / 2) * 100 = 75"),
])
def test_balanced_allocation_scores_equal_kube_scheduler(node, existing, incoming, expected):
    assert run_score("NodeResourcesBalancedAllocation", [node], incoming, existing) == {"n": expected}


def test_balanced_allocation_counts_the_least_amount_of_a_resource_as_offered():
    """With a node somewhere that offers no memory, each node is asked whether it offers both: one
    millicpu is an offer (fractions 1 and 0.125: (1 - 0.4375) * 100 = 56), so is one byte (fractions
    0.00025 and 1: floor(50.0125) = 50), none is not (100)."""
    nodes = [make_node("n").capacity(cpu="1m", memory="8Gi", pods=110), make_node("cpu-only").capacity(cpu=4, pods=110),
             make_node("byte").capacity(cpu=4, memory="1", pods=110)]
    assert run_score("NodeResourcesBalancedAllocation", nodes, pod("1m", "1Gi")) == {"n": 56, "cpu-only": 100, "byte": 50}


def test_balanced_allocation_does_not_score_a_pod_that_requests_nothing():
    # Kubernetes skips BalancedAllocation for best-effort pods, so they do not pile onto one node.
    assert run_score("NodeResourcesBalancedAllocation", [make_node("n")], pod()) == {}


# --- ImageLocality -----------------------------------------------------------------------------------

def image_nodes(holders: int, size: int, total: int = 3, image: str = "registry.local/app:1"):
    return [make_node(f"n{i}").image(image, size) if i < holders else make_node(f"n{i}") for i in range(total)]


@pytest.mark.parametrize("nodes, incoming, expected", [
    pytest.param(image_nodes(1, 500 * MB), make_pod("p"), 14,
                 id="an image one node of three holds: trunc(500MB / 3) maps to 100 * (174762666 - 23MB) / 977MB = 14"),
    pytest.param(image_nodes(3, 500 * MB), make_pod("p"), 48,
                 id="an image every node holds scores its full size: 100 * (500MB - 23MB) / 977MB = 48"),
    pytest.param(image_nodes(3, 20 * MB), make_pod("p"), 0, id="an image under 23MB counts as nothing"),
    pytest.param(image_nodes(1, 800 * MB, total=1), make_pod("p").container("sidecar", "registry.local/app:1"), 79,
                 id="each container counts, and each raises the ceiling: 100 * (1600MB - 23MB) / 1977MB = 79"),
    pytest.param(image_nodes(1, 800 * MB, total=1, image="registry.local/init:1"),
                 make_pod("p").init_container("setup", "registry.local/init:1"), 39,
                 id="init containers count too: 100 * (800MB - 23MB) / (2000MB - 23MB) = 39"),
])
def test_image_locality_scores_equal_kube_scheduler(nodes, incoming, expected):
    assert run_score("ImageLocality", nodes, incoming)["n0"] == expected


# --- TaintToleration, NodeAffinity, InterPodAffinity ------------------------------------------------

def test_taint_toleration_reverses_with_integer_division():
    # Raw: untolerated PreferNoSchedule taints 0, 1, 3. Normalised: 100 - 100*s/3 → 100, 100 - 33 = 67, 0.
    nodes = [make_node("a"), make_node("b").taint("x", "1", "PreferNoSchedule"),
             make_node("c").taint("x", "1", "PreferNoSchedule").taint("y", "1", "PreferNoSchedule")
             .taint("z", "1", "PreferNoSchedule")]
    assert run_score("TaintToleration", nodes, make_pod("p"), raw=True) == {"a": 0, "b": 1, "c": 3}
    assert run_score("TaintToleration", nodes, make_pod("p")) == {"a": 100, "b": 67, "c": 0}


def test_node_affinity_sums_matching_weights_and_scales_them_to_the_best():
    nodes = [make_node("a").label("disk", "hdd"), make_node("b").label("disk", "ssd"),
             make_node("c").label("disk", "ssd").zone("z1"), make_node("d")]
    incoming = make_pod("p").prefer_node(1, "disk", "In", "hdd", "ssd").prefer_node(2, "topology.kubernetes.io/zone",
                                                                                  "In", "z1")
    # Raw 1, 1, 3, 0 → 100 * s / 3: 33, 33, 100, 0.
    assert run_score("NodeAffinity", nodes, incoming, raw=True) == {"a": 1, "b": 1, "c": 3, "d": 0}
    assert run_score("NodeAffinity", nodes, incoming) == {"a": 33, "b": 33, "c": 100, "d": 0}


def test_node_affinity_preferences_no_node_matches_score_every_node_0():
    nodes = [make_node("a").label("disk", "hdd"), make_node("b")]
    incoming = make_pod("p").prefer_node(5, "disk", "In", "nvme")
    assert run_score("NodeAffinity", nodes, incoming, raw=True) == {"a": 0, "b": 0}
    assert run_score("NodeAffinity", nodes, incoming) == {"a": 0, "b": 0}  # not 0/0


@pytest.mark.parametrize("plugin, incoming", [
    pytest.param("NodeAffinity", make_pod("p").prefer_node(5, "disk", "In", "ssd"), id="NodeAffinity"),
    pytest.param("PodTopologySpread", make_pod("p").labels(app="web").spread(1, "topology.kubernetes.io/zone",
                                                                           hard=False, app="web"),
                 id="PodTopologySpread"),
])
def test_scoring_no_nodes_gives_no_scores(plugin, incoming):
    assert run_score(plugin, [], incoming) == {}


def test_inter_pod_affinity_normalises_in_float64_as_kubernetes_does():
    host = "kubernetes.io/hostname"
    nodes = [make_node(n) for n in "abcd"]
    existing = [make_pod("x").labels(app="x").node("a"), make_pod("y").labels(app="y").node("b"),
                make_pod("z").labels(app="z").node("d")]
    incoming = (make_pod("p").prefer_affinity(29, host, app="x").prefer_affinity(100, host, app="y")
                .prefer_anti_affinity(5, host, app="z"))
    assert run_score("InterPodAffinity", nodes, incoming, existing, raw=True) == {"a": 29, "b": 100, "c": 0, "d": -5}
    # int64(100 * ((s - min) / (max - min))) with min -5, max 100: 32.38 → 32, 100, 4.76 → 4, 0.
    assert run_score("InterPodAffinity", nodes, incoming, existing) == {"a": 32, "b": 100, "c": 4, "d": 0}


def test_inter_pod_affinity_truncates_a_quotient_float64_rounds_just_below_an_integer():
    host = "kubernetes.io/hostname"
    nodes = [make_node(n) for n in "abc"]
    existing = [make_pod("x").labels(app="x").node("a"), make_pod("y").labels(app="y").node("b")]
    incoming = make_pod("p").prefer_affinity(29, host, app="x").prefer_affinity(100, host, app="y")
    # 100 * (29 / 100) is 28.999999999999996 in float64: Kubernetes scores it 28.
    assert run_score("InterPodAffinity", nodes, incoming, existing) == {"a": 28, "b": 100, "c": 0}


# --- PodTopologySpread -------------------------------------------------------------------------------

ZONE = "topology.kubernetes.io/zone"
ZONED = [make_node("a").zone("z1"), make_node("b").zone("z1"), make_node("c").zone("z2"), make_node("d").zone("z3")]
LN5 = math.log(5)  # three zones among the scored nodes: ln(3 + 2)


def webs(**per_node: int):
    return [make_pod(f"w-{node}-{i}").labels(app="web").node(node) for node, n in per_node.items() for i in range(n)]


@pytest.mark.parametrize("skew, existing, raw, normalised", [
    pytest.param(1, webs(a=2, c=1), {"a": 3, "b": 3, "c": 2, "d": 0}, {"a": 0, "b": 0, "c": 33, "d": 100},
                 id="raw round(count * ln 5) per zone; 100 * (max + min - s) / max with min 0"),
    pytest.param(1, webs(a=2, c=1, d=1), {"a": 3, "b": 3, "c": 2, "d": 2}, {"a": 66, "b": 66, "c": 100, "d": 100},
                 id="the minimum counts: 100 * (3 + 2 - 3) / 3 = 66, and the emptiest zones score exactly 100"),
    pytest.param(2, webs(a=2, c=1, d=1), {"a": 4, "b": 4, "c": 3, "d": 3}, {"a": 75, "b": 75, "c": 100, "d": 100},
                 id="maxSkew - 1 is added to every raw score: 100 * (4 + 3 - 4) / 4 = 75"),
])
def test_pod_topology_spread_scores_equal_kube_scheduler(skew, existing, raw, normalised):
    incoming = make_pod("p").labels(app="web").spread(skew, ZONE, hard=False, app="web")
    assert run_score("PodTopologySpread", ZONED, incoming, existing, raw=True) == raw
    assert run_score("PodTopologySpread", ZONED, incoming, existing) == normalised
    assert round(2 * LN5) == 3 and round(LN5) == 2  # the raw values above, spelled out


def test_a_node_missing_the_key_of_the_pod_s_own_constraint_is_not_scored():
    nodes = ZONED + [make_node("e")]
    incoming = make_pod("p").labels(app="web").spread(1, ZONE, hard=False, app="web")
    scores = run_score("PodTopologySpread", nodes, incoming, webs(a=2, c=1, d=1))
    assert scores == {"a": 66, "b": 66, "c": 100, "d": 100, "e": 0}


def test_system_default_spreading_still_spreads_nodes_without_a_zone_by_hostname():
    # Defaults: hostname maxSkew 3 (3 nodes scored: ln 5) and zone maxSkew 5 (domains z1 and the
    # empty value of the unlabelled node: ln 4). a: round(1*ln5 + 2 + 1*ln4 + 4) = 9;
    # b: round(2 + 1*ln4 + 4) = 7; c (no zone: hostname only): 2. Normalised with max 9, min 2.
    nodes = [make_node("a").zone("z1"), make_node("b").zone("z1"), make_node("c")]
    existing = [make_pod("w").labels(app="web").controlled().node("a")]
    incoming = make_pod("p").labels(app="web").controlled()
    assert run_score("PodTopologySpread", nodes, incoming, existing, raw=True) == {"a": 9, "b": 7, "c": 2}
    assert run_score("PodTopologySpread", nodes, incoming, existing) == {"a": 22, "b": 44, "c": 100}


def test_a_node_missing_the_key_of_any_own_constraint_neither_is_scored_nor_counts_toward_the_others():
    # Soft constraints on the zone and on a rack. b has no rack and d no zone: neither is scored,
    # and their pods count in no domain (Kubernetes counts only nodes with every key). Over the
    # scored a and c: zone z1 holds a's 1 pod (not b's 2), rack r1 a's 1 (not d's 2); two zones and
    # two racks among them: a = round(1 * ln 4 + 1 * ln 4) = 3, c = 0.
    nodes = [make_node("a").zone("z1").label("rack", "r1"), make_node("b").zone("z1"),
             make_node("c").zone("z2").label("rack", "r2"), make_node("d").label("rack", "r1")]
    incoming = (make_pod("p").labels(app="web").spread(1, ZONE, hard=False, app="web")
                .spread(1, "rack", hard=False, app="web"))
    existing = webs(a=1, b=2, d=2)
    raw = run_score("PodTopologySpread", nodes, incoming, existing, raw=True)
    assert (raw["a"], raw["c"]) == (3, 0) and math.isnan(raw["b"]) and math.isnan(raw["d"])
    assert round(2 * math.log(4)) == 3
    assert run_score("PodTopologySpread", nodes, incoming, existing) == {"a": 0, "b": 0, "c": 100, "d": 0}


def test_no_node_with_the_key_of_the_pod_s_own_constraint_scores_every_node_0():
    incoming = make_pod("p").labels(app="web").spread(1, "rack", hard=False, app="web")
    assert run_score("PodTopologySpread", ZONED, incoming, webs(a=1)) == {"a": 0, "b": 0, "c": 0, "d": 0}


def test_no_matching_pod_anywhere_scores_every_node_100():
    incoming = make_pod("p").labels(app="web").spread(1, ZONE, hard=False, app="web")
    assert run_score("PodTopologySpread", ZONED, incoming, raw=True) == {"a": 0, "b": 0, "c": 0, "d": 0}
    assert run_score("PodTopologySpread", ZONED, incoming) == {"a": 100, "b": 100, "c": 100, "d": 100}
