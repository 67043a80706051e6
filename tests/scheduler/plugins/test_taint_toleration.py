import pytest

from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import run_filter, run_score

REASON = "node(s) had untolerated taint(s)"
NODES = [make_node("plain"), make_node("gpu").taint("dedicated", "gpu", "NoSchedule"),
         make_node("gone").taint("node.kubernetes.io/unreachable", "", "NoExecute")]


@pytest.mark.parametrize(
    "pod, expected",
    [
        pytest.param(make_pod("p"), {"plain": [], "gpu": [REASON], "gone": [REASON]},
                     id="a pod without tolerations stays off tainted nodes"),
        pytest.param(make_pod("p").toleration("dedicated", "gpu", "NoSchedule"), {"plain": [], "gpu": [], "gone": [REASON]},
                     id="pod tolerating the dedicated taint fits"),
        pytest.param(make_pod("p").toleration("dedicated", operator="Exists"), {"plain": [], "gpu": [], "gone": [REASON]},
                     id="an Exists toleration matches any value and effect"),
        pytest.param(make_pod("p").toleration("dedicated", "cpu", "NoSchedule"), {"plain": [], "gpu": [REASON], "gone": [REASON]},
                     id="a toleration for another value does not match"),
        pytest.param(make_pod("p").toleration("dedicated", "gpu", "NoExecute"), {"plain": [], "gpu": [REASON], "gone": [REASON]},
                     id="a toleration for another effect does not match"),
        pytest.param(make_pod("p").toleration(operator="Exists"), {"plain": [], "gpu": [], "gone": []},
                     id="an empty key with Exists tolerates everything"),
    ],
)
def test_filter(pod, expected):
    assert run_filter("TaintToleration", NODES, pod) == expected


def test_prefer_no_schedule_only_lowers_the_score():
    nodes = [make_node("plain"), make_node("soft").taint("spot", "true", "PreferNoSchedule")]
    assert run_filter("TaintToleration", nodes, make_pod("p")) == {"plain": [], "soft": []}
    assert run_score("TaintToleration", nodes, make_pod("p")) == {"plain": 100.0, "soft": 0.0}
    tolerating = make_pod("p").toleration("spot", "true", "PreferNoSchedule")
    assert run_score("TaintToleration", nodes, tolerating) == {"plain": 100.0, "soft": 100.0}


@pytest.mark.parametrize("one, other", [
    pytest.param({"key": "gpu", "operator": "Equal", "value": 5}, {"key": "gpu", "operator": "Equal", "value": 6},
                 id="values that are not text"),
    pytest.param({"key": "gpu", "value": ["a"]}, {"key": "gpu", "value": ["b"]}, id="values in a list"),
    pytest.param({"key": "gpu", "value": {"x": "a"}}, {"key": "gpu", "value": {"x": "b"}}, id="values in a map"),
])
def test_tolerations_validation_would_refuse_still_sign_pods_apart(one, other):
    """Pods reach the scheduler in-process without the API's validation; a toleration it would refuse
    is kept whole in the pod's signature, so two such pods never share a remembered decision."""
    from corral.scheduler.framework.podinfo import PodInfo
    from corral.scheduler.plugins.taint_toleration import frozen_tolerations

    def signed(toleration):
        obj = make_pod("p").obj
        obj["spec"]["tolerations"] = [toleration]
        return frozen_tolerations(PodInfo.from_object(obj))

    assert signed(one) != signed(other)
    assert signed(one) == signed(dict(one))


def test_a_prefer_no_schedule_taint_first_seen_after_some_cycles_brings_the_score_in():
    """PreScore remembers whether any node's taint prefers no scheduling: a node tainted so later
    (a taint the table has not seen before) is scored lower from the next cycle on."""
    from corral.scheduler.framework.interface import CycleState, Handle
    from corral.scheduler.framework.podinfo import PodInfo
    from corral.scheduler.framework.status import Code
    from corral.scheduler.plugins.taint_toleration import TaintToleration
    from corral.testing.scheduler_harness import build_cache

    cache = build_cache([make_node("plain"), make_node("soft").taint("dedicated", "x", "NoSchedule")])
    plugin = TaintToleration(Handle(cache, lambda: 0.0))
    pod = PodInfo.from_object(make_pod("p").obj)
    assert plugin.pre_score(CycleState(), pod, slice(0, 2)).code is Code.SKIP
    cache.set_node(make_node("soft").taint("spot", "true", "PreferNoSchedule").obj)
    assert plugin.pre_score(CycleState(), pod, slice(0, 2)).code is Code.SUCCESS
