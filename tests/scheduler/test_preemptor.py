"""Carrying out a preemption, as the API sees it: the preemptor's nominatedNodeName; for each
victim a DisruptionTarget condition (merged, not replacing its other conditions), a delete and a
Normal "Preempted" event naming the preemptor; the claims of lower priority on that node cleared
and their pods told; a victim already leaving left alone; a delete that fails undoing the claim."""

from __future__ import annotations

import asyncio

from corral.scheduler.framework.podinfo import PodInfo
from corral.scheduler.preemptor import DISRUPTION_REASON
from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import Harness


def setup() -> tuple[Harness, PodInfo, PodInfo]:
    h = Harness()
    h.add_node(make_node("n1").capacity(cpu=4, memory="8Gi", pods=20))
    h.add_node(make_node("n2").capacity(cpu=4, memory="8Gi", pods=20))
    h.add_pod(make_pod("victim").requests(cpu="4").priority(0).node("n1"))
    cache = h.scheduler.cache
    # Claims already on n1: one of lower priority than the preemptor (it loses its room), one higher.
    cache.nominator.nominate(PodInfo.from_object(make_pod("low").requests(cpu="1").priority(5).obj), "n1")
    cache.nominator.nominate(PodInfo.from_object(make_pod("top").requests(cpu="1").priority(50).obj), "n1")
    cache.nominator.nominate(PodInfo.from_object(make_pod("elsewhere").requests(cpu="1").priority(5).obj), "n2")
    hi = PodInfo.from_object(make_pod("hi").requests(cpu="4").priority(10).obj)
    return h, hi, cache.pods["default/victim"].info


async def settle(h: Harness) -> None:
    s = h.scheduler
    while s._inflight:
        await asyncio.gather(*list(s._inflight))
    await s.events.drain()


async def test_a_preemption_nominates_marks_deletes_tells_and_clears_the_claims_it_displaces():
    h, hi, victim = setup()
    s, w = h.scheduler, h.writer
    s.events.start()
    s.preemptor.nominate(hi, "n1", (victim,), "default-scheduler")
    cache = s.cache
    assert cache.nominator.node_of("default/hi") == "n1"
    assert (cache.nominator.node_of("default/low"), cache.nominator.node_of("default/top"),
            cache.nominator.node_of("default/elsewhere")) == ("", "n1", "n2")  # only the lower claim on n1 goes
    assert cache.pods["default/victim"].terminating
    await settle(h)
    patches = dict(w.status_patches)
    assert patches["default/hi"] == {"status": {"nominatedNodeName": "n1"}}
    (condition,) = patches["default/victim"]["status"]["conditions"]
    assert {k: condition[k] for k in ("type", "status", "reason", "message")} == {
        "type": "DisruptionTarget", "status": "True", "reason": DISRUPTION_REASON,
        "message": "default-scheduler: preempting to accommodate a higher priority pod"}
    assert w.strategic == ["default/victim"]  # merged into its conditions, not replacing them
    assert patches["default/low"] == {"status": {"nominatedNodeName": None}}  # told it lost its room
    assert "default/top" not in patches and "default/elsewhere" not in patches
    assert w.deleted == ["default/victim"]
    (event,) = [e for e in w.event_objects if e["reason"] == "Preempted"]
    assert (event["type"], event["involvedObject"]["name"], event["message"]) == (
        "Normal", "victim", "Preempted by default/hi on node n1")
    assert (s.preemptor.victims, s.preemptor.failures) == (1, 0)


async def test_a_victim_already_leaving_is_not_deleted_again():
    h, hi, victim = setup()
    s = h.scheduler
    s.cache.mark_terminating("default/victim")
    s.preemptor.nominate(hi, "n1", (victim,), "default-scheduler")
    await settle(h)
    assert h.writer.deleted == [] and s.preemptor.victims == 0
    assert s.cache.nominator.node_of("default/hi") == "n1"  # it waits for that pod to go


async def test_a_delete_that_fails_undoes_the_claim_so_the_next_attempt_may_preempt_again():
    h, hi, victim = setup()
    s = h.scheduler
    h.writer.undeletable.add("default/victim")
    s.events.start()
    s.preemptor.nominate(hi, "n1", (victim,), "default-scheduler")
    await settle(h)
    assert s.cache.nominator.node_of("default/hi") == ""
    assert not s.cache.pods["default/victim"].terminating
    assert (s.preemptor.victims, s.preemptor.failures) == (0, 1)
    assert not [e for e in h.writer.event_objects if e["reason"] == "Preempted"]
    s.preemptor.nominate(hi, "n1", (victim,), "default-scheduler")  # the next attempt: refused again, counted again
    await settle(h)
    assert (s.preemptor.victims, s.preemptor.failures) == (0, 2)


async def test_status_patches_that_fail_stop_nothing_the_delete_decides():
    """The preemptor's claim, a victim's DisruptionTarget and a displaced claim's clearing are each a
    best effort (the pod may be gone): each refused, the victim is still deleted and told."""
    h, hi, victim = setup()
    s, w = h.scheduler, h.writer

    async def refuse(pod, patch, *, strategic=False):
        raise RuntimeError(f"{pod.key} is gone")

    w.patch_status = refuse
    s.events.start()
    s.preemptor.nominate(hi, "n1", (victim,), "default-scheduler")
    await settle(h)
    assert w.deleted == ["default/victim"] and (s.preemptor.victims, s.preemptor.failures) == (1, 0)
    assert s.cache.nominator.node_of("default/hi") == "n1" and s.cache.nominator.node_of("default/low") == ""
    assert [e["involvedObject"]["name"] for e in w.event_objects if e["reason"] == "Preempted"] == ["victim"]


def test_a_claim_follows_its_pod_to_another_node_and_to_new_requests_and_is_counted_once():
    h = Harness()
    for name in ("n1", "n2"):
        h.add_node(make_node(name).capacity(cpu=4, memory="8Gi", pods=20))
    cache = h.scheduler.cache
    table, nominator = cache.table, cache.nominator

    def cpu_claimed() -> dict[str, int]:
        return {name: int(table.requested["cpu"][table.row_of[name]]) for name in ("n1", "n2")}

    nominator.nominate(PodInfo.from_object(make_pod("p").requests(cpu="1").priority(5).obj), "n1")
    nominator.nominate(PodInfo.from_object(make_pod("p").requests(cpu="1").priority(5).obj), "n1")
    assert cpu_claimed() == {"n1": 1000, "n2": 0}
    nominator.nominate(PodInfo.from_object(make_pod("p").requests(cpu="2").priority(5).obj), "n1")
    assert cpu_claimed() == {"n1": 2000, "n2": 0}
    nominator.nominate(PodInfo.from_object(make_pod("p").requests(cpu="2").priority(5).obj), "n2")
    assert cpu_claimed() == {"n1": 0, "n2": 2000} and nominator.node_of("default/p") == "n2"
    assert nominator.clear("default/p") and cpu_claimed() == {"n1": 0, "n2": 0} and len(nominator) == 0


async def test_a_claim_of_the_preemptors_own_priority_keeps_its_room():
    h, hi, victim = setup()
    peer = PodInfo.from_object(make_pod("peer").requests(cpu="1").priority(10).obj)
    h.scheduler.cache.nominator.nominate(peer, "n1")
    h.scheduler.events.start()
    h.scheduler.preemptor.nominate(hi, "n1", (victim,), "default-scheduler")
    assert h.scheduler.cache.nominator.node_of("default/peer") == "n1"
    await settle(h)
    assert "default/peer" not in dict(h.writer.status_patches)


def test_a_claim_stays_hidden_from_more_important_pods_after_another_of_its_priority_is_cleared():
    """Two claims of priority 5 on n1, one of them cleared (bound elsewhere): a pod of priority 10
    still does not see the other, a pod of priority 5 does."""
    h = Harness()
    h.add_node(make_node("n1").capacity(cpu=4, memory="8Gi", pods=20))
    cache = h.scheduler.cache
    table, nominator = cache.table, cache.nominator
    for name in ("a", "b"):
        nominator.nominate(PodInfo.from_object(make_pod(name).requests(cpu="1").priority(5).obj), "n1")
    assert nominator.clear("default/a")

    def cpu_seen_by(priority: int) -> int:
        with nominator.hidden_from(PodInfo.from_object(make_pod("x").priority(priority).obj)):
            return int(table.requested["cpu"][table.row_of["n1"]])

    assert (cpu_seen_by(10), cpu_seen_by(5)) == (0, 1000)
    assert nominator.lower_on("n1", 10) == ["default/b"]
