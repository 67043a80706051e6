"""The scheduler as a whole, through the harness: real cycles, recorded bindings."""

from __future__ import annotations

from collections import Counter

import pytest

from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import Harness

HOST = "kubernetes.io/hostname"


async def test_a_burst_of_100_pods_onto_10_empty_nodes_spreads_evenly_and_never_overcommits():
    h = Harness()
    for i in range(10):
        h.add_node(make_node(f"n{i}").capacity(cpu=4, memory="32Gi", pods=110))
    for i in range(100):
        h.add_pod(make_pod(f"p{i}").requests(cpu="350m", memory="1Gi"))
    await h.run()
    per_node = Counter(h.placements().values())
    assert sorted(per_node.values()) == [10] * 10
    # 11 pods of 350m would exceed 4 cpu: assumed pods counted at once is what keeps this true.
    assert all(n * 350 <= 4000 for n in per_node.values())


async def test_pods_that_do_not_fit_stay_pending_with_kubernetes_message_and_an_event():
    h = Harness()
    h.add_node(make_node("small").capacity(cpu=1, memory="1Gi", pods=10))
    h.add_node(make_node("gpu").taint("dedicated", "gpu"))
    h.add_pod(make_pod("big").requests(cpu="2"))
    await h.run()
    assert h.pending() == ["default/big"]
    message = "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s)."
    assert h.writer.conditions["default/big"]["message"] == message
    assert h.writer.conditions["default/big"]["reason"] == "Unschedulable"
    assert ("default/big", "FailedScheduling", message) in h.writer.events


async def test_a_cordoned_node_is_skipped_but_its_pods_keep_running():
    h = Harness()
    h.add_node(make_node("cordoned").unschedulable())
    h.add_node(make_node("open"))
    running = make_pod("old").requests(cpu="1").node("cordoned")
    h.add_pod(running)
    for i in range(5):
        h.add_pod(make_pod(f"p{i}").requests(cpu="100m"))
    await h.run()
    assert set(h.placements().values()) == {"open"}
    assert "default/old" in h.scheduler.cache.pods  # still counted where it runs
    assert h.scheduler.cache.pods["default/old"].row == h.scheduler.cache.table.row_of["cordoned"]


async def test_a_pod_with_required_anti_affinity_against_itself_gets_at_most_one_replica_per_node():
    h = Harness()
    for i in range(4):
        h.add_node(make_node(f"n{i}"))
    for i in range(6):
        h.add_pod(make_pod(f"web-{i}").labels(app="web").anti_affinity(HOST, app="web"))
    await h.run()
    per_node = Counter(h.placements().values())
    assert len(per_node) == 4 and max(per_node.values()) == 1
    assert len(h.pending()) == 2
    # Kubernetes checks existing pods' anti-affinity first, so that is the reason given.
    assert h.writer.conditions[h.pending()[0]]["message"] == (
        "0/4 nodes are available: 4 node(s) didn't satisfy existing pods anti-affinity rules.")


async def test_when_a_fifth_node_arrives_a_waiting_pod_is_placed():
    h = Harness()
    for i in range(2):
        h.add_node(make_node(f"n{i}"))
    for i in range(3):
        h.add_pod(make_pod(f"web-{i}").labels(app="web").anti_affinity(HOST, app="web"))
    await h.run()
    assert len(h.pending()) == 1
    h.add_node(make_node("n2"))
    await h.run()
    assert h.pending() == []


async def test_when_a_pod_is_deleted_its_room_goes_to_a_waiting_pod():
    h = Harness()
    h.add_node(make_node("n").capacity(cpu=1, memory="4Gi", pods=10))
    h.add_pod(make_pod("first").requests(cpu="800m"))
    await h.run()
    h.add_pod(make_pod("second").requests(cpu="800m"))
    await h.run()
    assert h.pending() == ["default/second"]
    h.delete_pod("default/first")
    await h.run()
    assert h.placements() == {"default/second": "n"}


async def test_with_20_percent_of_bindings_failing_every_pod_is_still_bound_exactly_once():
    h = Harness(fail_rate=0.2, seed=7)
    for i in range(8):
        h.add_node(make_node(f"n{i}").capacity(cpu=4, memory="16Gi", pods=40))
    for i in range(200):
        h.add_pod(make_pod(f"p{i}").requests(cpu="100m", memory="256Mi"))
    await h.run()
    assert h.pending() == []
    assert len(h.placements()) == 200
    assert h.writer.failed_binds > 0 and h.writer.double_binds == 0
    # Failed bindings were un-assumed: the cache counts each pod exactly once.
    table = h.scheduler.cache.table
    assert int(table.requested["pods"][: table.size].sum()) == 200
    assert int(table.requested["cpu"][: table.size].sum()) == 200 * 100


async def test_higher_priority_pods_are_tried_first():
    h = Harness()
    h.add_node(make_node("n").capacity(cpu=1, memory="4Gi", pods=10))
    h.add_pod(make_pod("low").requests(cpu="800m").priority(1))
    h.add_pod(make_pod("high").requests(cpu="800m").priority(1000))
    await h.run()
    assert h.placements() == {"default/high": "n"}


async def test_pods_for_another_scheduler_are_left_alone():
    h = Harness()
    h.add_node(make_node("n"))
    h.add_pod(make_pod("mine"))
    h.add_pod(make_pod("theirs").scheduler("other-scheduler"))
    await h.run()
    assert h.placements() == {"default/mine": "n"}
    assert "default/theirs" not in h.scheduler.queue


async def test_a_second_profile_schedules_its_own_pods_with_its_own_plugins():
    config = {"profiles": [
        {"schedulerName": "default-scheduler"},
        {"schedulerName": "packer", "pluginConfig": [
            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}],
         "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}}},
    ]}
    h = Harness(config)
    h.add_node(make_node("a"))
    h.add_node(make_node("b"))
    for i in range(6):
        h.add_pod(make_pod(f"p{i}").requests(cpu="200m", memory="1Gi").scheduler("packer"))
    await h.run()
    assert len(set(h.placements().values())) == 1  # MostAllocated packs


async def test_ties_are_broken_by_name_when_configured():
    h = Harness({"tieBreak": "name"})
    for name in ("c", "a", "b"):
        h.add_node(make_node(name))
    h.add_pod(make_pod("p"))
    await h.run()
    assert h.placements() == {"default/p": "a"}


async def test_random_tie_breaks_are_reproducible_with_a_seed():
    async def placements(seed: int) -> dict:
        h = Harness({"seed": seed})
        for i in range(20):
            h.add_node(make_node(f"n{i:02d}"))
        for i in range(5):
            h.add_pod(make_pod(f"p{i}"))
        await h.run()
        return h.placements()

    assert await placements(3) == await placements(3)


async def test_sampling_a_percentage_of_nodes_still_places_every_pod():
    h = Harness({"percentageOfNodesToScore": 10})
    for i in range(300):
        h.add_node(make_node(f"n{i:03d}").zone(f"z{i % 3}"))
    for i in range(50):
        h.add_pod(make_pod(f"p{i}").requests(cpu="100m"))
    await h.run()
    assert len(h.placements()) == 50


@pytest.mark.parametrize(
    "config, message",
    [
        pytest.param({"profiles": [{"plugins": {"score": {"enabled": [{"name": "Nope"}]}}}]}, "unknown plugin 'Nope'",
                     id="an unknown plugin is named"),
        pytest.param({"profiles": [{"plugins": {"scroe": {}}}]}, "unknown extension point",
                     id="an unknown extension point is named"),
        pytest.param({"percentageOfNodesToScore": 150}, "percentageOfNodesToScore", id="a bad percentage is named"),
        pytest.param({"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit",
                                                      "args": {"scoringStrategy": {"type": "Random"}}}]}]},
                     "scoringStrategy", id="a bad plugin argument is named"),
        pytest.param({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]}, "unique",
                     id="duplicate profiles are refused"),
    ],
)
def test_bad_configuration_is_refused_with_the_setting_named(config, message):
    from corral.scheduler.profiles import ConfigError, build_frameworks, parse_config
    from corral.scheduler.cache.cache import Cache

    with pytest.raises(ConfigError, match=message):
        build_frameworks(parse_config(config), cache=Cache(), clock=lambda: 0.0)
