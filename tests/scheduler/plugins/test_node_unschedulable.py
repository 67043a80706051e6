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
