"""The scheduling queue's timing, on a fake clock."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.scheduler.cache.cache import Cache
from corral.scheduler.framework.interface import Handle
from corral.scheduler.framework.podinfo import PodInfo
from corral.scheduler.plugins.priority_sort import PrioritySort
from corral.scheduler.queue.scheduling_queue import EVENT_PLUGINS, ClusterEvent, SchedulingQueue
from corral.testing.builders import make_pod
from corral.testing.clock import FakeClock


def queue() -> tuple[SchedulingQueue, FakeClock]:
    """A queue sorted as the default profile sorts it (PrioritySort), on a fake clock."""
    clock = FakeClock()
    q = SchedulingQueue(PrioritySort(Handle(Cache(), clock)).sort_key, clock)
    return q, clock


def info(name: str, priority: int = 0) -> PodInfo:
    return PodInfo.from_object(make_pod(name).priority(priority).obj)


def test_active_pods_come_out_by_priority_then_arrival():
    q, clock = queue()
    q.add(info("a", 1))
    clock.advance(1)
    q.add(info("b", 5))
    clock.advance(1)
    q.add(info("c", 1))
    assert [q.pop_nowait().info.name for _ in range(3)] == ["b", "a", "c"]


def test_a_pod_back_from_backoff_goes_before_one_of_its_priority_that_arrived_after_it():
    q, clock = queue()
    q.add(info("early"))
    q.requeue_backoff(q.pop_nowait())  # its binding failed
    clock.advance(0.5)
    q.add(info("late"))
    q.add(info("urgent", 3))
    clock.advance(0.5)  # early's backoff ends: it is queued again after late, yet arrived first
    assert [q.pop_nowait().info.name for _ in range(3)] == ["urgent", "early", "late"]


def test_the_counts_say_where_each_pod_waits():
    q, clock = queue()
    for name in ("a", "b", "c", "d"):
        q.add(info(name))
    q.requeue_backoff(q.pop_nowait())
    q.requeue_unschedulable(q.pop_nowait(), frozenset({"NodeResourcesFit"}))
    assert q.counts() == {"active": 2, "backoff": 1, "unschedulable": 1}
    clock.advance(1)  # a's and b's backoff end, exactly
    assert q.on_event(ClusterEvent.NODE_ADD) == 1  # b: active, not backing off
    assert q.counts() == {"active": 3, "backoff": 1, "unschedulable": 0}
    q.flush_backoff()  # a: active again
    assert q.counts() == {"active": 4, "backoff": 0, "unschedulable": 0}


def test_an_unschedulable_pod_updated_or_deleted_leaves_the_unschedulable_ones():
    q, clock = queue()
    q.add(info("p"))
    q.add(info("gone"))
    q.requeue_unschedulable(q.pop_nowait(), frozenset({"NodeResourcesFit"}))
    q.requeue_unschedulable(q.pop_nowait(), frozenset({"NodeResourcesFit"}))
    q.add(PodInfo.from_object(make_pod("p").requests(cpu="10m").obj))  # may fit now
    q.delete("default/gone")
    assert q.counts() == {"active": 0, "backoff": 1, "unschedulable": 0}
    clock.advance(1)
    assert q.pop_nowait().info.name == "p"  # in flight: a later event does not offer it a second time
    assert q.on_event(ClusterEvent.NODE_ADD) == 0
    assert q.pop_nowait() is None


def test_backoff_doubles_from_one_second_to_ten():
    q, clock = queue()
    q.add(info("p"))
    qp = q.pop_nowait()
    waits = []
    for _ in range(6):
        q.requeue_backoff(qp)
        start = clock.now
        while (served := q.pop_nowait()) is None:
            clock.advance(0.25)
        waits.append(clock.now - start)
        qp = served
    assert waits == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_an_unschedulable_pod_waits_for_a_relevant_event():
    q, clock = queue()
    q.add(info("p"))
    qp = q.pop_nowait()
    q.requeue_unschedulable(qp, frozenset({"NodeResourcesFit"}))
    assert q.pop_nowait() is None
    assert q.on_event(ClusterEvent.NAMESPACE_CHANGE) == 0  # cannot help a resource shortage
    assert q.on_event(ClusterEvent.POD_DELETE) == 1
    clock.advance(1)
    assert q.pop_nowait().info.name == "p"


def test_the_periodic_flush_retries_pods_waiting_longer_than_30_seconds():
    q, clock = queue()
    q.add(info("p"))
    q.requeue_unschedulable(q.pop_nowait(), frozenset({"NodeAffinity"}))
    clock.advance(29)
    assert q.flush_unschedulable() == 0
    clock.advance(1)
    assert q.flush_unschedulable() == 1
    assert q.pop_nowait().info.name == "p"


def test_a_deleted_pod_is_never_served():
    q, clock = queue()
    q.add(info("p"))
    q.delete("default/p")
    assert q.pop_nowait() is None and len(q) == 0
    for name in ("a", "b", "c"):
        q.add(info(name))
    q.requeue_backoff(q.pop_nowait())
    q.delete("default/a")  # while backing off
    q.delete("default/b")  # first in line
    clock.advance(10)
    assert q.pop_nowait().info.name == "c"
    assert q.pop_nowait() is None
    q.done("default/c")
    q.done("default/a")  # deleted before its attempt ended: nothing to do
    assert len(q) == 0


def test_updating_an_unschedulable_pod_in_a_way_that_matters_retries_it():
    q, clock = queue()
    q.add(info("p"))
    q.requeue_unschedulable(q.pop_nowait(), frozenset({"NodeResourcesFit"}))
    q.add(info("p"))  # same spec: stays
    assert q.pop_nowait() is None
    q.add(PodInfo.from_object(make_pod("p").requests(cpu="10m").obj))
    clock.advance(1)
    assert q.pop_nowait().info.name == "p"


@pytest.mark.parametrize("change", [
    pytest.param(lambda b: b.requests(cpu="10m"), id="requests"),
    pytest.param(lambda b: b.node_selector(disk="ssd"), id="node selector"),
    pytest.param(lambda b: b.require_node("zone", "In", "a"), id="required node affinity"),
    pytest.param(lambda b: b.toleration("k", "v", "NoSchedule"), id="tolerations"),
    pytest.param(lambda b: b.labels(app="web"), id="labels"),
    pytest.param(lambda b: b.spread(1, "zone"), id="topology spread"),
    pytest.param(lambda b: b.affinity("zone", app="db"), id="pod affinity"),
    pytest.param(lambda b: b.anti_affinity("zone", app="db"), id="pod anti-affinity"),
    pytest.param(lambda b: b.priority(5), id="priority"),
])
def test_each_change_that_can_make_a_pod_fit_retries_it_and_others_do_not(change):
    q, clock = queue()
    q.add(info("p"))
    q.requeue_unschedulable(q.pop_nowait(), frozenset({"NodeResourcesFit"}))
    annotated = make_pod("p")
    annotated.obj["metadata"]["annotations"] = {"note": "irrelevant"}
    q.add(PodInfo.from_object(annotated.obj))
    clock.advance(1)
    assert q.pop_nowait() is None
    q.add(PodInfo.from_object(change(make_pod("p")).obj))
    clock.advance(1)
    assert q.pop_nowait().info.name == "p"


async def test_pop_waits_for_the_first_backoff_to_end_then_returns_that_pod():
    import asyncio
    import time

    from corral.scheduler.queue.scheduling_queue import QueueSettings

    reads = []

    def clock() -> float:  # counts its reads: a pop that spins instead of sleeping reads it thousands of times
        reads.append(1)
        return time.monotonic()

    q = SchedulingQueue(lambda qp: (-qp.info.priority, qp.initial_attempt), clock,
                        QueueSettings(backoff_initial=0.05, backoff_max=0.05))
    q.add(info("p"))
    q.requeue_backoff(q.pop_nowait())
    ends = time.monotonic() + 0.05
    assert q.pop_nowait() is None  # still backing off: nothing to pop yet
    reads.clear()
    qp = await asyncio.wait_for(q.pop(), 10)
    assert qp.key == "default/p" and time.monotonic() >= ends
    assert len(reads) < 20, f"pop read the clock {len(reads)} times while it waited"


async def test_pop_waits_for_the_first_backoff_to_end_and_no_longer(monkeypatch):
    """With nothing active, pop sleeps until the earliest backoff ends (here 0.25 s away on the fake
    clock, whose time the stand-in wait moves on), then serves that pod."""
    import asyncio

    from corral.scheduler.queue import scheduling_queue

    q, clock = queue()
    q.add(info("a"))
    q.requeue_backoff(q.pop_nowait())  # 1 s of backoff
    clock.advance(0.75)
    waited: list = []

    async def wait_for(awaitable, timeout):  # as asyncio.wait_for when nothing wakes the queue
        awaitable.close()
        waited.append(timeout)
        clock.advance(timeout)
        raise asyncio.TimeoutError

    monkeypatch.setattr(scheduling_queue.asyncio, "wait_for", wait_for)
    assert (await q.pop()).info.name == "a"
    assert waited == [0.25]


PLUGINS = ("NodeResourcesFit", "NodePorts", "InterPodAffinity", "PodTopologySpread", "TaintToleration", "NodeAffinity")
STEPS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, 4)),
    st.tuples(st.just("attempt"), st.frozensets(st.sampled_from(PLUGINS), max_size=3)),
    st.tuples(st.just("event"), st.sampled_from(sorted(EVENT_PLUGINS))),
    st.tuples(st.just("delete"), st.integers(0, 4)),
    st.tuples(st.just("wait"), st.sampled_from((0.5, 5.0, 31.0))),
    st.tuples(st.just("flush"), st.none()),
), max_size=60)


@settings(max_examples=500, deadline=None)
@given(STEPS)
def test_an_event_moves_exactly_the_pods_its_plugins_rejected_in_the_order_they_were_parked(steps):
    """The queue finds the pods an event may help by the plugins that rejected them, not by looking
    at every unschedulable pod; it must move exactly those, in the order a scan over all of them
    would (the order of equal-priority pods in the active queue follows it)."""
    q, clock = queue()
    moved: list[str] = []
    to_active_or_backoff = q._to_active_or_backoff
    q._to_active_or_backoff = lambda qp: moved.append(qp.info.name) or to_active_or_backoff(qp)
    parked: dict[str, tuple[frozenset[str], float]] = {}  # the model: name → (plugins, when), in order
    for op, arg in steps:
        moved.clear()
        if op == "add":
            q.add(info(f"p{arg}"))
        elif op == "attempt":
            qp = q.pop_nowait()
            if qp is not None:
                q.requeue_unschedulable(qp, arg)
                parked[qp.info.name] = (arg, clock.now)
        elif op == "event":
            plugins = EVENT_PLUGINS[arg]
            expected = [n for n, (rejected, _) in parked.items()
                        if "*" in plugins or not rejected or rejected & plugins]
            assert q.on_event(arg) == len(expected)
            assert moved == expected
            for n in expected:
                del parked[n]
        elif op == "delete":
            q.delete(f"default/p{arg}")
            parked.pop(f"p{arg}", None)
        elif op == "wait":
            clock.advance(arg)
        else:
            expected = [n for n, (_, when) in parked.items() if clock.now - when >= 30]
            assert q.flush_unschedulable() == len(expected)
            assert moved == expected
            for n in expected:
                del parked[n]
        assert q.counts()["unschedulable"] == len(parked)
