from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import run_filter

REASON = "node(s) didn't have free ports for the requested pod ports"


def test_a_host_port_in_use_keeps_the_pod_off_that_node():
    nodes = [make_node("a"), make_node("b")]
    existing = [make_pod("web").host_port(8080).node("a")]
    assert run_filter("NodePorts", nodes, make_pod("p").host_port(8080), existing) == {"a": [REASON], "b": []}


def test_another_protocol_or_port_does_not_conflict():
    nodes = [make_node("a")]
    existing = [make_pod("web").host_port(8080).node("a")]
    assert run_filter("NodePorts", nodes, make_pod("p").host_port(8080, "UDP"), existing) == {"a": []}
    assert run_filter("NodePorts", nodes, make_pod("p").host_port(8081), existing) == {"a": []}


def test_the_port_is_free_again_when_its_pod_finishes():
    nodes = [make_node("a")]
    existing = [make_pod("web").host_port(8080).node("a").phase("Failed")]
    assert run_filter("NodePorts", nodes, make_pod("p").host_port(8080), existing) == {"a": []}


def test_each_of_a_pods_host_ports_must_be_free():
    nodes = [make_node("a"), make_node("b"), make_node("c")]
    existing = [make_pod("web").host_port(80).node("a"), make_pod("tls").host_port(443).node("b")]
    pod = make_pod("p").host_port(80).host_port(443)
    assert run_filter("NodePorts", nodes, pod, existing) == {"a": [REASON], "b": [REASON], "c": []}
