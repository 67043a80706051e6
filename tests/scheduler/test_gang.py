"""Gang scheduling: a PodGroup's members bind all together or not at all, hold nothing once their
timeout passes, wait outside the queue until the gang can be whole, and say why in its status."""

from __future__ import annotations

import asyncio
import time

import pytest

from corral.api.kinds.scheduling import POD_GROUP_LABEL
from corral.testing.builders import make_node, make_pod
from corral.testing.clock import FakeClock
from corral.testing.scheduler_harness import Harness


def member(name: str, group: str = "train", cpu: str = "1") -> dict:
    return make_pod(name).requests(cpu=cpu).label(POD_GROUP_LABEL, group).obj


def cluster(nodes: int) -> Harness:
    h = Harness()
    for i in range(nodes):
        h.add_node(make_node(f"n{i}").capacity(cpu=1, memory="4Gi", pods=10))
    return h


async def one_round(h: Harness) -> None:
    """Every active pod tried once; bindings (and gang members waiting at Permit) run to their end."""
    s = h.scheduler
    s.events.start()
    while (qp := s.queue.pop_nowait()) is not None:
        await s.attempt(qp)
    while s._inflight:
        await asyncio.gather(*list(s._inflight), return_exceptions=True)
    await s.events.drain()


def cpu_held(h: Harness) -> int:
    table = h.scheduler.cache.table
    return int(table.requested["cpu"][: table.size].sum())


async def test_a_gang_with_room_for_all_binds_all_together():
    h = cluster(8)
    h.add_group("train", 8)
    for i in range(8):
        h.add_pod(member(f"w{i}"))
    await h.run()
    assert len(h.placements()) == 8 and len(set(h.placements().values())) == 8
    await h.scheduler.write_gang_statuses()
    assert h.writer.group_statuses["default/train"] == {"phase": "Scheduled", "scheduled": 8, "members": 8,
                                                        "message": ""}


async def test_a_gang_that_does_not_fit_whole_binds_nothing_and_holds_nothing_after_its_timeout():
    h = cluster(7)
    h.add_group("train", 8, timeout=1)
    for i in range(8):
        h.add_pod(member(f"w{i}"))
    started = time.monotonic()
    await one_round(h)
    assert 1.0 <= time.monotonic() - started < 1.8  # the seven placed members were held for the timeout
    assert h.placements() == {} and h.writer.bind_attempts == 0
    assert cpu_held(h) == 0
    await h.scheduler.write_gang_statuses()
    status = h.writer.group_statuses["default/train"]
    assert (status["phase"], status["scheduled"], status["members"]) == ("Pending", 0, 8)
    assert status["message"] == "timed out after 1s with 7 of 8 members placed: places given back"
    events = {m for k, r, m in h.writer.events if r == "FailedScheduling"}
    assert "PodGroup default/train: timed out after 1s with 7 of 8 members placed: places given back" in events
    # The room is free for others at once, and the gang is not tried again while its denial lasts.
    h.add_pod(make_pod("small").requests(cpu="1"))
    h.queue_clock.advance(10)
    h.scheduler.queue.flush_backoff()
    await one_round(h)
    assert list(h.placements()) == ["default/small"]
    assert all(h.scheduler.queue.get(f"default/w{i}").where == "unschedulable" for i in range(8))


async def test_a_gang_denied_after_its_timeout_says_for_how_long_and_is_tried_again_when_that_ends():
    """Denied for its timeout after it fell short: members tried meanwhile are refused on every node,
    saying when the gang is tried again (removing pods would not help, so none is removed); at that
    moment, with room for all now, the gang binds."""
    h = cluster(7)
    now = FakeClock()
    h.scheduler.cache.gangs.clock = now
    h.add_group("train", 8, timeout=1)
    for i in range(8):
        h.add_pod(member(f"w{i}"))
    await one_round(h)  # seven placed, held for the timeout, given back
    h.queue_clock.advance(10)
    h.scheduler.queue.flush_backoff()
    await one_round(h)
    assert h.writer.conditions["default/w0"]["message"] == (
        "0/7 nodes are available: 7 PodGroup default/train did not fit whole within its timeout; tried again "
        "in 1s. preemption: 0/7 nodes are available: 7 Preemption is not helpful for scheduling.")
    assert all(h.scheduler.queue.get(f"default/w{i}").where == "unschedulable" for i in range(8))
    now.advance(1)
    h.add_node(make_node("n7").capacity(cpu=1, memory="4Gi", pods=10))
    await h.run()
    assert len(h.placements()) == 8 and h.writer.deleted == []


async def test_members_wait_outside_the_queue_until_the_gang_can_be_whole():
    h = cluster(3)
    for i in range(2):
        h.add_pod(member(f"w{i}"))
    assert len(h.scheduler.queue) == 0  # no PodGroup yet
    h.add_group("train", 3)
    assert len(h.scheduler.queue) == 0  # two of three members
    h.add_pod(member("w2"))
    assert len(h.scheduler.queue) == 3
    await h.run()
    assert sorted(h.placements()) == ["default/w0", "default/w1", "default/w2"]


async def test_a_member_that_goes_away_lets_the_waiting_ones_go():
    h = cluster(3)
    h.add_group("train", 3, timeout=60)
    for i in range(3):
        h.add_pod(member(f"w{i}", cpu="1" if i < 2 else "2"))  # w2 fits nowhere: w0 and w1 wait for it
    s = h.scheduler
    s.events.start()
    while (qp := s.queue.pop_nowait()) is not None:
        await s.attempt(qp)
    await asyncio.sleep(0.05)
    assert len(s.cache.gangs.gangs["default/train"].waiting) == 2 and cpu_held(h) == 2000
    h.delete_pod("default/w2")
    await asyncio.gather(*list(s._inflight), return_exceptions=True)
    assert h.placements() == {} and cpu_held(h) == 0


async def test_a_gang_short_of_members_holds_nothing_while_other_pods_and_gangs_schedule():
    h = cluster(4)
    h.add_group("big", 6, timeout=60)
    for i in range(5):
        h.add_pod(member(f"big{i}", group="big"))
    h.add_pod(make_pod("plain").requests(cpu="1"))
    h.add_group("small", 2)
    h.add_pod(member("s0", group="small"))
    h.add_pod(member("s1", group="small"))
    await h.run()
    assert sorted(h.placements()) == ["default/plain", "default/s0", "default/s1"]
    await h.scheduler.write_gang_statuses()
    assert h.writer.group_statuses["default/big"] == {"phase": "Pending", "scheduled": 0, "members": 5,
                                                      "message": "5 of 6 members exist"}


def test_a_gang_through_the_server_binds_within_a_second_of_its_last_member_and_reports_it(cluster_process, tmp_path):
    import json

    from tests.cli.test_cli import corral
    from tests.scheduler.test_end_to_end import manifests, node, pod, wait_for

    kc = cluster_process.kubeconfig
    corral("apply", "-f", manifests(tmp_path, *[node(f"n{i}") for i in range(4)]), kubeconfig=kc)  # 2 cpu each
    group = {"apiVersion": "scheduling.corral.dev/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "train", "namespace": "default"}, "spec": {"minMember": 8}}
    members = []
    for i in range(8):
        p = pod(f"w{i}", "1")
        p["metadata"]["labels"] = {POD_GROUP_LABEL: "train"}
        members.append(p)
    corral("apply", "-f", manifests(tmp_path, group, *members[:7]), kubeconfig=kc)
    listed = corral("get", "podgroups", kubeconfig=kc).stdout
    assert listed.split("\n")[0].split() == ["NAME", "MIN", "MEMBER", "SCHEDULED", "PHASE", "AGE"]

    def bound() -> int:
        items = json.loads(corral("get", "pods", "-o", "json", kubeconfig=kc).stdout)["items"]
        return sum(1 for p in items if p["spec"].get("nodeName"))

    assert bound() == 0
    corral("apply", "-f", manifests(tmp_path, members[7]), kubeconfig=kc)
    last = time.monotonic()
    wait_for(lambda: bound() == 8, timeout=10, what="the whole gang bound")
    assert time.monotonic() - last < 3.0  # within a second, with the CLI's own start-up around it
    status = wait_for(lambda: (lambda g: g if (g.get("status") or {}).get("phase") == "Scheduled" else None)(
        json.loads(corral("get", "podgroup", "train", "-o", "json", kubeconfig=kc).stdout)),
        what="the PodGroup's status")["status"]
    assert (status["scheduled"], status["members"]) == (8, 8)


async def held(h: Harness, group: str, count: int) -> None:
    """Run attempts until ``count`` members of ``group`` wait at Permit."""
    s = h.scheduler
    s.events.start()
    while (qp := s.queue.pop_nowait()) is not None:
        await s.attempt(qp)
    await asyncio.sleep(0.05)
    assert len(s.cache.gangs.gangs[group].waiting) == count


async def two_waiting_for_w2() -> Harness:
    """Three nodes of one cpu and a gang of three whose w2 asks for two: w0 and w1 wait for it."""
    h = cluster(3)
    h.add_group("train", 3, timeout=60)
    for i in range(3):
        h.add_pod(member(f"w{i}", cpu="1" if i < 2 else "2"))
    await held(h, "default/train", 2)
    return h


async def test_a_podgroup_deleted_while_members_wait_lets_them_go_and_says_why():
    h = await two_waiting_for_w2()
    h.scheduler.group_changed("default/train", None)
    await asyncio.gather(*list(h.scheduler._inflight), return_exceptions=True)
    assert h.placements() == {} and cpu_held(h) == 0
    assert h.writer.conditions["default/w0"]["message"] == "PodGroup default/train: its PodGroup was deleted"


async def test_a_member_relabelled_into_another_group_leaves_its_gang_short_and_the_waiting_go():
    h = cluster(3)
    h.add_group("train", 3, timeout=60)
    h.add_group("other", 1)
    for i in range(3):
        h.add_pod(member(f"w{i}", cpu="1" if i < 2 else "2"))
    await held(h, "default/train", 2)
    h.add_pod(member("w2", group="other", cpu="2"))  # w2 now belongs to another group
    await asyncio.gather(*list(h.scheduler._inflight), return_exceptions=True)
    book = h.scheduler.cache.gangs
    assert book.member_of["default/w2"] == "default/other" and "default/w2" not in book.gangs["default/train"].members
    assert h.placements() == {} and cpu_held(h) == 0
    assert h.writer.conditions["default/w0"]["message"] == ("PodGroup default/train: member default/w2 went away: "
                                                              "2 of 3 members exist")


async def test_a_member_whose_group_label_is_removed_leaves_its_gang_short_and_the_waiting_go():
    h = await two_waiting_for_w2()
    h.add_pod(make_pod("w2").requests(cpu="2"))  # no group any more
    await asyncio.gather(*list(h.scheduler._inflight), return_exceptions=True)
    book = h.scheduler.cache.gangs
    assert "default/w2" not in book.member_of and "default/w2" not in book.gangs["default/train"].members
    assert h.placements() == {} and cpu_held(h) == 0


async def test_a_member_that_stays_in_its_group_through_an_update_is_not_counted_twice_nor_lost():
    h = await two_waiting_for_w2()
    h.add_pod(member("w2", cpu="2"))  # the same pod, updated, still a member
    assert len(h.scheduler.cache.gangs.gangs["default/train"].waiting) == 2
    assert h.scheduler.cache.gangs.gangs["default/train"].members == {"default/w0", "default/w1", "default/w2"}
    h.scheduler.cache.gangs.reject_waiting("default/train", "done")
    await asyncio.gather(*list(h.scheduler._inflight), return_exceptions=True)


async def test_a_member_that_goes_away_is_forgotten_and_its_groups_status_says_so():
    """No gang member waits here (no node at all): the status changes only because a member left."""
    h = cluster(0)
    h.add_group("train", 3, timeout=60)
    for i in range(3):
        h.add_pod(member(f"w{i}"))
    await one_round(h)
    s = h.scheduler
    await s.write_gang_statuses()
    # Every member there, none placed, none waiting: Pending, and nothing more to say.
    assert h.writer.group_statuses["default/train"] == {"phase": "Pending", "scheduled": 0, "members": 3,
                                                        "message": ""}
    h.delete_pod("default/w2")
    await s.write_gang_statuses()
    assert h.writer.group_statuses["default/train"] == {"phase": "Pending", "scheduled": 0, "members": 2,
                                                        "message": "2 of 3 members exist"}
    assert "default/w2" not in s.cache.gangs.member_of  # a pod of that name later is a newcomer


async def test_members_waiting_for_the_rest_say_so_in_the_status():
    h = await two_waiting_for_w2()
    await h.scheduler.write_gang_statuses()
    assert h.writer.group_statuses["default/train"] == {
        "phase": "Scheduling", "scheduled": 2, "members": 3,
        "message": "2 of 3 members have a place; holding them up to 60s for the rest"}
    h.scheduler.cache.gangs.reject_waiting("default/train", "done")
    await asyncio.gather(*list(h.scheduler._inflight), return_exceptions=True)


async def test_a_member_that_went_away_and_came_back_lets_the_gang_go_at_once_not_after_its_timeout():
    h = await two_waiting_for_w2()
    h.delete_pod("default/w2")  # its members are let go, but the gang is not refused for a while
    await asyncio.gather(*list(h.scheduler._inflight), return_exceptions=True)
    h.add_pod(member("w2", cpu="1"))  # back, and it fits now
    h.queue_clock.advance(h.scheduler.queue.settings.backoff_max)  # w0 and w1 back from their backoff
    h.scheduler.queue.flush_backoff()
    await one_round(h)
    assert sorted(h.placements()) == ["default/w0", "default/w1", "default/w2"]


async def test_a_bound_gang_that_loses_a_member_says_how_many_exist():
    h = cluster(2)
    h.add_group("train", 2)
    for i in range(2):
        h.add_pod(member(f"w{i}"))
    await h.run()
    assert sorted(h.placements()) == ["default/w0", "default/w1"]
    h.delete_pod("default/w1")
    await h.scheduler.write_gang_statuses()
    assert h.writer.group_statuses["default/train"] == {"phase": "Pending", "scheduled": 1, "members": 1,
                                                        "message": "1 of 2 members exist"}


async def test_a_member_that_finished_no_longer_counts_as_one():
    h = cluster(0)
    h.add_group("train", 3, timeout=60)
    for i in range(3):
        h.add_pod(member(f"w{i}"))
    done = member("w2")
    done["status"]["phase"] = "Succeeded"
    h.add_pod(done)
    await h.scheduler.write_gang_statuses()
    assert h.writer.group_statuses["default/train"]["members"] == 2
    assert "default/w2" not in h.scheduler.cache.gangs.member_of


@pytest.mark.parametrize("how", ["Failed", "deleting"])
async def test_a_member_that_failed_or_is_being_deleted_no_longer_counts_as_one(how):
    h = cluster(0)
    h.add_group("train", 3, timeout=60)
    for i in range(3):
        h.add_pod(member(f"w{i}"))
    gone = member("w2")
    if how == "Failed":
        gone["status"]["phase"] = "Failed"
    else:
        gone["metadata"]["deletionTimestamp"] = "2026-11-28T10:00:00Z"
    h.add_pod(gone)
    assert "default/w2" not in h.scheduler.cache.gangs.member_of
    await h.scheduler.write_gang_statuses()
    assert h.writer.group_statuses["default/train"]["members"] == 2


async def test_groups_of_one_name_in_two_namespaces_are_two_gangs():
    h = cluster(3)
    h.add_group("train", 2, namespace="team-a")
    h.add_group("train", 2, namespace="team-b")
    h.add_pod(make_pod("a0", "team-a").requests(cpu="1").label(POD_GROUP_LABEL, "train"))
    h.add_pod(make_pod("b0", "team-b").requests(cpu="1").label(POD_GROUP_LABEL, "train"))
    assert len(h.scheduler.queue) == 0  # one member of two in each: both wait
    h.add_pod(make_pod("a1", "team-a").requests(cpu="1").label(POD_GROUP_LABEL, "train"))
    await h.run()
    assert sorted(h.placements()) == ["team-a/a0", "team-a/a1"]
    book = h.scheduler.cache.gangs
    assert book.member_of == {"team-a/a0": "team-a/train", "team-a/a1": "team-a/train", "team-b/b0": "team-b/train"}


async def test_each_groups_status_is_written_once_per_change_and_a_deleted_groups_never(monkeypatch):
    h = cluster(0)
    for name in ("a-gone", "b-train", "c-eval"):
        h.add_group(name, 2, timeout=60)
        h.add_pod(member(f"{name}-0", group=name))
    await one_round(h)
    h.scheduler.group_changed("default/a-gone", None)  # deleted: nothing to write to
    writes: list[str] = []
    patch = h.writer.patch_object_status

    async def counted(kind, namespace, name, body):
        writes.append(name)
        await patch(kind, namespace, name, body)

    monkeypatch.setattr(h.writer, "patch_object_status", counted)
    await h.scheduler.write_gang_statuses()
    assert sorted(writes) == ["b-train", "c-eval"]  # the others after the deleted one, each once
    h.scheduler.cache.gangs.changed.update({"default/b-train", "default/c-eval"})  # touched, not changed
    await h.scheduler.write_gang_statuses()
    assert sorted(writes) == ["b-train", "c-eval"]  # the same status is not written again
    h.add_pod(member("c-eval-1", group="c-eval"))  # c changes; b, before it, is touched only
    h.scheduler.cache.gangs.changed.add("default/b-train")
    await h.scheduler.write_gang_statuses()
    assert sorted(writes) == ["b-train", "c-eval", "c-eval"]


async def test_a_member_that_goes_away_leaving_the_gang_whole_keeps_the_waiting_ones_waiting():
    """Three of four members are enough: the fourth, which fits nowhere, going away changes nothing
    for the two that wait for the third."""
    h = cluster(3)
    h.add_group("train", 3, timeout=60)
    for i in range(4):
        h.add_pod(member(f"w{i}", cpu="1" if i < 2 else "2"))  # w2 and w3 fit nowhere yet
    await held(h, "default/train", 2)
    h.delete_pod("default/w3")
    book = h.scheduler.cache.gangs
    assert len(book.gangs["default/train"].waiting) == 2 and cpu_held(h) == 2000
    h.add_node(make_node("big").capacity(cpu=2, memory="4Gi", pods=10))
    h.scheduler.queue.on_event("NodeAdd")
    h.queue_clock.advance(h.scheduler.queue.settings.backoff_max)
    h.scheduler.queue.flush_backoff()
    await one_round(h)
    assert sorted(h.placements()) == ["default/w0", "default/w1", "default/w2"]


async def test_a_gang_still_short_of_members_offers_none_of_them_to_the_queue_again():
    """Each arrival offering every waiting member again would cost a big gang work quadratic in
    its size; they go once the gang can be whole."""
    h = cluster(1)
    h.add_group("train", 3)
    for i in range(2):
        h.add_pod(member(f"w{i}"))
    book = h.scheduler.cache.gangs
    assert book.member_changed("default/w1", "default/train", True) == []
    assert book.group_changed("default/train", {"spec": {"minMember": 3, "scheduleTimeoutSeconds": 30}}) == []
    assert book.group_changed("default/train", None) == []  # deleted: they wait for it to exist again
    assert sorted(book.gated) == ["default/w0", "default/w1"]
    offered = book.group_changed("default/train", {"spec": {"minMember": 2}})
    assert sorted(obj["metadata"]["name"] for obj in offered) == ["w0", "w1"] and book.gated == {}


async def test_a_member_deleted_while_kept_out_of_the_queue_is_not_kept():
    h = cluster(3)
    h.add_group("train", 3)
    for i in range(2):
        h.add_pod(member(f"w{i}"))
    book = h.scheduler.cache.gangs
    assert sorted(book.gated) == ["default/w0", "default/w1"]  # two of three: both wait outside the queue
    h.delete_pod("default/w1")
    assert sorted(book.gated) == ["default/w0"]


async def test_members_made_before_their_podgroup_go_to_the_queue_once_it_is_made():
    h = cluster(3)
    for i in range(3):
        h.add_pod(member(f"w{i}"))
    assert len(h.scheduler.queue) == 0  # waiting for PodGroup default/train to exist
    h.add_group("train", 3)
    assert all(f"default/w{i}" in h.scheduler.queue for i in range(3))
    await h.run()
    assert sorted(h.placements()) == ["default/w0", "default/w1", "default/w2"]
    await h.scheduler.write_gang_statuses()
    assert h.writer.group_statuses["default/train"] == {"phase": "Scheduled", "scheduled": 3, "members": 3,
                                                        "message": ""}


async def test_a_member_that_arrives_after_its_gangs_deadline_ends_the_wait_at_once():
    """The first member waits 30 s for the rest; the second is placed after those 30 s have passed
    (on the gangs' clock): the gang has timed out, and both are refused now, not a moment later."""
    now = [1000.0]
    h = Harness()
    h.scheduler.cache.gangs.clock = lambda: now[0]  # the gangs' own clock
    for i in range(3):
        h.add_node(make_node(f"n{i}").capacity(cpu=1, memory="4Gi", pods=10))
    h.add_group("train", 3, timeout=30)
    for i in range(3):
        h.add_pod(member(f"w{i}"))
    s = h.scheduler
    s.events.start()
    await s.attempt(s.queue.pop_nowait())
    gang = s.cache.gangs.gang("default/train")
    async with asyncio.timeout(5):
        while not gang.waiting:  # the first member at Permit, its deadline set
            await asyncio.sleep(0)
    now[0] += 31
    await s.attempt(s.queue.pop_nowait())
    await asyncio.wait_for(asyncio.gather(*list(s._inflight)), 0.9)  # no wait at all: well within
    assert h.placements() == {} and cpu_held(h) == 0


async def test_a_queued_member_updated_after_its_gang_fell_short_leaves_the_queue_to_wait_outside_it():
    h = cluster(3)
    h.add_group("train", 3)
    for i in range(3):
        h.add_pod(member(f"w{i}"))
    assert all(f"default/w{i}" in h.scheduler.queue for i in range(3))
    h.delete_pod("default/w2")
    updated = member("w0")
    updated["metadata"]["labels"]["tier"] = "trainer"  # any update: its gang is short now
    h.add_pod(updated)
    assert "default/w0" not in h.scheduler.queue and "default/w0" in h.scheduler.cache.gangs.gated


async def test_a_gang_larger_than_the_bindings_in_flight_still_binds_whole_through_the_loop():
    """Members waiting in Permit for the rest are not counted as bindings in flight: a gang of 20
    under a limit of 8 still has all its members scheduled, and binds."""
    import contextlib

    h = cluster(20)
    h.add_group("train", 20)
    s = h.scheduler
    s.max_binds_in_flight = 8
    s.events.start()
    for i in range(20):
        h.add_pod(member(f"w{i}"))
    loop = asyncio.create_task(s.run())
    try:
        for _ in range(500):
            if len(h.placements()) == 20:
                break
            await asyncio.sleep(0.001)
        assert len(h.placements()) == 20 and len(set(h.placements().values())) == 20
        assert s.binding == 0
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
