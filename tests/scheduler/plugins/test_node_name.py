from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import run_filter

NODES = [make_node("a"), make_node("b")]


def test_a_pod_naming_a_node_fits_only_there():
    pod = make_pod("p")
    pod.spec["nodeName"] = "b"
    assert run_filter("NodeName", NODES, pod) == {"a": ["node(s) didn't match the requested node name"], "b": []}


def test_a_pod_naming_no_node_fits_everywhere():
    assert run_filter("NodeName", NODES, make_pod("p")) == {"a": [], "b": []}
