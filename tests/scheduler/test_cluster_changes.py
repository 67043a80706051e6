"""How the scheduler reacts to what the cluster tells it, and what it tells the cluster back: which
pod changes queue a pod or free room, which node changes give waiting pods another try, the
PodScheduled condition written once per message, events, metrics and `corral explain`'s report."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest
from prometheus_client import generate_latest

from corral.scheduler.framework.podinfo import PodInfo
from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import Harness

# What a pod no node has the cpu for, and no pod of lower priority to preempt, is told.
INSUFFICIENT_CPU = ("0/1 nodes are available: 1 Insufficient cpu. "
                    "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")


def where(h: Harness, key: str) -> str | None:
    """Where the pod waits in the queue (active, backoff, unschedulable, in-flight), or None."""
    qp = h.scheduler.queue.get(key)
    return None if qp is None else qp.where


async def one_round(h: Harness) -> None:
    """Try every pod that is active, or whose backoff has passed, once; let the writes finish."""
    s = h.scheduler
    s.events.start()
    h.queue_clock.advance(s.queue.settings.backoff_max)
    s.queue.flush_backoff()
    while (qp := s.queue.pop_nowait()) is not None:
        s.schedule_one(qp)
    while s._inflight:
        await asyncio.gather(*list(s._inflight), return_exceptions=True)
    await s.events.drain()


async def full_node(bound: str, waiting: str) -> Harness:
    """One 1-cpu node that ``bound`` (800m) fills, and ``waiting`` (800m) that no longer fits."""
    h = Harness()
    h.add_node(make_node("n").capacity(cpu=1, memory="4Gi", pods=10))
    h.add_pod(make_pod(bound).requests(cpu="800m").node("n"))
    h.add_pod(make_pod(waiting).requests(cpu="800m"))
    await h.run()
    assert where(h, f"default/{waiting}") == "unschedulable"
    return h


# --- pod changes ------------------------------------------------------------------------------------

@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
async def test_a_finished_pod_is_never_queued(phase):
    h = Harness()
    h.add_node(make_node("n"))
    h.add_pod(make_pod("done").phase(phase))
    assert "default/done" not in h.scheduler.queue
    await h.run()
    assert h.placements() == {}


async def test_a_pod_being_deleted_is_never_queued_and_leaves_the_queue():
    h = Harness()
    h.add_pod(make_pod("p").requests(cpu="100"))
    await h.run()
    assert where(h, "default/p") == "unschedulable"
    deleting = make_pod("p").requests(cpu="100").obj
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    h.scheduler.pod_changed("default/p", deleting)
    assert "default/p" not in h.scheduler.queue
    h.add_pod(make_pod("q").obj | {"metadata": {**make_pod("q").obj["metadata"],
                                                "deletionTimestamp": "2026-01-01T00:00:00Z"}})
    assert "default/q" not in h.scheduler.queue


async def test_a_nominated_pod_being_deleted_gives_up_the_room_it_claimed():
    """A pending pod nominated to a node (here claimed before a restart) holds room there for itself
    against pods of lower priority; once it is being deleted, that room is free again."""
    h = Harness()
    h.add_node(make_node("n").capacity(cpu=4, memory="8Gi", pods=20))
    h.add_pod(make_pod("running").requests(cpu="2").priority(1).node("n"))
    claiming = make_pod("hi").requests(cpu="4").priority(10).obj
    claiming["status"]["nominatedNodeName"] = "n"
    h.add_pod(claiming)
    assert h.scheduler.cache.nominator.node_of("default/hi") == "n"
    deleting = make_pod("hi").requests(cpu="4").priority(10).obj
    deleting["status"]["nominatedNodeName"] = "n"
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"  # a finalizer holds it
    h.scheduler.pod_changed("default/hi", deleting)
    assert not h.scheduler.cache.nominator.node_of("default/hi")
    h.add_pod(make_pod("lo").requests(cpu="2").priority(1))
    await h.run()
    assert h.placements() == {"default/lo": "n"}


async def test_a_pod_without_a_scheduler_name_belongs_to_the_default_scheduler():
    h = Harness()
    h.add_node(make_node("n"))
    pod = make_pod("p").obj
    del pod["spec"]["schedulerName"]
    h.add_pod(pod)
    await h.run()
    assert h.placements() == {"default/p": "n"}


async def test_a_deleted_pod_leaves_the_queue_and_its_condition_is_written_again_for_a_new_pod_of_that_name():
    h = Harness()
    h.add_node(make_node("n").capacity(cpu=1, memory="4Gi", pods=10))
    h.add_pod(make_pod("p").requests(cpu="2"))
    await h.run()
    assert len(h.writer.status_patches) == 1
    h.delete_pod("default/p")
    assert "default/p" not in h.scheduler.queue
    h.add_pod(make_pod("p").requests(cpu="2"))  # the same name again, as it was before anything was written
    await h.run()
    assert [key for key, _ in h.writer.status_patches] == ["default/p", "default/p"]


async def test_a_bound_pod_that_finishes_frees_its_room_for_a_waiting_pod():
    h = Harness()
    h.add_node(make_node("n").capacity(cpu=1, memory="4Gi", pods=10))
    running = make_pod("job").requests(cpu="800m").node("n").phase("Running")
    h.add_pod(running)
    h.add_pod(make_pod("next").requests(cpu="800m"))
    await h.run()
    assert where(h, "default/next") == "unschedulable"
    h.add_pod(make_pod("job").requests(cpu="800m").node("n").phase("Succeeded"))
    assert "default/job" not in h.scheduler.cache.pods
    assert where(h, "default/next") in ("active", "backoff")
    await h.run()
    assert h.placements() == {"default/next": "n"}


async def test_a_bound_pod_with_affinity_arriving_gives_pods_waiting_on_affinity_another_try():
    h = Harness()
    h.add_node(make_node("n"))
    h.add_pod(make_pod("follower").affinity("kubernetes.io/hostname", app="db"))
    h.add_pod(make_pod("big").requests(cpu="100"))
    await h.run()
    assert where(h, "default/follower") == "unschedulable"
    # A bound pod without affinity terms does not move anything (Kubernetes' AssignedPodAdd is only
    # interesting to pods whose affinity it could satisfy; corral keys it on the new pod having
    # affinity, so a plain pod's arrival is no event at all).
    h.add_pod(make_pod("plain").labels(app="db").node("n"))
    assert where(h, "default/follower") == "unschedulable"
    h.add_pod(make_pod("db").labels(app="db").node("n").anti_affinity("kubernetes.io/hostname", app="x"))
    assert where(h, "default/follower") in ("active", "backoff")
    assert where(h, "default/big") == "unschedulable"  # affinity events do not move a resource misfit
    await h.run()
    assert h.placements() == {"default/follower": "n"}


async def test_a_pod_evicted_back_to_pending_is_uncounted_and_scheduled_again():
    h = await full_node("evicted", "waiting")
    h.pods["default/evicted"] = make_pod("evicted").requests(cpu="800m").obj
    h.scheduler.pod_changed("default/evicted", h.pods["default/evicted"])
    assert "default/evicted" not in h.scheduler.cache.pods
    assert where(h, "default/waiting") in ("active", "backoff")
    await h.run()
    assert len(h.placements()) == 1  # one of the two got the room, the other waits
    assert int(h.scheduler.cache.table.requested["cpu"][0]) == 800


async def test_a_bound_pod_is_taken_out_of_the_queue():
    h = Harness()
    h.add_pod(make_pod("p").requests(cpu="100"))
    await h.run()
    assert where(h, "default/p") == "unschedulable"
    h.add_node(make_node("elsewhere"))
    h.add_pod(make_pod("p").requests(cpu="100").node("elsewhere"))  # bound by someone else
    assert "default/p" not in h.scheduler.queue
    assert h.scheduler.cache.pods["default/p"].row == h.scheduler.cache.table.row_of["elsewhere"]


async def test_a_deleted_bound_pod_frees_its_room():
    h = await full_node("old", "new")
    h.scheduler.pod_changed("default/old", None)
    assert where(h, "default/new") in ("active", "backoff")
    await h.run()
    assert h.placements() == {"default/new": "n"}


# --- node changes -----------------------------------------------------------------------------------

async def test_a_node_update_that_changes_what_fits_gives_waiting_pods_another_try_and_a_heartbeat_does_not():
    h = Harness()
    node = make_node("n").taint("dedicated", "gpu")
    h.add_node(node)
    h.add_pod(make_pod("p"))
    await h.run()
    assert where(h, "default/p") == "unschedulable"
    h.add_node(make_node("n").taint("dedicated", "gpu").heartbeat_age(5))  # only the heartbeat moved
    assert where(h, "default/p") == "unschedulable"
    h.add_node(make_node("n"))  # the taint is gone
    assert where(h, "default/p") in ("active", "backoff")
    await h.run()
    assert h.placements() == {"default/p": "n"}


@pytest.mark.parametrize("change", ["labels", "allocatable", "capacity without allocatable", "unschedulable",
                                    "ready"])
async def test_each_node_change_the_filters_read_counts_as_an_update(change):
    before = make_node("n").capacity(cpu=1, memory="4Gi", pods=10)
    after = make_node("n").capacity(cpu=1, memory="4Gi", pods=10)
    if change == "labels":
        after.label("disk", "ssd")
    elif change == "allocatable":
        after.allocatable(cpu=2)  # the capacity stays
    elif change == "capacity without allocatable":
        after.capacity(cpu=2, memory="4Gi", pods=10)
    elif change == "unschedulable":
        after.unschedulable()
    else:
        after.not_ready()
    before, after = before.obj, after.obj
    if change == "capacity without allocatable":
        del before["status"]["allocatable"], after["status"]["allocatable"]
    h = Harness()
    h.add_node(before)
    h.add_pod(make_pod("p").requests(cpu="100"))
    await h.run()
    assert where(h, "default/p") == "unschedulable"
    h.add_node(after)
    assert where(h, "default/p") in ("active", "backoff")


async def test_a_deleted_node_takes_no_more_pods_and_its_name_can_return():
    h = Harness()
    h.add_node(make_node("gone"))
    h.scheduler.node_changed("gone", None)
    h.add_pod(make_pod("p"))
    await h.run()
    assert h.placements() == {}
    assert where(h, "default/p") == "unschedulable"
    h.add_node(make_node("gone"))  # the same name comes back: an addition again
    assert where(h, "default/p") in ("active", "backoff")
    await h.run()
    assert h.placements() == {"default/p": "gone"}


# --- what the scheduler writes ----------------------------------------------------------------------

async def test_the_unschedulable_condition_is_written_once_per_message_keeping_other_conditions():
    h = Harness()
    h.add_node(make_node("n").capacity(cpu=1, memory="4Gi", pods=10))
    pod = make_pod("p").requests(cpu="2").obj
    pod["status"]["conditions"] = [{"type": "Initialized", "status": "True"}]
    h.add_pod(pod)
    await h.run()
    for _ in range(3):  # the periodic retry meets the same answer: nothing more to write
        h.scheduler.queue.on_event("NodeAdd")
        await one_round(h)
    assert len(h.writer.status_patches) == 1
    key, patch = h.writer.status_patches[0]
    (initialized, scheduled) = patch["status"]["conditions"]
    assert initialized == {"type": "Initialized", "status": "True"}
    assert {k: v for k, v in scheduled.items() if k != "lastTransitionTime"} == {
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": INSUFFICIENT_CPU}
    assert scheduled["lastTransitionTime"].endswith("Z")
    # A new reason is a new message: written again.
    h.add_node(make_node("m").taint("dedicated", "gpu"))
    await one_round(h)
    assert len(h.writer.status_patches) == 2
    assert h.writer.conditions["default/p"]["message"] == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s). preemption: 0/2 nodes "
        "are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.")


async def test_a_condition_the_pod_already_carries_is_not_written_again():
    h = Harness()
    h.add_node(make_node("n").capacity(cpu=1, memory="4Gi", pods=10))
    pod = make_pod("p").requests(cpu="2").obj
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                    "message": INSUFFICIENT_CPU}]
    h.add_pod(pod)  # e.g. a scheduler that restarts, or a new leader, meets its predecessor's condition
    await h.run()
    assert h.writer.status_patches == []
    assert ("default/p", "FailedScheduling", INSUFFICIENT_CPU) in h.writer.events
    # A PodScheduled=True or another message does not count as written.
    other = make_pod("q").requests(cpu="2").obj
    other["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "message":
                                      "0/1 nodes are available: 1 Insufficient cpu."},
                                     {"type": "Ready", "status": "False",
                                      "message": "0/1 nodes are available: 1 Insufficient cpu."}]
    h.add_pod(other)
    await h.run()
    assert [key for key, _ in h.writer.status_patches] == ["default/q"]
    assert [c["type"] for c in h.writer.status_patches[0][1]["status"]["conditions"]] == ["Ready", "PodScheduled"]


async def test_a_binding_writes_a_scheduled_event_kubernetes_style():
    h = Harness()
    h.add_node(make_node("n"))
    h.add_pod(make_pod("p"))
    await h.run()
    (event,) = h.writer.event_objects
    digest_name = event["metadata"]["name"]
    assert digest_name.startswith("p.") and len(digest_name) == len("p.") + 12
    assert {k: v for k, v in event.items() if k not in ("firstTimestamp", "lastTimestamp", "metadata")} == {
        "apiVersion": "v1", "kind": "Event",
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "default",
                           "uid": "uid-default-p"},
        "reason": "Scheduled", "message": "Successfully assigned default/p to n", "type": "Normal", "count": 1,
        "source": {"component": "default-scheduler"}, "reportingComponent": "default-scheduler"}
    assert event["metadata"] == {"name": digest_name, "namespace": "default"}
    assert event["firstTimestamp"] == event["lastTimestamp"]
    assert h.scheduler.scheduled == 1 and h.scheduler.bind_failures == 0


async def test_a_failed_binding_is_retried_after_backoff_and_logged_with_pod_node_and_reason(caplog):
    failures = iter([True, False])
    h = Harness()
    h.writer.fail = lambda pod, node: next(failures)
    h.add_node(make_node("n"))
    h.add_pod(make_pod("p"))
    with caplog.at_level(logging.WARNING, logger="corral.scheduler.scheduler"):
        s = h.scheduler
        s.schedule_one(s.queue.pop_nowait())
        await asyncio.gather(*list(s._inflight))
    assert h.placements() == {} and h.scheduler.bind_failures == 1 and h.scheduler.scheduled == 0
    assert where(h, "default/p") == "backoff"
    assert not h.scheduler.cache.is_assumed("default/p")
    assert caplog.messages == ["binding default/p to n failed: injected bind failure; retrying after backoff"]
    await h.run()
    assert h.placements() == {"default/p": "n"}
    assert h.scheduler.bind_failures == 1 and h.scheduler.scheduled == 1
    metrics = generate_latest(h.scheduler.metrics.registry).decode()
    assert 'corral_scheduler_schedule_attempts_total{profile="default-scheduler",result="error"} 1.0' in metrics
    assert 'corral_scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 2.0' in metrics


async def test_a_binding_refused_as_unresolvable_is_not_retried(caplog):
    h = Harness()
    h.add_node(make_node("n"))
    h.add_pod(make_pod("p"))
    h.writer.bindings["default/p"] = "elsewhere"  # someone else bound it first
    with caplog.at_level(logging.INFO, logger="corral.scheduler.scheduler"):
        await one_round(h)
    assert "default/p" not in h.scheduler.queue and not h.scheduler.cache.is_assumed("default/p")
    assert h.scheduler.bind_failures == 1
    assert caplog.messages == ["binding default/p to n: already bound"]
    assert 'result="error"' not in generate_latest(h.scheduler.metrics.registry).decode()


async def test_a_pod_status_the_scheduler_cannot_write_is_logged_at_debug_and_scheduling_goes_on(caplog):
    h = Harness()

    async def refused(pod, patch, **_):
        raise RuntimeError("the server is read-only")

    h.writer.patch_status = refused
    h.add_node(make_node("n").capacity(cpu=1, memory="4Gi", pods=10))
    h.add_pod(make_pod("too-big").requests(cpu="2"))
    h.add_pod(make_pod("fits"))
    with caplog.at_level(logging.DEBUG, logger="corral.scheduler.scheduler"):
        await h.run()
    assert h.placements() == {"default/fits": "n"}
    assert "status of default/too-big not written: the server is read-only" in caplog.messages


async def test_a_binder_that_raises_is_a_failed_binding_not_a_dead_scheduler():
    h = Harness()

    async def broken(pod, node):
        raise RuntimeError("connection reset")

    h.writer.bind = broken
    h.add_node(make_node("n"))
    h.add_pod(make_pod("p"))
    await one_round(h)
    assert where(h, "default/p") == "backoff" and h.scheduler.bind_failures == 1


async def test_metrics_count_attempts_by_result_and_profile_and_time_them():
    h = Harness()
    h.add_node(make_node("n").capacity(cpu=1, memory="4Gi", pods=10))
    h.add_pod(make_pod("fits"))
    h.add_pod(make_pod("too-big").requests(cpu="2"))
    observed = []
    h.scheduler.attempt_observer = lambda seconds, result: observed.append((seconds >= 0, result))
    await h.run()
    h.scheduler.update_gauges()
    text = generate_latest(h.scheduler.metrics.registry).decode()
    for line in [
        "# HELP corral_scheduler_schedule_attempts_total Scheduling attempts by result",
        'corral_scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1.0',
        'corral_scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 1.0',
        "# HELP corral_scheduler_scheduling_attempt_duration_seconds Duration of one scheduling attempt "
        "(filter, score, select)",
        'corral_scheduler_scheduling_attempt_duration_seconds_count{result="scheduled"} 1.0',
        'corral_scheduler_scheduling_attempt_duration_seconds_count{result="unschedulable"} 1.0',
        'corral_scheduler_scheduling_attempt_duration_seconds_bucket{le="1.0",result="scheduled"} 1.0',
        "# HELP corral_scheduler_pending_pods Pending pods by queue",
        'corral_scheduler_pending_pods{queue="unschedulable"} 1.0',
        'corral_scheduler_pending_pods{queue="active"} 0.0',
    ]:
        assert line in text, line
    buckets = [line.split('le="')[1].split('"')[0] for line in text.splitlines()
               if line.startswith("corral_scheduler_scheduling_attempt_duration_seconds_bucket{")
               and 'result="scheduled"' in line]
    assert buckets == ["0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.1", "1.0",
                       "+Inf"]
    assert sorted(observed) == [(True, "scheduled"), (True, "unschedulable")]
    h.scheduler.metrics.unregister()
    assert "corral_scheduler" not in generate_latest(h.scheduler.metrics.registry).decode()


def test_attempts_of_each_profile_and_result_are_counted_apart():
    from corral.scheduler.scheduler import _Metrics

    metrics = _Metrics(None)
    for result, profile, seconds in [("scheduled", "a", 0.0002), ("scheduled", "a", 0.003),
                                     ("scheduled", "b", 0.0002), ("unschedulable", "a", 0.02)]:
        metrics.attempt(result, profile, seconds)
    text = generate_latest(metrics.registry).decode()
    for line in ['corral_scheduler_schedule_attempts_total{profile="a",result="scheduled"} 2.0',
                 'corral_scheduler_schedule_attempts_total{profile="b",result="scheduled"} 1.0',
                 'corral_scheduler_schedule_attempts_total{profile="a",result="unschedulable"} 1.0',
                 'corral_scheduler_scheduling_attempt_duration_seconds_count{result="scheduled"} 3.0',
                 'corral_scheduler_scheduling_attempt_duration_seconds_bucket{le="0.00025",result="scheduled"} 2.0',
                 'corral_scheduler_scheduling_attempt_duration_seconds_count{result="unschedulable"} 1.0',
                 'corral_scheduler_scheduling_attempt_duration_seconds_bucket{le="0.01",result="unschedulable"} 0.0']:
        assert line in text, line


async def test_a_started_scheduler_places_pods_as_they_come_and_idles_then_stops():
    h = Harness()
    s = h.scheduler
    s._flush_interval = 0.01
    h.add_node(make_node("n"))
    s.start()
    try:
        assert {t.get_name() for t in s._tasks} == {"scheduler", "scheduler-flush", "scheduler-placements"}
        for i in range(30):
            h.add_pod(make_pod(f"p{i}"))
        await s.idle(timeout=10)
        assert len(h.placements()) == 30 and s.scheduled == 30
        # The flush loop runs: a pod refused once (no room) is retried without any cluster event
        # once the unschedulable flush interval has passed on the queue's clock.
        h.add_pod(make_pod("late").requests(cpu="100"))
        await s.idle(timeout=10)
        first = s.queue.get("default/late").timestamp
        h.queue_clock.advance(s.queue.settings.unschedulable_flush + s.queue.settings.backoff_max)
        deadline = asyncio.get_running_loop().time() + 10
        while s.queue.get("default/late").timestamp == first:
            assert asyncio.get_running_loop().time() < deadline, "the flush loop never retried the pod"
            await asyncio.sleep(0.01)
    finally:
        await s.stop()
    assert all(t.done() for t in s._tasks)


async def test_idle_gives_up_with_the_queue_counts():
    h = Harness()
    h.add_pod(make_pod("p"))  # active, and nothing runs the loop
    with pytest.raises(TimeoutError, match=r"not idle after 0.05s: \{'active': 1, 'backoff': 0"):
        await h.scheduler.idle(timeout=0.05)


async def test_one_pod_whose_cycle_raises_goes_to_backoff_and_the_loop_carries_on(caplog, monkeypatch):
    h = Harness()
    s = h.scheduler
    h.add_node(make_node("n"))
    original = s.schedule_one

    def flaky(qp):
        if qp.key == "default/bad":
            raise ValueError("boom")
        return original(qp)

    monkeypatch.setattr(s, "schedule_one", flaky)
    h.add_pod(make_pod("bad"))
    h.add_pod(make_pod("good"))
    s.start()
    try:
        with caplog.at_level(logging.ERROR, logger="corral.scheduler.scheduler"):
            deadline = asyncio.get_running_loop().time() + 10
            while "default/good" not in h.placements():
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.01)
    finally:
        await s.stop()
    assert where(h, "default/bad") == "backoff"
    assert "scheduling default/bad failed" in caplog.messages


# --- explain -----------------------------------------------------------------------------------------

async def test_explain_reports_every_node_best_first_with_each_plugins_score_or_its_reasons():
    h = Harness({"tieBreak": "name"})
    h.add_node(make_node("small").capacity(cpu=2, memory="8Gi", pods=110))
    h.add_node(make_node("big2").capacity(cpu=8, memory="32Gi", pods=110))
    h.add_node(make_node("big").capacity(cpu=8, memory="32Gi", pods=110))
    h.add_node(make_node("tiny").capacity(cpu=1, memory="8Gi", pods=110))
    h.add_node(make_node("tainted").taint("dedicated", "gpu"))
    report = h.scheduler.explain(make_pod("p").requests(cpu="1500m", memory="1Gi").obj)
    # LeastAllocated: (6500*100)//8000 = 81 for cpu, (31*100)//32 = 96 for memory, mean 88;
    # balance: 100 * (1 - |0.1875 - 0.03125| / 2) = 92. On the small node: 25 and 87 → 56; 68.
    assert report == {
        "pod": "default/p", "schedulerName": "default-scheduler", "chosen": "big", "feasible": 3, "total": 5,
        "message": "3/5 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s).",
        "nodes": [
            {"node": "big", "feasible": True, "total": 180.0,
             "scores": {"NodeResourcesFit": 88.0, "NodeResourcesBalancedAllocation": 92.0}},
            {"node": "big2", "feasible": True, "total": 180.0,
             "scores": {"NodeResourcesFit": 88.0, "NodeResourcesBalancedAllocation": 92.0}},
            {"node": "small", "feasible": True, "total": 124.0,
             "scores": {"NodeResourcesFit": 56.0, "NodeResourcesBalancedAllocation": 68.0}},
            {"node": "tiny", "feasible": False, "plugin": "NodeResourcesFit", "reasons": ["Insufficient cpu"]},
            {"node": "tainted", "feasible": False, "plugin": "TaintToleration",
             "reasons": ["node(s) had untolerated taint(s)"]},
        ],
        "runnerUp": {"node": "big2", "total": 180.0, "by": 0.0},  # a tie, broken by name
    }


async def test_explain_with_one_feasible_node_chooses_it_and_with_none_chooses_nothing():
    h = Harness()
    h.add_node(make_node("a").capacity(cpu=1, memory="8Gi", pods=110))
    h.add_node(make_node("b").capacity(cpu=4, memory="8Gi", pods=110))
    one = h.scheduler.explain(make_pod("p").requests(cpu="2").obj)
    assert (one["chosen"], one["feasible"], [n["node"] for n in one["nodes"]]) == ("b", 1, ["b", "a"])
    assert "runnerUp" not in one  # no other node to beat
    none = h.scheduler.explain(make_pod("p").requests(cpu="8").obj)
    assert (none["chosen"], none["feasible"], none["message"]) == (
        None, 0, "0/2 nodes are available: 2 Insufficient cpu. "
                 "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
    assert none["nearestMisses"] == ["b lacks 4 cpu", "a lacks 7 cpu"]


async def test_explain_a_bound_pod_as_if_it_were_still_pending():
    h = Harness()
    h.add_node(make_node("a"))
    h.add_node(make_node("b"))
    h.add_pod(make_pod("p").node("a"))
    report = h.scheduler.explain(make_pod("p").node("a").obj)
    assert report["feasible"] == 2  # not only the node it is bound to
    # Its own hostPort and requests do not count against its own node (they did: "didn't have free ports").
    web = make_pod("web").node("a").host_port(8080).requests(cpu="3")
    h.add_pod(web)
    table = h.scheduler.cache.table
    before = int(table.requested["cpu"][table.row_of["a"]])
    report = h.scheduler.explain(web.obj)
    assert report["feasible"] == 2, report["nodes"]
    assert int(table.requested["cpu"][table.row_of["a"]]) == before  # and it is counted again afterwards
    with pytest.raises(LookupError, match="no profile for schedulerName 'other'"):
        h.scheduler.explain(make_pod("x").scheduler("other").obj)


GPU = "example.com/gpu"


def _wide_pod(name: str = "wide"):
    return make_pod(name).requests(cpu="1500m", ephemeral_storage="2Gi", **{GPU: 1})


def _node(name: str, cpu: int = 4, storage: str = "10Gi", gpu: int | None = 1, pods: int = 110):
    return make_node(name).capacity(cpu=cpu, memory="8Gi", ephemeral_storage=storage, pods=pods,
                                    **({GPU: gpu} if gpu is not None else {}))


async def test_the_nearest_misses_are_those_lacking_least_of_their_allocatable_then_by_name():
    h = Harness()
    for node in (_node("n9", cpu=1), _node("n1", cpu=1), _node("n3", gpu=None), _node("n4", cpu=8)):
        h.add_node(node)
    h.add_pod(make_pod("filler").node("n4").requests(cpu="7500m"))
    report = h.scheduler.explain(_wide_pod().obj)
    # n4 lacks 1 of its 8 cpu; n1 and n9 500m of 1 (by name, whatever their order); n3 1 gpu of none.
    assert report["nearestMisses"] == ["n4 lacks 1 cpu", "n1 lacks 500m cpu", "n9 lacks 500m cpu"]


async def test_the_nearest_misses_say_what_each_resource_lacks_in_its_own_units():
    h = Harness()
    for node in (_node("n5", storage="1Gi"), _node("n7", pods=1), _node("n8", cpu=1)):
        h.add_node(node)
    h.add_pod(make_pod("filler").node("n7"))
    h.add_pod(make_pod("busy").node("n8").requests(cpu="1"))
    report = h.scheduler.explain(_wide_pod().obj)
    assert report["nearestMisses"] == ["n5 lacks 1Gi ephemeral-storage", "n7 lacks 1 pods", "n8 lacks 1.5 cpu"]
    h = Harness()
    h.add_node(_node("plain", gpu=None))  # no node offers the resource at all
    assert h.scheduler.explain(_wide_pod().obj)["nearestMisses"] == ["plain lacks 1 example.com/gpu"]


async def test_without_node_resources_fit_a_pending_pod_has_no_nearest_misses():
    h = Harness({"profiles": [{"plugins": {"filter": {"disabled": [{"name": "NodeResourcesFit"}]},
                                           "preFilter": {"disabled": [{"name": "NodeResourcesFit"}]}}}]})
    h.add_node(make_node("a").taint("dedicated", "gpu"))
    report = h.scheduler.explain(make_pod("p").obj)
    assert report["chosen"] is None and report["nearestMisses"] == []


async def test_explain_chooses_the_best_of_two_feasible_nodes_and_says_by_how_much():
    h = Harness()
    h.add_node(make_node("a").capacity(cpu=3, memory="8Gi", pods=110))
    h.add_node(make_node("b").capacity(cpu=7, memory="8Gi", pods=110))
    report = h.scheduler.explain(make_pod("p").requests(cpu="1", memory="1Gi").obj)
    best, other = report["nodes"]
    assert report["chosen"] == best["node"] == "b" and best["total"] > other["total"]
    assert report["runnerUp"] == {"node": "a", "total": other["total"], "by": best["total"] - other["total"]}
    assert isinstance(report["runnerUp"]["by"], float)  # a score, as the totals are


async def test_a_pod_that_may_not_preempt_is_explained_as_such():
    h = Harness()
    h.add_node(make_node("a").capacity(cpu=1, memory="8Gi", pods=110))
    pod = make_pod("p").requests(cpu="2").obj
    pod["spec"]["preemptionPolicy"] = "Never"
    report = h.scheduler.explain(pod)
    assert report["preemption"] == {"message": "preemption: not eligible due to preemptionPolicy=Never.",
                                    "node": None, "victims": []}
    assert all("preemption" not in n for n in report["nodes"])


async def test_explaining_a_pod_whose_binding_is_in_flight_counts_it_where_it_is_going():
    h = Harness()
    h.add_node(make_node("a").capacity(cpu=2, memory="8Gi", pods=110))
    h.add_node(make_node("b").capacity(cpu=2, memory="8Gi", pods=110))
    pod = make_pod("p").requests(cpu="2").obj
    h.scheduler.cache.assume(PodInfo.from_object(pod), "a")  # its binding to "a" on its way
    report = h.scheduler.explain({**pod, "spec": {**pod["spec"], "nodeName": "a"}})
    assert (report["feasible"], report["chosen"]) == (1, "b")  # "a" holds it until the binding is done
    assert h.scheduler.cache.is_assumed("default/p")


async def test_a_bound_pod_is_explained_with_its_own_requests():
    h = Harness()
    h.add_node(make_node("a").capacity(cpu=4, memory="8Gi", pods=110))
    h.add_node(make_node("b").capacity(cpu=8, memory="8Gi", pods=110))
    bound = make_pod("p").requests(cpu="3", memory="1Gi").node("a")
    h.add_pod(bound)
    empty = Harness()
    empty.add_node(make_node("a").capacity(cpu=4, memory="8Gi", pods=110))
    empty.add_node(make_node("b").capacity(cpu=8, memory="8Gi", pods=110))
    pending = make_pod("p").requests(cpu="3", memory="1Gi")
    assert h.scheduler.explain(bound.obj)["nodes"] == empty.scheduler.explain(pending.obj)["nodes"]


# --- what plugins remember between cycles must follow the nodes --------------------------------------

async def test_a_node_relabelled_between_cycles_is_judged_by_its_new_labels():
    h = Harness()
    h.add_node(make_node("a").label("disk", "hdd"))
    h.add_node(make_node("b").label("disk", "hdd"))
    h.add_pod(make_pod("first").node_selector(disk="ssd"))
    await h.run()
    assert h.placements() == {}
    h.add_node(make_node("b").label("disk", "ssd"))
    await h.run()
    assert h.placements() == {"default/first": "b"}
    h.add_node(make_node("b").label("disk", "hdd"))
    h.add_node(make_node("a").label("disk", "ssd"))
    h.add_pod(make_pod("second").node_selector(disk="ssd"))
    await h.run()
    assert h.placements()["default/second"] == "a"
    h.add_node(make_node("c").label("disk", "ssd"))  # a new row: the remembered mask is too short
    h.add_node(make_node("a").label("disk", "hdd"))
    h.add_pod(make_pod("third").node_selector(disk="ssd"))
    await h.run()
    assert h.placements()["default/third"] == "c"


async def test_a_node_that_stops_being_ready_within_the_same_second_takes_no_more_pods():
    now = 1_800_000_000.0
    h = Harness(clock=lambda: now)
    h.add_node(make_node("a").heartbeat_at("2027-01-15T08:00:00Z"))
    h.add_node(make_node("b").heartbeat_at("2027-01-15T08:00:00Z"))
    h.add_pod(make_pod("p1"))
    await h.run()
    h.add_node(make_node("a").not_ready())
    h.add_node(make_node("b").not_ready())
    h.add_pod(make_pod("p2"))
    await h.run()
    assert "default/p2" not in h.placements()


async def test_metrics_go_to_the_registry_the_server_gives_and_a_scheduler_never_started_stops_cleanly():
    from prometheus_client import CollectorRegistry

    from corral.scheduler.profiles import parse_config
    from corral.scheduler.scheduler import Scheduler
    from corral.testing.scheduler_harness import RecordingWriter

    registry = CollectorRegistry()
    scheduler = Scheduler(parse_config({}), RecordingWriter(None), registry=registry)
    scheduler.update_gauges()
    assert 'corral_scheduler_pending_pods{queue="active"} 0.0' in generate_latest(registry).decode()
    await scheduler.stop()


async def test_events_waiting_to_be_written_and_those_dropped_show_in_the_metrics():
    from prometheus_client import CollectorRegistry

    from corral.scheduler.cluster import EventRecorder
    from corral.scheduler.profiles import parse_config
    from corral.scheduler.scheduler import Scheduler
    from corral.testing.scheduler_harness import RecordingWriter

    registry = CollectorRegistry()
    writer = RecordingWriter(None)
    scheduler = Scheduler(parse_config({}), writer, registry=registry)
    scheduler.events = EventRecorder(writer, max_pending=2)  # not started: every event waits
    p = PodInfo.from_object(make_pod("p").obj)

    def metrics() -> tuple[str, str]:
        scheduler.update_gauges()
        text = generate_latest(registry).decode()
        return tuple(line for line in text.splitlines()  # type: ignore[return-value]
                     if line.startswith(("corral_scheduler_events_waiting ", "corral_scheduler_events_dropped_total ")))

    assert metrics() == ("corral_scheduler_events_dropped_total 0.0", "corral_scheduler_events_waiting 0.0")
    for i in range(5):
        scheduler.events.record(p, "Normal", "Scheduled", f"m{i}")
    assert metrics() == ("corral_scheduler_events_dropped_total 3.0", "corral_scheduler_events_waiting 2.0")
    assert metrics() == ("corral_scheduler_events_dropped_total 3.0", "corral_scheduler_events_waiting 2.0")
    scheduler.events.record(p, "Normal", "Scheduled", "m5")  # counted from where the last scrape left it
    assert metrics()[0] == "corral_scheduler_events_dropped_total 4.0"
    scheduler.events.start()
    await scheduler.events.drain()
    assert metrics() == ("corral_scheduler_events_dropped_total 4.0", "corral_scheduler_events_waiting 0.0")
    assert [e["message"] for e in writer.event_objects] == ["m0", "m1"]
    await scheduler.stop()


async def test_without_preemption_a_pod_no_node_fits_is_unschedulable_with_why_alone():
    h = Harness({"profiles": [{"plugins": {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}}]})
    h.add_node(make_node("a").taint("dedicated", "gpu"))
    key = h.add_pod(make_pod("p"))
    await h.run()
    assert h.pending() == [key]
    condition = h.writer.conditions[key]
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert condition["message"] == "0/1 nodes are available: 1 node(s) had untolerated taint(s)."
    assert [(e["type"], e["involvedObject"]["name"], e["message"]) for e in h.writer.event_objects
            if e["reason"] == "FailedScheduling"] == [("Warning", "p", condition["message"])]


async def test_a_pod_already_saying_why_it_is_unschedulable_is_not_written_again():
    # A scheduler before this one (a restart, another replica) wrote the condition: same message, no write,
    # whatever other conditions the pod has besides.
    h = Harness({"profiles": [{"plugins": {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}}]})
    h.add_node(make_node("a").taint("dedicated", "gpu"))
    pod = make_pod("p").obj
    pod["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/1 nodes are available: 1 node(s) had untolerated taint(s)."},
        {"type": "Ready", "status": "False", "reason": "NotScheduled", "message": "not yet"}]
    key = h.add_pod(pod)
    await h.run()
    assert h.pending() == [key] and h.writer.status_patches == []


async def test_deleting_a_node_twice_or_one_never_seen_is_harmless_and_scheduling_goes_on():
    """A relist may tell a deletion again, or of a node created and deleted before this scheduler
    started: neither may stop the scheduler's event handling."""
    h = Harness()
    h.add_node(make_node("n0").capacity(cpu=2, memory="4Gi", pods=10).heartbeat_age(0))
    h.add_node(make_node("gone").capacity(cpu=2, memory="4Gi", pods=10).heartbeat_age(0))
    h.scheduler.node_changed("gone", None)
    h.scheduler.node_changed("gone", None)
    h.scheduler.node_changed("never-seen", None)
    h.add_pod(make_pod("p").requests(cpu="1"))
    await h.run()
    assert h.placements() == {"default/p": "n0"}


async def test_a_bursts_bindings_are_bounded_at_512_in_flight_the_loop_waits_for_room():
    """Ten thousand pods placed in a burst do not open ten thousand binding requests at once: with
    512 being written, the loop takes no further pod until one comes back."""
    h = Harness()
    h.add_node(make_node("big").capacity(cpu=1000, memory="4000Gi", pods=1000).heartbeat_age(0))
    for i in range(600):
        h.add_pod(make_pod(f"p{i}").requests(cpu="100m"))
    bind, gate, in_flight, most = h.writer.bind, asyncio.Semaphore(0), 0, 0

    async def held(pod, node):
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await gate.acquire()  # one comes back for each release()
        in_flight -= 1
        return await bind(pod, node)

    h.writer.bind = held
    s = h.scheduler
    loop = asyncio.create_task(s.run())
    try:
        for _ in range(200):
            await asyncio.sleep(0)
        assert (most, in_flight, s.binding) == (512, 512, 512)
        assert s.queue.counts()["active"] == 88  # left in the queue: the loop waits
        gate.release()  # one binding comes back: room for one more pod
        for _ in range(50):
            await asyncio.sleep(0)
        assert (most, in_flight, s.queue.counts()["active"]) == (512, 512, 87)
        for _ in range(600):
            gate.release()
        for _ in range(2000):
            if len(h.placements()) == 600:
                break
            await asyncio.sleep(0)
        assert len(h.placements()) == 600 and most == 512 and s.binding == 0
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
