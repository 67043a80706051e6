"""The scheduler's two ways to the cluster, against a real server: its writes (bindings, conditions,
events) inside the server process and over HTTP, its event recorder, and its two sources of truth
(the server's watch cache, informers)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from corral.api.resources import by_kind
from corral.client import Client
from corral.scheduler.cluster import EventRecorder, HttpWriter, InProcessWriter
from corral.scheduler.framework.podinfo import PodInfo
from corral.scheduler.framework.status import SUCCESS, Code, Status
from corral.scheduler.sources import InformerSource, attach_in_process
from corral.server.control.leader import Fence
from corral.testing.builders import make_node, make_pod
from corral.testing.clock import FakeClock
from corral.testing.scheduler_harness import Harness, RecordingWriter

GONE = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("the pod was deleted or bound elsewhere",), "DefaultBinder")


def pod(name: str, namespace: str = "default", **labels: str) -> dict:
    obj = make_pod(name, namespace).labels(**labels).obj
    obj["metadata"].pop("uid")
    obj.pop("status")
    return obj


def node(name: str) -> dict:
    return make_node(name).obj


async def create_namespace(c: Client, name: str) -> None:
    await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


async def created_info(c: Client, name: str, namespace: str = "default") -> PodInfo:
    return PodInfo.from_object(await c.create(pod(name, namespace), namespace, raw=True))


@pytest.fixture(params=["in-process", "http"])
async def writer(request, server):
    """(writer, client) for each kind of writer, on one real server."""
    async with server.client() as c:
        yield (InProcessWriter(server.api) if request.param == "in-process" else HttpWriter(c)), c


async def test_a_binding_assigns_the_node_and_marks_the_pod_scheduled(writer):
    w, c = writer
    info = await created_info(c, "p")
    assert await w.bind(info, "n1") == SUCCESS
    got = await c.get("pods", "p", "default", raw=True)
    assert got["spec"]["nodeName"] == "n1" and got["status"]["phase"] == "Scheduled"
    assert [(x["type"], x["status"]) for x in got["status"]["conditions"]] == [("PodScheduled", "True")]


async def test_binding_a_pod_that_is_bound_elsewhere_or_gone_is_unresolvable(writer):
    w, c = writer
    info = await created_info(c, "p")
    assert await w.bind(info, "n1") == SUCCESS
    assert await w.bind(info, "n2") == GONE
    assert (await c.get("pods", "p", "default", raw=True))["spec"]["nodeName"] == "n1"
    await c.delete("pods", "p", "default")
    assert await w.bind(PodInfo.from_object(pod("p") | {"metadata": {"name": "p", "namespace": "default"}}),
                        "n1") == GONE
    assert await w.bind(PodInfo.from_object(pod("never-made") | {"metadata": {"name": "never-made",
                                                                           "namespace": "default"}}), "n1") == GONE


async def test_a_binding_in_another_namespace_binds_that_pod(writer):
    w, c = writer
    await create_namespace(c, "team")
    twin = await created_info(c, "p")  # the same name in default stays unbound
    info = await created_info(c, "p", "team")
    assert await w.bind(info, "n1") == SUCCESS
    assert (await c.get("pods", "p", "team", raw=True))["spec"]["nodeName"] == "n1"
    assert "nodeName" not in (await c.get("pods", twin.name, "default", raw=True))["spec"]


@pytest.mark.parametrize("namespace", ["default", "team"])
async def test_the_condition_patch_changes_only_the_pods_status(writer, namespace):
    w, c = writer
    if namespace != "default":
        await create_namespace(c, namespace)
        await created_info(c, "p")  # a pod of the same name elsewhere is left alone
    info = await created_info(c, "p", namespace)
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/0 nodes"}
    await w.patch_status(info, {"status": {"conditions": [condition]}})
    got = await c.get("pods", "p", namespace, raw=True)
    assert got["status"]["conditions"] == [condition]
    assert "nodeName" not in got["spec"]
    if namespace != "default":
        assert "conditions" not in ((await c.get("pods", "p", "default", raw=True)).get("status") or {})


async def test_a_strategic_status_patch_merges_conditions_by_type_and_a_merge_patch_replaces_them(writer):
    w, c = writer
    info = await created_info(c, "p")
    ready = {"type": "Ready", "status": "False"}
    await w.patch_status(info, {"status": {"conditions": [ready]}})
    scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    await w.patch_status(info, {"status": {"conditions": [scheduled]}}, strategic=True)
    got = await c.get("pods", "p", "default", raw=True)
    assert sorted(x["type"] for x in got["status"]["conditions"]) == ["PodScheduled", "Ready"]
    await w.patch_status(info, {"status": {"conditions": [ready]}})
    assert (await c.get("pods", "p", "default", raw=True))["status"]["conditions"] == [ready]


@pytest.mark.parametrize("namespace", ["default", "team"])
async def test_deleting_a_victim_deletes_that_pod_and_never_its_successor_under_the_same_name(writer, namespace):
    w, c = writer
    if namespace != "default":
        await create_namespace(c, namespace)
        await created_info(c, "victim")  # a pod of the same name elsewhere is left alone
        await c.bind("default", "victim", "n1")
    info = await created_info(c, "victim", namespace)
    await c.bind(namespace, "victim", "n1")  # running on a node: its agent stops it
    assert await w.delete_pod(info) is False
    gone = await c.get("pods", "victim", namespace, raw=True)
    assert gone["metadata"].get("deletionTimestamp")  # gracefully
    if namespace != "default":
        assert not (await c.get("pods", "victim", "default", raw=True))["metadata"].get("deletionTimestamp")
    await c.delete("pods", "victim", namespace, grace_period_seconds=0)
    successor = await created_info(c, "victim", namespace)
    await c.bind(namespace, "victim", "n1")
    assert await w.delete_pod(info) is True  # the victim is gone; the new pod of its name stays
    assert not (await c.get("pods", "victim", namespace, raw=True))["metadata"].get("deletionTimestamp")
    await c.delete("pods", "victim", namespace, grace_period_seconds=0)
    assert await w.delete_pod(successor) is True


async def test_the_status_of_an_object_the_scheduler_reports_on_is_patched(writer):
    w, c = writer
    await create_namespace(c, "team")
    group = {"apiVersion": "scheduling.corral.dev/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "train"}, "spec": {"minMember": 2}}
    await c.create(group, "team")
    await w.patch_object_status("PodGroup", "team", "train", {"status": {"phase": "Scheduling", "scheduled": 1}})
    got = await c.get("podgroups", "train", "team", raw=True)
    assert got["status"] == {"phase": "Scheduling", "scheduled": 1} and got["spec"]["minMember"] == 2


@pytest.mark.parametrize("namespace", ["default", "team"])
async def test_events_are_created_with_defaults_and_their_count_patched(writer, namespace):
    w, c = writer
    if namespace != "default":
        await create_namespace(c, namespace)
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "p.abc", "namespace": namespace},
             "involvedObject": {"kind": "Pod", "name": "p", "namespace": namespace},
             "reason": "FailedScheduling", "message": "no", "type": "Warning", "count": 1}
    await w.create_event(namespace, event)
    got = await c.get("events", "p.abc", namespace, raw=True)
    assert got["reason"] == "FailedScheduling" and got["count"] == 1
    assert got["metadata"]["uid"] and got["metadata"]["creationTimestamp"]
    await w.patch_event(namespace, "p.abc", {"count": 4})
    assert (await c.get("events", "p.abc", namespace, raw=True))["count"] == 4


async def test_an_event_created_again_is_added_to_the_one_stored(writer):
    w, c = writer
    first = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "p.abc", "namespace": "default"},
             "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}, "reason": "FailedScheduling",
             "message": "no", "type": "Warning", "count": 1, "lastTimestamp": "2026-12-06T10:00:00Z"}
    assert await w.create_event("default", first) == 1
    again = {**first, "metadata": {"name": "p.abc", "namespace": "default"}, "lastTimestamp": "2026-12-06T10:05:00Z"}
    assert await w.create_event("default", again) == 2  # a recorder that forgot it, seeing it again
    got = await c.get("events", "p.abc", "default", raw=True)
    assert (got["count"], got["lastTimestamp"], got["reason"]) == (2, "2026-12-06T10:05:00Z", "FailedScheduling")


async def test_a_framework_built_without_a_binder_refuses_to_bind_with_a_reason():
    from corral.scheduler.cache.cache import Cache
    from corral.scheduler.framework.interface import CycleState
    from corral.scheduler.profiles import build_frameworks, parse_config

    fwk = build_frameworks(parse_config({}), cache=Cache(), clock=FakeClock())["default-scheduler"]
    status = await fwk.binders[0].bind(CycleState(), PodInfo.from_object(make_pod("p").obj), "n1")
    assert status == Status.error("no binder configured", "DefaultBinder")


async def test_a_server_that_lost_the_leader_lease_binds_nothing(server):
    async with server.client() as c:
        info = await created_info(c, "p")
        status = await InProcessWriter(server.api, Fence()).bind(info, "n1")
        assert status == Status.error("not bound: this server is no longer the leader "
                                      "(this server does not hold the leader Lease)", "DefaultBinder")
        fence = Fence()
        fence.grant("/coordination.k8s.io/leases/kube-system/none", 1)  # a Lease that is not in the store
        status = await InProcessWriter(server.api, fence).bind(info, "n1")
        assert status.code is Code.ERROR and status.plugin == "DefaultBinder"
        assert status.message().startswith("not bound: this server is no longer the leader")
        assert "nodeName" not in (await c.get("pods", "p", "default", raw=True))["spec"]
        lease = await c.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                "metadata": {"name": "corral-leader", "namespace": "kube-system"},
                                "spec": {"holderIdentity": "this-server"}}, raw=True)
        fence.grant("/coordination.k8s.io/leases/kube-system/corral-leader", int(lease["metadata"]["resourceVersion"]))
        assert await InProcessWriter(server.api, fence).bind(info, "n1") == SUCCESS  # holding it: bound
        assert (await c.get("pods", "p", "default", raw=True))["spec"]["nodeName"] == "n1"


async def test_bindings_written_together_each_answer_as_one_binding_would(server, monkeypatch):
    """The scheduler process's bindings go to the store together (bind_many): each is bound, or
    unresolvable when bound elsewhere or gone, and one whose cached copy was stale is done again
    from a fresh read instead of failing."""
    async with server.client() as c:
        fine, elsewhere, stale = [await created_info(c, name) for name in ("fine", "elsewhere", "stale")]
        writer = InProcessWriter(server.api)
        assert await writer.bind(elsewhere, "n9") == SUCCESS
        for _ in range(100):  # the cache has the binding above
            if (server.cache.get("/core/pods/default/elsewhere").obj["spec"].get("nodeName")):
                break
            await asyncio.sleep(0.01)
        cached = server.cache.get("/core/pods/default/stale")
        labelled = await c.patch("pods", "stale", {"metadata": {"labels": {"moved": "yes"}}}, "default", raw=True)
        real_get, stale_reads = server.cache.get, [cached]  # the cache's copy, from before the patch: once

        def get(key):
            return stale_reads.pop() if key == cached.key and stale_reads else real_get(key)
        monkeypatch.setattr(server.cache, "get", get)
        gone = PodInfo.from_object(pod("gone") | {"metadata": {"name": "gone", "namespace": "default"}})
        statuses = await writer.bind_many([(fine, "n1"), (elsewhere, "n2"), (gone, "n3"), (stale, "n4")])
        monkeypatch.undo()
        assert statuses == [SUCCESS, GONE, GONE, SUCCESS]
        got = {p["metadata"]["name"]: p for p in (await c.list("pods", "default", raw=True)).items}
        assert {name: got[name]["spec"].get("nodeName") for name in got} == {"fine": "n1", "elsewhere": "n9", "stale": "n4"}
        assert got["stale"]["metadata"]["labels"] == labelled["metadata"]["labels"]  # the fresh copy was bound
        assert got["fine"]["status"]["phase"] == "Scheduled"
        assert [(x["type"], x["status"]) for x in got["fine"]["status"]["conditions"]] == [("PodScheduled", "True")]


async def test_bindings_written_together_by_a_server_that_lost_the_lease_bind_nothing(server):
    async with server.client() as c:
        infos = [await created_info(c, name) for name in ("a", "b")]
        fence = Fence()
        fence.grant("/coordination.k8s.io/leases/kube-system/none", 1)  # a Lease that is not in the store
        statuses = await InProcessWriter(server.api, fence).bind_many([(info, "n1") for info in infos])
        assert [s.code for s in statuses] == [Code.ERROR] * 2
        assert all(s.message().startswith("not bound: this server is no longer the leader") for s in statuses)
        assert [p["spec"].get("nodeName") for p in (await c.list("pods", "default", raw=True)).items] == [None, None]
        statuses = await InProcessWriter(server.api, Fence()).bind_many([(infos[0], "n1")])  # no Lease held at all
        assert statuses == [Status.error("not bound: this server is no longer the leader "
                                         "(this server does not hold the leader Lease)", "DefaultBinder")]


async def test_a_binding_the_store_or_the_api_refuses_otherwise_is_an_error_worth_a_retry(server, monkeypatch):
    from corral.server.errors import ApiError
    from corral.store import StoreError

    async with server.client() as c:
        info = await created_info(c, "p")
    writer = InProcessWriter(server.api)
    for raised, message in ((ApiError(500, "InternalError", "the store is unwell"), "the store is unwell"),
                            (StoreError("database is locked"), "database is locked")):
        async def refuse(*args, _raised=raised, **kwargs):
            raise _raised

        monkeypatch.setattr(server.api, "assign_node", refuse)
        assert await writer.bind(info, "n1") == Status.error(message, "DefaultBinder")


async def test_a_binding_through_a_server_that_cannot_be_reached_is_an_error_worth_a_retry(unused_tcp_port):
    async with Client(f"http://127.0.0.1:{unused_tcp_port}", timeout=2) as c:
        status = await HttpWriter(c).bind(PodInfo.from_object(make_pod("p").obj), "n1")
    assert status.code is Code.ERROR and status.plugin == "DefaultBinder"
    assert str(unused_tcp_port) in status.message()


# --- the event recorder -------------------------------------------------------------------------------

async def test_a_repeated_event_raises_the_count_and_is_written_at_most_once_per_interval():
    clock = FakeClock()
    w = RecordingWriter()
    rec = EventRecorder(w, clock=clock, component="sched", host="box")  # by default, once per 5 minutes
    rec.start()
    try:
        p = PodInfo.from_object(make_pod("p").obj)
        for _ in range(3):
            rec.record(p, "Warning", "FailedScheduling", "0/1 nodes")
        await rec.drain()
        (event,) = w.event_objects
        assert event["source"] == {"component": "sched", "host": "box"} and event["reportingComponent"] == "sched"
        assert (event["type"], event["count"]) == ("Warning", 1)
        assert w.event_patches == []  # repeats within the interval only counted
        clock.advance(299.0)
        rec.record(p, "Warning", "FailedScheduling", "0/1 nodes")
        await rec.drain()
        assert w.event_patches == []
        clock.advance(1.0)
        rec.record(p, "Warning", "FailedScheduling", "0/1 nodes")
        await rec.drain()
        ((ns, name, patch),) = w.event_patches
        assert (ns, name, patch["count"]) == ("default", event["metadata"]["name"], 5)
        assert patch["lastTimestamp"].endswith("Z")
        clock.advance(299.0)  # the interval counts from the last write
        rec.record(p, "Warning", "FailedScheduling", "0/1 nodes")
        await rec.drain()
        assert len(w.event_patches) == 1
        clock.advance(1.0)  # and the next interval from that write
        rec.record(p, "Warning", "FailedScheduling", "0/1 nodes")
        await rec.drain()
        assert [patch["count"] for _, _, patch in w.event_patches] == [5, 7]
        # Another message, another reason or another pod (uid) is another event.
        rec.record(p, "Warning", "FailedScheduling", "0/2 nodes")
        rec.record(p, "Normal", "Scheduled", "0/1 nodes")
        rec.record(PodInfo.from_object(make_pod("q").obj), "Warning", "FailedScheduling", "0/1 nodes")
        await rec.drain()
        assert len({e["metadata"]["name"] for e in w.event_objects}) == 4
        assert [e["involvedObject"]["name"] for e in w.event_objects] == ["p", "p", "p", "q"]
    finally:
        await rec.stop()


async def test_events_past_the_queue_limit_are_dropped_and_counted_and_a_failed_write_is_not_fatal(caplog):
    w = RecordingWriter()

    async def refuse(namespace, event):
        raise RuntimeError("store unavailable")

    w.create_event = refuse
    rec = EventRecorder(w, max_pending=2)
    p = PodInfo.from_object(make_pod("p").obj)
    for i in range(5):
        rec.record(p, "Normal", "Scheduled", f"m{i}")
    assert rec.dropped == 3
    (warning,) = caplog.messages
    assert warning.startswith("2 events wait to be written") and "(1 dropped so far;" in warning
    caplog.clear()
    rec.start()
    with caplog.at_level(logging.DEBUG, logger="corral.scheduler.cluster"):
        await rec.drain()
    await rec.stop()
    assert len(caplog.messages) == 2 and all("store unavailable" in m for m in caplog.messages)
    assert caplog.messages[0].startswith("event default/p.") and " not written: " in caplog.messages[0]


async def test_an_event_whose_first_write_failed_is_created_by_the_next_and_in_its_pods_namespace():
    w = RecordingWriter()
    created = w.create_event
    namespaces: list[str] = []

    async def once_refused(namespace, event):
        namespaces.append(namespace)
        if len(namespaces) == 1:
            raise RuntimeError("store unavailable")
        await created(namespace, event)

    w.create_event = once_refused
    rec = EventRecorder(w)
    rec.start()
    try:
        p = PodInfo.from_object(make_pod("p", "team").obj)
        for _ in range(2):
            rec.record(p, "Warning", "FailedScheduling", "0/1 nodes")
            await rec.drain()
    finally:
        await rec.stop()
    assert namespaces == ["team", "team"] and w.event_patches == []
    (event,) = w.event_objects
    assert event["metadata"]["namespace"] == "team" and event["count"] == 1


async def test_the_recorder_forgets_the_events_least_recently_seen_first():
    w = RecordingWriter()
    rec = EventRecorder(w, remember=2)
    rec.start()
    try:
        p, q, r = (PodInfo.from_object(make_pod(n).obj) for n in "pqr")
        for pod in (p, q, p, r, p):  # r makes three: q, seen longest ago, is forgotten, not p
            rec.record(pod, "Warning", "FailedScheduling", "0/1 nodes")
            await rec.drain()
    finally:
        await rec.stop()
    assert [e["involvedObject"]["name"] for e in w.event_objects] == ["p", "q", "r"]


async def test_an_event_forgotten_and_seen_again_counts_on_from_the_stored_one(server):
    clock = FakeClock()
    rec = EventRecorder(InProcessWriter(server.api), clock=clock, remember=2)
    rec.start()
    try:
        pending, *others = (PodInfo.from_object(make_pod(n).obj) for n in ("pending", "a", "b"))
        rec.record(pending, "Warning", "FailedScheduling", "0/1 nodes")
        for other in others:  # a burst of other events: the pending pod's is forgotten
            rec.record(other, "Normal", "Scheduled", "assigned")
        await rec.drain()
        clock.advance(60.0)
        rec.record(pending, "Warning", "FailedScheduling", "0/1 nodes")  # created again: added to the stored one
        await rec.drain()
        clock.advance(300.0)
        rec.record(pending, "Warning", "FailedScheduling", "0/1 nodes")  # remembered again: a patch, counting on
        await rec.drain()
    finally:
        await rec.stop()
    await server.api.cache.wait_consistent()
    (event,) = [r.obj for r in server.api.cache.items(by_kind("Event").store_prefix)
                if r.obj["involvedObject"]["name"] == "pending"]
    assert event["count"] == 3 and event["reason"] == "FailedScheduling"


async def test_events_are_written_several_at_once_and_a_repeat_meanwhile_only_counts():
    w = RecordingWriter()
    release = asyncio.Event()
    started: list[str] = []

    async def slow(namespace, event):  # a store write still on its way
        started.append(event["message"])
        await release.wait()
        w.event_objects.append(event)

    w.create_event = slow
    rec = EventRecorder(w, writers=4)
    rec.start()
    try:
        p = PodInfo.from_object(make_pod("p").obj)
        for message in ("a", "b", "c", "a"):
            rec.record(p, "Normal", "Scheduled", message)
        for _ in range(5):
            await asyncio.sleep(0)
        assert started == ["a", "b", "c"]  # three on their way together; the repeat of "a" only counted
        release.set()
        await rec.drain()
        assert sorted(e["message"] for e in w.event_objects) == ["a", "b", "c"]
        assert all(e["count"] == 1 for e in w.event_objects) and w.event_patches == []
    finally:
        await rec.stop()


async def test_by_default_a_burst_of_a_hundred_thousand_events_waits_and_sixteen_are_written_at_once(caplog):
    # SchedulingBasic/50000Nodes_50000Pods binds 51,000 pods faster than their events are written:
    # every one of them waits for its turn, none is lost.
    clock = FakeClock()
    w = RecordingWriter()
    release = asyncio.Event()
    started: list[str] = []

    async def slow(namespace, event):
        started.append(event["message"])
        await release.wait()

    w.create_event = slow
    rec = EventRecorder(w, clock=clock)
    p = PodInfo.from_object(make_pod("p").obj)
    with caplog.at_level(logging.WARNING, logger="corral.scheduler.cluster"):
        for i in range(100_000):
            rec.record(p, "Normal", "Scheduled", f"m{i}")
        assert (rec.waiting, rec.dropped, caplog.messages) == (100_000, 0, [])
        rec.record(p, "Normal", "Scheduled", "one too many")
        rec.record(p, "Normal", "Scheduled", "another")
        assert (rec.waiting, rec.dropped) == (100_000, 2)
        (warning,) = caplog.messages  # once, not once per dropped event
        assert warning.startswith("100000 events wait to be written, as many as are kept") and "(1 dropped so far;" in warning
        clock.advance(59.0)
        rec.record(p, "Normal", "Scheduled", "still full")
        assert len(caplog.messages) == 1
        clock.advance(1.0)  # a minute after the last warning, the next drop warns again
        rec.record(p, "Normal", "Scheduled", "a minute on")
        assert len(caplog.messages) == 2 and "(4 dropped so far;" in caplog.messages[1]
    rec.start()
    try:
        for _ in range(5):
            await asyncio.sleep(0)
        assert started == [f"m{i}" for i in range(16)]  # sixteen on their way, the rest waiting
        assert rec.waiting == 100_000 - 16
        for i in range(17):  # room for the sixteen taken out of the queue, not one more
            rec.record(p, "Normal", "Scheduled", f"late{i}")
        assert rec.dropped == 5
    finally:
        release.set()
        await rec.stop()


# --- sources -----------------------------------------------------------------------------------------

async def seed(c: Client) -> None:
    """What the server holds before a source attaches: a labelled namespace, a node, a pod bound to
    it and a pending one."""
    await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"tier": "a"}}})
    await c.create(node("n1"))
    await c.create(pod("bound") | {"spec": {**pod("bound")["spec"], "nodeName": "n1"}}, raw=True)
    await c.create(pod("waiting"))
    await c.create(pod("member", **{"scheduling.corral.dev/pod-group": "g1"}))  # held until its gang can go
    for name in ("b1", "b2"):
        await c.create(budget(name))
    for name, count in (("g1", 2), ("g2", 3)):
        await c.create(group(name, count))
    for name in ("p1", "p2"):
        await c.create(placement(name))


def budget(name: str) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": name}}}}


def group(name: str, count: int) -> dict:
    return {"apiVersion": "scheduling.corral.dev/v1alpha1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": count}}


def placement(name: str) -> dict:
    return {"apiVersion": "placement.corral.dev/v1", "kind": "Placement", "metadata": {"name": name},
            "spec": {"policy": {"placementType": "PickAll"},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}}


def by_key(scheduler) -> tuple:
    """What the scheduler holds of each kind beside nodes and pods, by key."""
    gangs = {k: g.min_member for k, g in scheduler.cache.gangs.gangs.items() if g.min_member}
    return set(scheduler.cache.budgets), gangs, set(scheduler.placements.objects)


SEEDED = ({"default/b1", "default/b2"}, {"default/g1": 2, "default/g2": 3}, {"default/p1", "default/p2"})
CHANGED = ({"default/b2", "default/b3"}, {"default/g1": 5, "default/g3": 1},
           {"default/p2", "default/p3"})


async def change_the_rest(c: Client) -> None:
    """Budgets, PodGroups and Placements deleted, added and changed."""
    await c.delete("poddisruptionbudgets", "b1", "default")
    await c.create(budget("b3"))
    await c.patch("podgroups", "g1", {"spec": {"minMember": 5}}, "default")
    await c.create(group("g3", 1))
    await c.delete("podgroups", "g2", "default")
    await c.delete("placements", "p1", "default")
    await c.create(placement("p3"))


async def change(c: Client) -> None:
    """Then: a node and a pod added, the bound pod and its node deleted, the namespace relabelled."""
    await c.create(node("n2"))
    await c.create(pod("later"))
    await c.delete("pods", "bound", "default", grace_period_seconds=0)
    await c.delete("nodes", "n1")
    await c.patch("namespaces", "team", {"metadata": {"labels": {"tier": "b"}}})

async def test_the_in_process_source_loads_what_the_server_has_then_follows_it_until_detached(server):
    async with server.client() as c:
        await seed(c)
        h = Harness()
        detach = attach_in_process(h.scheduler, server.cache)
        cache = h.scheduler.cache
        assert set(cache.table.row_of) == {"n1"} and cache.table.node_count == 1  # a node, not a pod's placeholder
        assert set(cache.pods) == {"default/bound"}
        assert cache.gangs.member_of == {"default/member": "default/g1"} and "default/member" not in h.scheduler.queue
        assert "default/waiting" in h.scheduler.queue
        assert cache.namespace_labels["team"] == {"tier": "a"}
        assert by_key(h.scheduler) == SEEDED

        await change(c)
        await change_the_rest(c)
        await asyncio.sleep(0)
        assert by_key(h.scheduler) == CHANGED
        assert set(cache.table.row_of) == {"n2"}
        assert "default/bound" not in cache.pods and "default/later" in h.scheduler.queue
        assert cache.namespace_labels["team"] == {"tier": "b"}
        await c.delete("namespaces", "team")
        assert "team" not in cache.namespace_labels

        detach()
        await c.create(node("n3"))
        await c.create(pod("unseen"))
        assert "n3" not in cache.table.row_of and "default/unseen" not in h.scheduler.queue


async def test_a_node_change_placement_ignores_tries_no_unschedulable_pod_again_after_an_in_process_attach(server):
    """The nodes the attach found are known by name: an update to one that changes nothing the
    scheduler reads (an annotation, a heartbeat) wakes none of the pods that fit nowhere."""
    async with server.client() as c:
        await c.create(node("n1"))
        h = Harness()
        detach = attach_in_process(h.scheduler, server.cache)
        try:
            h.add_pod(make_pod("huge").requests(cpu="100"))
            await h.run()
            assert h.scheduler.queue.counts() == {"active": 0, "backoff": 0, "unschedulable": 1}
            await c.patch("nodes", "n1", {"metadata": {"annotations": {"note": "seen"}}})
            await asyncio.sleep(0)
            assert h.scheduler.queue.counts() == {"active": 0, "backoff": 0, "unschedulable": 1}
        finally:
            detach()


async def test_the_informer_source_lists_then_watches_every_kind_the_scheduler_reads(server):
    async with server.client() as c:
        await seed(c)
        h = Harness()
        source = InformerSource(h.scheduler, c)
        await source.start()
        try:
            cache = h.scheduler.cache
            assert set(cache.table.row_of) == {"n1"} and set(cache.pods) == {"default/bound"}
            assert cache.table.node_count == 1 and cache.gangs.member_of == {"default/member": "default/g1"}
            assert "default/waiting" in h.scheduler.queue and cache.namespace_labels["team"] == {"tier": "a"}
            assert by_key(h.scheduler) == SEEDED

            await change(c)
            await change_the_rest(c)

            async def caught_up() -> bool:
                return (set(cache.table.row_of) == {"n2"} and "default/bound" not in cache.pods
                        and by_key(h.scheduler) == CHANGED and "default/later" in h.scheduler.queue
                        and cache.namespace_labels.get("team") == {"tier": "b"})

            async with asyncio.timeout(10):
                while not await caught_up():
                    await asyncio.sleep(0.02)
            await c.delete("namespaces", "team")
            async with asyncio.timeout(10):
                while "team" in cache.namespace_labels:
                    await asyncio.sleep(0.02)
        finally:
            await source.stop()
