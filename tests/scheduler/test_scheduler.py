"""The scheduler as a whole, through the harness: real cycles, recorded bindings."""

from __future__ import annotations

import asyncio
import contextlib
import time
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
    # Kubernetes' message, and what preemption made of it: a taint is not helped by removing pods.
    message = ("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s). preemption: 0/2 "
               "nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful "
               "for scheduling.")
    assert h.writer.conditions["default/big"]["message"] == message
    assert h.writer.conditions["default/big"]["reason"] == "Unschedulable"
    assert ("default/big", "FailedScheduling", message) in h.writer.events


async def test_a_removed_node_is_in_no_count_of_why_a_pod_is_pending():
    """A node gone leaves its row empty in the scheduler's table until another takes it: the
    message of a pod that fits nowhere, preemption's part too, counts the nodes there are."""
    h = Harness()
    h.add_node(make_node("small").capacity(cpu=1, memory="1Gi", pods=10))
    h.add_node(make_node("gone").capacity(cpu=1, memory="1Gi", pods=10))
    h.add_node(make_node("gpu").taint("dedicated", "gpu"))
    h.scheduler.node_changed("gone", None)
    h.add_pod(make_pod("big").requests(cpu="2"))
    await h.run()
    assert h.pending() == ["default/big"]
    assert h.writer.conditions["default/big"]["message"] == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s). preemption: 0/2 "
        "nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful "
        "for scheduling.")


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
        "0/4 nodes are available: 4 node(s) didn't satisfy existing pods anti-affinity rules. "
        "preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod.")


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
    # Twenty equally good nodes: another seed breaks the first tie differently.
    assert await placements(3) != await placements(4)


@pytest.mark.parametrize("percentage, scored", [
    pytest.param(100, 1000, id="100 percent scores every feasible node"),
    pytest.param(20, 200, id="20 percent of 1000 nodes scores 200"),
    pytest.param(5, 100, id="never fewer than 100 nodes"),
    pytest.param(0, 420, id="0 means Kubernetes' adaptive share: 50 - 1000/125 = 42 percent"),
])
def test_percentage_of_nodes_to_score_limits_how_many_nodes_are_scored(percentage, scored):
    from corral.scheduler.cache.cache import Cache
    from corral.scheduler.framework.podinfo import PodInfo
    from corral.scheduler.profiles import build_frameworks, parse_config
    from corral.scheduler.schedule_one import schedule_pod, zone_interleaved_order

    cache = Cache.from_objects([make_node(f"n{i:04d}").zone(f"z{i % 3}").obj for i in range(1000)], [], [])
    fwk = build_frameworks(parse_config({"percentageOfNodesToScore": percentage}), cache=cache,
                           clock=lambda: time.time())["default-scheduler"]
    result = schedule_pod(fwk, cache, PodInfo.from_object(make_pod("p").requests(cpu="100m").obj),
                          zone_interleaved_order(cache.table))
    assert (result.feasible, len(result.scores.rows)) == (1000, scored)
    zones = {cache.table.node_labels(int(r))["topology.kubernetes.io/zone"] for r in result.scores.rows}
    assert zones == {"z0", "z1", "z2"}  # a sample still spans every zone


async def test_sampling_a_percentage_of_nodes_still_places_every_pod():
    h = Harness({"percentageOfNodesToScore": 10})
    for i in range(300):
        h.add_node(make_node(f"n{i:03d}").zone(f"z{i % 3}"))
    for i in range(50):
        h.add_pod(make_pod(f"p{i}").requests(cpu="100m"))
    await h.run()
    assert len(h.placements()) == 50


async def test_the_scheduler_samples_in_zone_order_and_sees_nodes_added_since():
    h = Harness({"percentageOfNodesToScore": 10})
    for i in range(300):
        h.add_node(make_node(f"n{i:03d}").zone(f"z{i % 3}"))

    def attempt(name: str, nodes: int) -> set[str]:
        h.add_pod(make_pod(name).requests(cpu="100m"))
        result = h.scheduler.schedule_one(h.scheduler.queue.pop_nowait())
        assert (result.feasible, len(result.scores.rows)) == (nodes, 100)  # 10 %, but never under 100 scored
        return {h.scheduler.cache.table.node_labels(int(r))["topology.kubernetes.io/zone"] for r in result.scores.rows}

    assert attempt("a", 300) == {"z0", "z1", "z2"}
    for i in range(100):
        h.add_node(make_node(f"new{i:03d}").zone("z3"))
    assert attempt("b", 400) == {"z0", "z1", "z2", "z3"}


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


@pytest.mark.parametrize("weights, chosen", [
    pytest.param({}, "busy-ssd",
                 id="with the default weights the preferred ssd node wins: 48 + 51 + 2*100 beats 85 + 89"),
    pytest.param({"NodeResourcesFit": 5}, "idle",
                 id="weighting NodeResourcesFit 5 makes room win: 5*85 + 89 beats 5*48 + 51 + 200"),
    pytest.param({"NodeAffinity": 0}, "idle", id="weight 0 switches a score plugin off"),
])
async def test_score_weights_from_the_configuration_decide_between_nodes(weights, chosen):
    config = {"profiles": [{"plugins": {"score": {"enabled": [{"name": n, "weight": w} for n, w in weights.items()]}}}]}
    h = Harness(config)
    h.add_node(make_node("busy-ssd").label("disk", "ssd"))
    h.add_node(make_node("idle"))
    h.add_pod(make_pod("existing").requests(cpu="3").node("busy-ssd"))
    h.add_pod(make_pod("p").requests(cpu="1", memory="1Gi").prefer_node(1, "disk", "In", "ssd"))
    await h.run()
    assert h.placements()["default/p"] == chosen
    await h.scheduler.events.stop()


@pytest.mark.parametrize("zones, expected", [
    pytest.param(["b", "a", "b", "b", "a", "c"], [0, 1, 5, 2, 4, 3], id="round-robin over zones in order of first appearance"),
    pytest.param([None, None, None], [0, 1, 2], id="no zone labels: row order"),
    pytest.param(["a", None, "a", None], [0, 1, 2, 3], id="nodes without a zone form a zone of their own"),
])
def test_the_node_order_takes_one_node_per_zone_in_turn(zones, expected):
    from corral.scheduler.cache.cache import Cache
    from corral.scheduler.schedule_one import zone_interleaved_order

    nodes = []
    for i, zone in enumerate(zones):
        builder = make_node(f"n{i}")
        nodes.append((builder.zone(zone) if zone else builder).obj)
    cache = Cache.from_objects(nodes, [], [])
    assert list(zone_interleaved_order(cache.table)) == expected


def test_the_node_order_reads_the_legacy_zone_label_and_skips_removed_nodes():
    from corral.scheduler.cache.cache import Cache
    from corral.scheduler.schedule_one import zone_interleaved_order

    legacy = "failure-domain.beta.kubernetes.io/zone"
    cache = Cache.from_objects([make_node(f"n{i}").label(legacy, z).obj for i, z in enumerate("xxyy")], [], [])
    assert list(zone_interleaved_order(cache.table)) == [0, 2, 1, 3]
    cache.remove_node("n0")
    assert list(zone_interleaved_order(cache.table)) == [1, 2, 3]
    for name in ("n1", "n2", "n3"):
        cache.remove_node(name)
    assert list(zone_interleaved_order(cache.table)) == []


async def test_news_of_a_pod_whose_binding_is_on_its_way_neither_requeues_nor_uncounts_it():
    h = Harness()
    h.add_node(make_node("only").capacity(cpu=1, memory="4Gi", pods=10))
    key = h.add_pod(make_pod("p").requests(cpu="800m"))
    s = h.scheduler
    s.events.start()
    s.schedule_one(s.queue.pop_nowait())  # assumed on "only"; the binding is written in the background
    relabelled = make_pod("p").requests(cpu="800m").label("seen", "yes").obj  # e.g. a label added meanwhile
    s.pod_changed(key, relabelled)
    assert s.cache.is_assumed(key) and s.queue.counts()["active"] == 0
    h.add_pod(make_pod("q").requests(cpu="800m"))  # no room left beside the assumed pod
    await h.run()
    assert h.placements() == {key: "only"} and h.writer.bind_attempts == 1 and h.writer.double_binds == 0
    assert h.pending() == ["default/q"]


async def test_stopping_the_scheduler_cancels_the_bindings_on_their_way():
    """A binding that has not returned when the scheduler stops (a server shutting down, a leader
    losing its lease) is cancelled, not left to write after the scheduler is gone."""
    h = Harness()
    h.add_node(make_node("n0"))
    started, never = asyncio.Event(), asyncio.Event()
    cancelled: list[str] = []

    async def slow_bind(pod, node):
        started.set()
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.append(pod.key)
            raise

    h.writer.bind = slow_bind
    h.scheduler.start()
    h.add_pod(make_pod("web"))
    await asyncio.wait_for(started.wait(), 10)
    await asyncio.wait_for(h.scheduler.stop(), 10)
    assert cancelled == ["default/web"] and not h.scheduler._inflight


async def test_bindings_cancelled_before_they_began_are_not_left_counted_as_in_flight():
    h = Harness()
    h.add_node(make_node("n0"))
    for i in range(3):
        h.add_pod(make_pod(f"p{i}").requests(cpu="100m"))
    s = h.scheduler
    while (qp := s.queue.pop_nowait()) is not None:
        s.schedule_one(qp)
    assert s.binding == 3  # counted from the cycle on, before their tasks run
    await s.stop()
    assert s.binding == 0 and not h.placements()


async def test_a_profile_with_no_permit_plugin_binds_as_the_default_one_does():
    h = Harness({"profiles": [{"schedulerName": "default-scheduler", "plugins": {
        "permit": {"disabled": [{"name": "Coscheduling"}]}}}]})
    h.add_node(make_node("n0").capacity(cpu=2, memory="4Gi", pods=10))
    h.add_pod(make_pod("p").requests(cpu="1"))
    await h.run()
    assert h.placements() == {"default/p": "n0"}


async def test_each_attempt_reports_its_own_duration_and_outcome():
    """What `corral bench` reads for its latency percentiles: the seconds of each attempt."""
    h = Harness()
    h.add_node(make_node("n0").capacity(cpu=1, memory="4Gi", pods=10))
    seen: list[tuple[str, float]] = []
    h.scheduler.attempt_observer = lambda seconds, outcome: seen.append((outcome, seconds))
    for name, cpu in (("fits", "1"), ("too-big", "2")):
        h.add_pod(make_pod(name).requests(cpu=cpu))
        h.scheduler.schedule_one(h.scheduler.queue.pop_nowait())
    await asyncio.gather(*list(h.scheduler._inflight))
    assert [outcome for outcome, _ in seen] == ["scheduled", "unschedulable"]
    assert all(0 <= seconds < 5 for _, seconds in seen)


async def test_the_loop_lets_other_tasks_run_after_each_5_ms_of_cycles(monkeypatch):
    """Informer events and bindings run on the same event loop: between bursts of cycles the loop
    yields (sleep(0)) once 5 ms have gone, not after every cycle and not never. Its clock here moves
    0.5 ms at every reading, a cycle reading it a few times."""
    import types

    from corral.scheduler import scheduler as scheduler_module

    now = [0.0]

    def perf_counter() -> float:
        now[0] += 0.0005
        return now[0]

    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay, *args):
        slept.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(scheduler_module, "time", types.SimpleNamespace(
        perf_counter=perf_counter, time=time.time, monotonic=time.monotonic))
    monkeypatch.setattr(scheduler_module, "asyncio", types.SimpleNamespace(
        **{**{name: getattr(asyncio, name) for name in dir(asyncio) if not name.startswith("_")}, "sleep": sleep}))
    h = Harness()
    h.add_node(make_node("n0").capacity(cpu=64, memory="64Gi", pods=110))
    for i in range(40):
        h.add_pod(make_pod(f"p{i}").requests(cpu="100m"))
    loop = asyncio.create_task(h.scheduler.run())
    try:
        while len(h.placements()) < 40:
            await real_sleep(0.01)
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
    per_yield = 40 / len(slept)
    assert set(slept) == {0} and 2 <= per_yield <= 10, (len(slept), now[0])


async def test_by_default_backoff_and_unschedulable_pods_are_flushed_every_second(monkeypatch):
    """The period the README promises: a pod whose backoff ended is tried again within a second,
    and a Placement sees node changes within a second (both wait for this flush)."""
    from corral.scheduler.profiles import parse_config
    from corral.scheduler.scheduler import Scheduler
    from corral.testing.scheduler_harness import RecordingWriter

    s = Scheduler(parse_config({}), RecordingWriter())
    periods: list[float] = []
    real_sleep = asyncio.sleep

    async def counting_sleep(seconds: float, *args):
        periods.append(seconds)
        if len(periods) == 3:
            raise asyncio.CancelledError
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", counting_sleep)
    with pytest.raises(asyncio.CancelledError):
        await s._flush_loop()
    assert periods == [1.0, 1.0, 1.0]
