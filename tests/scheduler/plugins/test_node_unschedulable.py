import pytest

from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import run_filter

NODES = [make_node("cordoned").unschedulable(), make_node("open")]


@pytest.mark.parametrize(
    "pod, expected",
    [
        pytest.param(make_pod("p"), {"cordoned": ["node(s) were unschedulable"], "open": []},
                     id="a cordoned node takes no new pods"),
        pytest.param(make_pod("p").toleration("node.kubernetes.io/unschedulable", effect="NoSchedule"),
                     {"cordoned": [], "open": []}, id="a pod tolerating the unschedulable taint may go there"),
        pytest.param(make_pod("p").toleration(operator="Exists"), {"cordoned": [], "open": []},
                     id="a pod tolerating everything may go there"),
    ],
)
def test_node_unschedulable(pod, expected):
    assert run_filter("NodeUnschedulable", NODES, pod) == expected


TAINT = "node.kubernetes.io/unschedulable"


@pytest.mark.parametrize("toleration, tolerates", [
    pytest.param({"key": TAINT, "operator": "Exists"}, True, id="the taint's key, Exists"),
    pytest.param({"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}, True, id="with its effect"),
    pytest.param({"key": TAINT, "operator": "Exists", "value": "x"}, True, id="Exists ignores a value"),
    pytest.param({"key": TAINT}, True, id="the key alone: Equal to the taint's empty value"),
    pytest.param({"key": TAINT, "operator": "Equal", "value": ""}, True, id="Equal to the empty value"),
    pytest.param({"key": TAINT, "operator": "Equal", "value": "yes"}, False, id="Equal to another value"),
    pytest.param({"key": TAINT, "operator": "Exists", "effect": "NoExecute"}, False, id="another effect"),
    pytest.param({"key": TAINT, "operator": "Exists", "effect": "PreferNoSchedule"}, False,
                 id="PreferNoSchedule is another effect"),
    pytest.param({"operator": "Exists"}, True, id="no key and Exists: every taint"),
    pytest.param({"operator": "Exists", "effect": "NoSchedule"}, True, id="every NoSchedule taint"),
    pytest.param({"operator": "Exists", "effect": "NoExecute"}, False, id="every NoExecute taint only"),
    pytest.param({"key": "other", "operator": "Exists"}, False, id="another key"),
    pytest.param({"operator": "Equal"}, False, id="no key and Equal tolerates nothing"),
    pytest.param({}, False, id="an empty toleration tolerates nothing"),
])
def test_which_tolerations_let_a_pod_onto_a_cordoned_node(toleration, tolerates):
    from corral.scheduler.plugins.node_unschedulable import tolerates_unschedulable

    assert tolerates_unschedulable([{"key": "x", "operator": "Exists", "effect": "NoExecute"}, toleration]) is tolerates
    pod = make_pod("p")
    pod.spec["tolerations"] = [toleration]
    assert run_filter("NodeUnschedulable", NODES, pod)["cordoned"] == ([] if tolerates else ["node(s) were unschedulable"])


def test_with_no_node_cordoned_every_node_passes():
    assert run_filter("NodeUnschedulable", [make_node("a"), make_node("b")], make_pod("p")) == {"a": [], "b": []}
