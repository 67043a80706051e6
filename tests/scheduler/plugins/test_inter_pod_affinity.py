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
