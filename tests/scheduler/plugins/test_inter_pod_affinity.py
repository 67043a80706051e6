import pytest

from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import run_filter, run_score

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
NODES = [make_node("a1").zone("z1"), make_node("a2").zone("z1"), make_node("b1").zone("z2")]


def passing(pod, existing=(), namespaces=None) -> set[str]:
    result = run_filter("InterPodAffinity", NODES, pod, list(existing), namespaces=namespaces)
    return {n for n, r in result.items() if not r}


@pytest.mark.parametrize(
    "pod, existing, expected",
    [
        pytest.param(make_pod("p").anti_affinity(HOST, app="web"), [make_pod("w").labels(app="web").node("a1")],
                     {"a2", "b1"}, id="required anti-affinity on hostname avoids the node with a match"),
        pytest.param(make_pod("p").anti_affinity(ZONE, app="web"), [make_pod("w").labels(app="web").node("a1")],
                     {"b1"}, id="required anti-affinity on zone avoids the whole zone"),
        pytest.param(make_pod("p").affinity(ZONE, app="db"), [make_pod("d").labels(app="db").node("b1")],
                     {"b1"}, id="required affinity needs a match in the domain"),
        pytest.param(make_pod("p").labels(app="db").affinity(ZONE, app="db"), [], {"a1", "a2", "b1"},
                     id="the first pod of a group that selects itself may go anywhere"),
        pytest.param(make_pod("p").affinity(ZONE, app="db"), [], set(),
                     id="required affinity with no match anywhere fits nowhere"),
        pytest.param(make_pod("p").labels(app="web"), [make_pod("x").anti_affinity(HOST, app="web").node("a2")],
                     {"a1", "b1"}, id="an existing pod's anti-affinity keeps matching pods off its node"),
        pytest.param(make_pod("p").anti_affinity(HOST, app="web"),
                     [make_pod("w", "other").labels(app="web").node("a1")], {"a1", "a2", "b1"},
                     id="terms apply to the pod's own namespace by default"),
        pytest.param(make_pod("p").anti_affinity(HOST, namespaces=["other"], app="web"),
                     [make_pod("w", "other").labels(app="web").node("a1")], {"a2", "b1"},
                     id="listed namespaces are searched"),
    ],
)
def test_filter(pod, existing, expected):
    assert passing(pod, existing) == expected


def test_namespace_selectors_pick_namespaces_by_label():
    pod = make_pod("p")._pod_term("podAntiAffinity", True, HOST, {"app": "web"},
                                  namespace_selector={"matchLabels": {"team": "blue"}})
    existing = [make_pod("w", "blue-ns").labels(app="web").node("a1"), make_pod("v", "red-ns").labels(app="web").node("b1")]
    assert passing(pod, existing, {"blue-ns": {"team": "blue"}, "red-ns": {"team": "red"}}) == {"a2", "b1"}


def test_preferred_affinity_and_anti_affinity_move_the_score():
    existing = [make_pod("d").labels(app="db").node("a1"), make_pod("c").labels(app="cache").node("b1")]
    pod = make_pod("p").prefer_affinity(50, ZONE, app="db").prefer_anti_affinity(50, HOST, app="cache")
    scores = run_score("InterPodAffinity", NODES, pod, existing)
    assert scores["a1"] == scores["a2"] == 100.0 and scores["b1"] == 0.0


def test_each_node_is_told_the_first_rule_it_breaks_and_only_that():
    # a1: an existing pod's anti-affinity (and the pod's own); a2: the pod's own anti-affinity;
    # b1: its affinity (no db pod in z2).
    existing = [make_pod("x").anti_affinity(HOST, app="web").node("a1"), make_pod("w").labels(app="cache").node("a1"),
                make_pod("d").labels(app="db").node("a2")]
    pod = make_pod("p").labels(app="web").anti_affinity(ZONE, app="cache").affinity(ZONE, app="db")
    result = run_filter("InterPodAffinity", NODES, pod, existing)
    assert result == {"a1": ["node(s) didn't satisfy existing pods anti-affinity rules"],
                      "a2": ["node(s) didn't match pod anti-affinity rules"],
                      "b1": ["node(s) didn't match pod affinity rules"]}


def test_a_node_breaking_an_existing_pods_rule_and_the_pods_affinity_is_told_the_first_only():
    existing = [make_pod("x").anti_affinity(HOST, app="web").node("a1"), make_pod("d").labels(app="db").node("b1")]
    pod = make_pod("p").labels(app="web").affinity(ZONE, app="db")
    assert run_filter("InterPodAffinity", NODES, pod, existing) == {
        "a1": ["node(s) didn't satisfy existing pods anti-affinity rules"],
        "a2": ["node(s) didn't match pod affinity rules"], "b1": []}


def test_every_term_counts_not_only_the_last():
    two_anti = make_pod("p").anti_affinity(HOST, app="web").anti_affinity(HOST, app="db")
    spread = [make_pod("w").labels(app="web").node("a1"), make_pod("d").labels(app="db").node("b1")]
    assert passing(two_anti, spread) == {"a2"}
    carriers = [make_pod("x").anti_affinity(HOST, app="web").node("a1"),
                make_pod("y").anti_affinity(HOST, tier="front").node("b1")]
    assert passing(make_pod("p").labels(app="web", tier="front"), carriers) == {"a2"}
    two_affinity = make_pod("p").affinity(HOST, app="cache").affinity(ZONE, app="db")
    together = [make_pod("c").labels(app="cache").node("a1"), make_pod("d").labels(app="db").node("a2")]
    assert passing(two_affinity, together) == {"a1"}  # only a1 has the cache, and z1 a db


def test_the_first_pod_of_a_group_needs_every_terms_topology_key():
    nodes = [*NODES, make_node("bare")]  # a hostname but no zone
    pod = make_pod("p").labels(app="db", tier="x").affinity(ZONE, app="db").affinity(HOST, tier="x")
    result = run_filter("InterPodAffinity", nodes, pod, [])
    assert {n for n, r in result.items() if not r} == {"a1", "a2", "b1"}


def test_namespace_selectors_count_for_existing_pods_terms_and_for_a_group_that_selects_itself():
    namespaces = {"blue-ns": {"team": "blue"}, "red-ns": {"team": "red"}}
    carrier = make_pod("x", "other")._pod_term("podAntiAffinity", True, HOST, {"app": "web"},
                                               namespace_selector={"matchLabels": {"team": "blue"}}).node("a1")
    assert passing(make_pod("p", "blue-ns").labels(app="web"), [carrier], namespaces) == {"a2", "b1"}
    assert passing(make_pod("p", "red-ns").labels(app="web"), [carrier], namespaces) == {"a1", "a2", "b1"}
    first = make_pod("p", "blue-ns").labels(app="db")._pod_term(
        "podAffinity", True, ZONE, {"app": "db"}, namespace_selector={"matchLabels": {"team": "blue"}})
    assert passing(first, [], namespaces) == {"a1", "a2", "b1"}


def test_existing_pods_preferences_about_the_incoming_pod_move_its_score_both_ways():
    # x (on a1, zone z1) would rather not share a zone with web pods; y (on b1) would like one on
    # its node: raw scores a1 = a2 = -50, b1 = +30, as Kubernetes counts them (symmetry).
    existing = [make_pod("x").prefer_anti_affinity(50, ZONE, app="web").node("a1"),
                make_pod("y").prefer_affinity(30, HOST, app="web").node("b1")]
    pod = make_pod("p").labels(app="web")
    assert run_score("InterPodAffinity", NODES, pod, existing, raw=True) == {"a1": -50.0, "a2": -50.0, "b1": 30.0}
    assert run_score("InterPodAffinity", NODES, pod, existing) == {"a1": 0.0, "a2": 0.0, "b1": 100.0}
    other = make_pod("p", "elsewhere").labels(app="web")  # their terms look in their own namespace only
    assert run_score("InterPodAffinity", NODES, other, existing, raw=True) == {"a1": 0.0, "a2": 0.0, "b1": 0.0}


def test_equal_scores_normalise_to_zero_for_every_node():
    pod = make_pod("p").prefer_affinity(10, ZONE, app="nobody")
    assert run_score("InterPodAffinity", NODES, pod, []) == {"a1": 0.0, "a2": 0.0, "b1": 0.0}


def test_nodes_without_the_topology_key_are_in_no_domain_and_count_nothing():
    # A web pod on a node without a zone puts no zone off limits, and that node is in no zone either.
    nodes = [*NODES, make_node("bare")]
    result = run_filter("InterPodAffinity", nodes, make_pod("p").anti_affinity(ZONE, app="web"),
                        [make_pod("w").labels(app="web").node("bare")])
    assert {n for n, r in result.items() if not r} == {"a1", "a2", "b1", "bare"}
    prefers = make_pod("p").prefer_anti_affinity(10, ZONE, app="web")
    assert run_score("InterPodAffinity", nodes, prefers, [make_pod("w").labels(app="web").node("bare")],
                     raw=True) == {"a1": 0.0, "a2": 0.0, "b1": 0.0, "bare": 0.0}


def test_existing_pods_preferences_reach_namespaces_their_selector_picks():
    namespaces = {"blue-ns": {"team": "blue"}, "red-ns": {"team": "red"}}
    carrier = make_pod("x", "ops")._pod_term("podAntiAffinity", False, ZONE, {"app": "web"}, 40,
                                             namespace_selector={"matchLabels": {"team": "blue"}}).node("a1")
    blue = run_score("InterPodAffinity", NODES, make_pod("p", "blue-ns").labels(app="web"), [carrier],
                     namespaces=namespaces, raw=True)
    red = run_score("InterPodAffinity", NODES, make_pod("p", "red-ns").labels(app="web"), [carrier],
                    namespaces=namespaces, raw=True)
    assert blue == {"a1": -40.0, "a2": -40.0, "b1": 0.0} and red == {"a1": 0.0, "a2": 0.0, "b1": 0.0}


@pytest.mark.parametrize("pod, existing, namespaces", [
    pytest.param(make_pod("p").anti_affinity(HOST, app="web").anti_affinity(HOST, app="db"),
                 [make_pod("w").labels(app="web").node("a1"), make_pod("d").labels(app="db").node("b1")], None,
                 id="two terms of its own, each ruling out a node"),
    pytest.param(make_pod("p").labels(app="web", tier="front"),
                 [make_pod("x").anti_affinity(HOST, app="web").node("a1"),
                  make_pod("y").anti_affinity(HOST, tier="front").node("b1")], None,
                 id="two existing pods' terms, each ruling out its node"),
    pytest.param(make_pod("p", "blue-ns").labels(app="web"),
                 [make_pod("x", "other")._pod_term("podAntiAffinity", True, HOST, {"app": "web"}, namespace_selector={
                     "matchLabels": {"team": "blue"}}).node("a1")], {"blue-ns": {"team": "blue"}},
                 id="an existing pod's term selecting namespaces by label"),
    pytest.param(make_pod("p").anti_affinity(HOST, app="web"), [make_pod("w").labels(app="db").node("a1")], None,
                 id="nothing to avoid: every node"),
])
def test_the_row_by_row_paths_agree_with_the_whole_filter(pod, existing, namespaces):
    """What the scheduler asks of the nodes a placement changed (filter_rows, filter_one) answers as
    the whole filter does, for a pod whose rules all hold node by node."""
    import time

    import numpy as np

    from corral.scheduler.framework.interface import CycleState
    from corral.scheduler.framework.podinfo import PodInfo
    from corral.testing.scheduler_harness import _plugin, build_cache

    cache = build_cache(NODES, existing, namespaces)
    plugin = _plugin("InterPodAffinity", cache, None, time.time)
    info, state, n = PodInfo.from_object(pod.obj), CycleState(), cache.table.size
    plugin.pre_filter(state, info)
    assert plugin.row_local(info)
    whole = plugin.filter(state, info, cache.table.valid[:n].copy()).passed
    assert list(plugin.filter_rows(state, info, np.arange(n))) == list(whole)
    assert [plugin.filter_one(state, info, row) for row in range(n)] == list(whole)
    expected = set(passing(pod, existing, namespaces))
    assert {cache.table.names[row] for row in range(n) if whole[row]} == expected
