import pytest

from corral.scheduler.plugins.node_ready import NOT_READY
from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import run_filter


@pytest.mark.parametrize(
    "node, rejected",
    [
        pytest.param(make_node("n"), False, id="a ready node with a fresh heartbeat takes pods"),
        pytest.param(make_node("n").heartbeat_age(89), False, id="a heartbeat 89 s old is still fresh"),
        pytest.param(make_node("n").heartbeat_age(91), True, id="a node that stopped heartbeating 91 s ago is not chosen"),
        pytest.param(make_node("n").not_ready(), True, id="a node that reports NotReady is not chosen"),
    ],
)
def test_node_ready(node, rejected):
    assert bool(run_filter("NodeReady", [node], make_pod("p"))["n"]) is rejected


def test_freshness_is_configurable():
    node = make_node("n").heartbeat_age(100)
    assert run_filter("NodeReady", [node], make_pod("p"), args={"heartbeatFreshnessSeconds": 120}) == {"n": []}


def test_the_reason_says_not_ready():
    assert run_filter("NodeReady", [make_node("n").not_ready()], make_pod("p")) == {"n": [NOT_READY]}
