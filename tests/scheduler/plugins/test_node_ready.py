import pytest

from corral.scheduler.cache.node_table import parse_timestamp
from corral.scheduler.plugins.node_ready import NOT_READY
from corral.testing.builders import make_node, make_pod
from corral.scheduler.framework.interface import ALL_PASS
from corral.testing.scheduler_harness import filter_result, run_filter


BEAT = "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(
    "node, age, rejected",
    [
        pytest.param(make_node("n").heartbeat_at(BEAT), 1, False, id="a ready node with a fresh heartbeat takes pods"),
        pytest.param(make_node("n").heartbeat_at(BEAT), 89, False, id="a heartbeat 89 s old is still fresh"),
        pytest.param(make_node("n").heartbeat_at(BEAT), 91, True,
                     id="a node that stopped heartbeating 91 s ago is not chosen"),
        pytest.param(make_node("n").heartbeat_at(BEAT).not_ready(), 1, True,
                     id="a node that reports NotReady is not chosen"),
    ],
)
def test_node_ready(node, age, rejected):
    now = parse_timestamp(BEAT) + age
    assert bool(run_filter("NodeReady", [node], make_pod("p"), clock=lambda: now)["n"]) is rejected


def test_freshness_is_configurable():
    node = make_node("n").heartbeat_at(BEAT)
    now = parse_timestamp(BEAT) + 100
    assert run_filter("NodeReady", [node], make_pod("p"), args={"heartbeatFreshnessSeconds": 120},
                      clock=lambda: now) == {"n": []}


def test_the_reason_says_not_ready():
    assert run_filter("NodeReady", [make_node("n").not_ready()], make_pod("p")) == {"n": [NOT_READY]}


@pytest.mark.parametrize("age, rejected", [
    pytest.param(90.0, False, id="exactly the 90 s freshness: still fresh"),
    pytest.param(90.001, True, id="a millisecond more: stale"),
])
def test_the_freshness_boundary(age, rejected):
    now = parse_timestamp(BEAT) + age
    node = make_node("n").heartbeat_at(BEAT)
    assert run_filter("NodeReady", [node], make_pod("p"), clock=lambda: now)["n"] == (
        ["node(s) had no heartbeat for more than 90s"] if rejected else [])


def test_a_node_not_ready_or_silent_is_no_place_preemption_could_make_room_on():
    # Unresolvable: evicting pods there would not make the node take the pod (Kubernetes'
    # UnschedulableAndUnresolvable), so preemption must not look at it.
    now = parse_timestamp(BEAT) + 100
    nodes = [make_node("down").heartbeat_at(BEAT).not_ready(), make_node("silent").heartbeat_at(BEAT),
             make_node("fine").heartbeat_at("2026-01-01T00:01:30Z")]
    result = filter_result("NodeReady", nodes, make_pod("p"), clock=lambda: now)
    assert [(r.message, bool(r.unresolvable), list(r.rows[:3])) for r in result.reasons] == [
        (NOT_READY, True, [True, False, False]),
        ("node(s) had no heartbeat for more than 90s", True, [False, True, False])]


def test_when_every_node_is_ready_the_plugin_says_so_at_once():
    result = filter_result("NodeReady", [make_node("n").heartbeat_at(BEAT)], make_pod("p"),
                           clock=lambda: parse_timestamp(BEAT) + 1)
    assert result is ALL_PASS  # the framework skips this plugin's mask entirely


@pytest.mark.parametrize("age, rejected", [
    pytest.param(269, False, id="3 nodes at 0.2 renewals/s of 5 s heartbeats: factor 3, fresh for 270 s"),
    pytest.param(271, True, id="past the scaled freshness: stale, and the reason says how long"),
])
def test_the_freshness_grows_with_the_node_count_past_the_heartbeat_rate(age, rejected):
    now = parse_timestamp(BEAT) + age
    nodes = [make_node(n).heartbeat_at(BEAT) for n in ("a", "b", "c")]
    args = {"nodeHeartbeatSeconds": 5, "maxNodeHeartbeatsPerSecond": 0.2}
    assert run_filter("NodeReady", nodes, make_pod("p"), args=args, clock=lambda: now)["a"] == (
        ["node(s) had no heartbeat for more than 270s"] if rejected else [])
    # The same cluster below the rate (1 renewal/s): the 90 s freshness holds.
    assert run_filter("NodeReady", nodes, make_pod("p"), clock=lambda: now)["a"] == [
        "node(s) had no heartbeat for more than 90s"]


def test_heartbeat_settings_that_are_not_positive_are_a_configuration_error():
    with pytest.raises(ValueError, match="must be positive"):
        run_filter("NodeReady", [make_node("n")], make_pod("p"), args={"maxNodeHeartbeatsPerSecond": 0})
