"""The node lifecycle controller's timing, driven by a fake clock: NotReady after the grace period,
pods moved only after the eviction timeout, the taint lifted when the node heartbeats again."""

from __future__ import annotations

import asyncio

import pytest

from corral.api.defaults import rfc3339
from corral.api.resources import by_kind
from corral.controllers.nodes.node_lifecycle import UNREACHABLE_TAINT, EvictionLimits, NodeLifecycleController
from corral.server.rest import WriteOptions
from corral.testing.builders import make_node, make_pod
from corral.testing.clock import FakeClock
from corral.testing.waiting import until

GRACE, EVICTION = 40.0, 300.0
ALWAYS = 10 * 365 * 86400.0  # a heartbeat this far ahead of the fake clock: Ready in every test
NODES, PODS, LEASES = by_kind("Node"), by_kind("Pod"), by_kind("Lease")
OPTS = WriteOptions(warn=False)


@pytest.fixture
async def cluster(server):
    """One node whose lease was renewed at the fake clock's start, with one pod running on it, and a
    second node that beats throughout (with every node NotReady, nothing is evicted)."""
    clock = FakeClock(1_800_000_000.0)
    api = server.api
    await api.create(NODES, None, make_node("n1").heartbeat_at(rfc3339(clock())).obj, OPTS)
    await api.create(NODES, None, make_node("steady").heartbeat_at(rfc3339(clock() + ALWAYS)).obj, OPTS)
    await api.create(LEASES, "kube-node-lease", lease(clock()), OPTS)
    pod = make_pod("web").node("n1").obj
    pod["metadata"].pop("uid")
    await api.create(PODS, "default", pod, OPTS)
    controller = NodeLifecycleController(api, grace_seconds=GRACE, eviction_seconds=EVICTION, clock=clock)
    return api, clock, controller


def lease(renewed: float) -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "n1", "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": rfc3339(renewed)}}


async def state(api) -> tuple[bool, str | None, str]:
    """(node tainted unreachable, the pod's node, the pod's phase)."""
    node = (await api.current(NODES, None, "n1", consistent=True)).obj
    pod = (await api.current(PODS, "default", "web", consistent=True)).obj
    tainted = any(t["key"] == UNREACHABLE_TAINT for t in node["spec"].get("taints") or ())
    return tainted, pod["spec"].get("nodeName"), pod["status"]["phase"]


@pytest.mark.parametrize("silent_for, expected", [
    pytest.param(GRACE - 1, (False, "n1", "Running"), id="a heartbeat within the grace period changes nothing"),
    pytest.param(GRACE + 1, (True, "n1", "Running"),
                 id="past the grace period the node is tainted unreachable and its pods stay"),
])
async def test_a_silent_node_becomes_not_ready_only_after_the_grace_period(cluster, silent_for, expected):
    api, clock, controller = cluster
    clock.advance(silent_for)
    await controller.reconcile()
    assert await state(api) == expected


async def test_pods_move_only_after_the_eviction_timeout_counted_from_the_taint(cluster):
    api, clock, controller = cluster
    clock.advance(GRACE + 1)
    await controller.reconcile()
    pod = (await api.current(PODS, "default", "web", consistent=True)).obj
    assert any(c["type"] == "NotReadyAt" for c in pod["status"]["conditions"])
    clock.advance(EVICTION - 1)
    await controller.reconcile()
    assert await state(api) == (True, "n1", "Running")  # 299 s after the taint: still there
    clock.advance(2)
    await controller.reconcile()
    assert await state(api) == (True, None, "Pending")  # 301 s: back to Pending, to be placed again


async def test_the_unreachable_taint_is_lifted_when_the_node_heartbeats_again(cluster):
    api, clock, controller = cluster
    clock.advance(GRACE + 1)
    await controller.reconcile()
    assert (await state(api))[0]
    clock.advance(10)
    await api.patch(LEASES, "kube-node-lease", "n1", {"spec": {"renewTime": rfc3339(clock())}}, "merge", OPTS)
    await controller.reconcile()
    assert await state(api) == (False, "n1", "Running")


# --- what the controller writes, exactly ----------------------------------------------------------------

async def events_of(api) -> list[dict]:
    events = [r.obj for r in api.cache.items(by_kind("Event").store_prefix)]
    return sorted(events, key=lambda e: e["metadata"]["creationTimestamp"] + e["reason"])


async def test_marking_a_node_not_ready_writes_the_taint_condition_pod_condition_and_event_kubernetes_style(cluster):
    api, clock, controller = cluster
    taint = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}
    await api.patch(NODES, None, "n1", {"spec": {"taints": [taint]}}, "merge", OPTS)
    beat = (await api.current(NODES, None, "n1", consistent=True)).obj["status"]["conditions"][0]["lastHeartbeatTime"]
    clock.advance(GRACE + 5)
    await controller.reconcile()
    now = rfc3339(clock())
    node = (await api.current(NODES, None, "n1", consistent=True)).obj
    assert node["spec"]["taints"] == [taint, {"key": UNREACHABLE_TAINT, "effect": "NoExecute", "timeAdded": now}]
    message = "the agent stopped renewing its lease 45s ago"
    assert node["status"]["conditions"] == [{
        "type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": message,
        "lastHeartbeatTime": beat, "lastTransitionTime": now}]
    pod = (await api.current(PODS, "default", "web", consistent=True)).obj
    assert [c for c in pod["status"].get("conditions", []) if c["type"] == "NotReadyAt"] == [{
        "type": "NotReadyAt", "status": "True", "reason": "NodeNotReady",
        "message": f"node n1 is not ready: {message}", "lastTransitionTime": now}]
    (event,) = await events_of(api)
    assert event["metadata"]["name"].startswith("web.") and event["metadata"]["namespace"] == "default"
    assert {k: event[k] for k in ("involvedObject", "reason", "message", "type", "count", "firstTimestamp",
                                  "lastTimestamp", "source")} == {
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default", "uid": pod["metadata"]["uid"]},
        "reason": "NodeNotReady", "message": f"Node n1 is not ready: {message}", "type": "Warning", "count": 1,
        "firstTimestamp": now, "lastTimestamp": now, "source": {"component": "node-lifecycle-controller"}}
    # A second round changes nothing: the taint is there, the timeout has not run out.
    clock.advance(1)
    await controller.reconcile()
    assert (await api.current(NODES, None, "n1", consistent=True)).obj["spec"]["taints"] == node["spec"]["taints"]
    assert len(await events_of(api)) == 1
    # Heartbeating again lifts only the unreachable taint.
    await api.patch(LEASES, "kube-node-lease", "n1", {"spec": {"renewTime": rfc3339(clock())}}, "merge", OPTS)
    await controller.reconcile()
    assert (await api.current(NODES, None, "n1", consistent=True)).obj["spec"]["taints"] == [taint]


async def test_eviction_returns_pods_to_pending_with_an_event_and_finishes_pods_being_deleted(cluster):
    api, clock, controller = cluster
    doomed = make_pod("doomed").node("n1").obj
    doomed["metadata"].pop("uid")
    await api.create(PODS, "default", doomed, OPTS)
    await api.delete(PODS, "default", "doomed", 30, None, None)  # graceful: waits for an agent that is gone
    assert (await api.current(PODS, "default", "doomed", consistent=True)).obj["metadata"]["deletionTimestamp"]
    clock.advance(GRACE + 1)
    await controller.reconcile()
    clock.advance(EVICTION + 1)
    await controller.reconcile()
    assert await state(api) == (True, None, "Pending")
    with pytest.raises(Exception):
        await api.current(PODS, "default", "doomed", consistent=True)
    lost = [e for e in await events_of(api) if e["reason"] == "NodeLost"]
    assert [(e["involvedObject"]["name"], e["message"], e["type"]) for e in lost] == [
        ("web", "Evicted: node n1 was unreachable for more than 300s; returned to Pending to be placed again",
         "Warning")]
    pod = (await api.current(PODS, "default", "web", consistent=True)).obj
    assert pod["status"]["reason"] == "NodeLost"
    assert pod["status"]["message"] == "node n1 was unreachable for more than 300s (was on node n1)"


async def test_a_finished_pod_on_a_lost_node_stays_as_it_ended(cluster):
    """restartPolicy Never and Succeeded: placed again, it would run its work a second time."""
    api, clock, controller = cluster
    done = make_pod("done").node("n1").obj
    done["metadata"].pop("uid")
    done["spec"]["restartPolicy"] = "Never"
    await api.create(PODS, "default", done, OPTS)
    await api.patch(PODS, "default", "done", {"status": {"phase": "Succeeded"}}, "merge", OPTS, "status")
    broke = {**done, "metadata": {**done["metadata"], "name": "broke"}}
    await api.create(PODS, "default", broke, OPTS)
    await api.patch(PODS, "default", "broke", {"status": {"phase": "Failed"}}, "merge", OPTS, "status")
    await api.create(PODS, "default", {**done, "metadata": {**done["metadata"], "name": "late"}}, OPTS)  # runs
    clock.advance(GRACE + 1)
    await controller.reconcile()
    clock.advance(EVICTION + 1)
    await controller.reconcile()
    pod = (await api.current(PODS, "default", "done", consistent=True)).obj
    assert (pod["spec"]["nodeName"], pod["status"]["phase"]) == ("n1", "Succeeded")
    pod = (await api.current(PODS, "default", "broke", consistent=True)).obj
    assert (pod["spec"]["nodeName"], pod["status"]["phase"]) == ("n1", "Failed")
    # the pods after them on the node are moved all the same
    assert sorted(e["involvedObject"]["name"] for e in await events_of(api) if e["reason"] == "NodeLost") == [
        "late", "web"]


@pytest.mark.parametrize("lease_renewed, ready_beat, created, silent", [
    pytest.param(None, 0, 0, False, id="without a Lease the Ready condition's heartbeat counts"),
    pytest.param(None, None, 0, False, id="without either the node's creation counts"),
    pytest.param(None, -100, 0, True, id="an old Ready heartbeat without a Lease is silence"),
    pytest.param(-100, 0, 0, False, id="a Lease without a renewTime defers to the Ready heartbeat"),
])
async def test_where_the_heartbeat_comes_from(server, lease_renewed, ready_beat, created, silent):
    clock = FakeClock(1_800_000_000.0)
    api = server.api
    node = make_node("solo").obj
    if ready_beat is None:
        node["status"]["conditions"] = []
    else:
        node["status"]["conditions"][0]["lastHeartbeatTime"] = rfc3339(clock() + ready_beat)
    await api.create(NODES, None, node, OPTS)
    if lease_renewed is not None:
        lease_obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": "solo", "namespace": "kube-node-lease"}, "spec": {"holderIdentity": "solo"}}
        await api.create(LEASES, "kube-node-lease", lease_obj, OPTS)
    created_at = (await api.current(NODES, None, "solo", consistent=True)).obj["metadata"]["creationTimestamp"]
    from corral.scheduler.cache.node_table import parse_timestamp

    at = parse_timestamp(created_at) if ready_beat is None else clock()
    clock = FakeClock(at - 1000)  # a controller running long before: judged by the heartbeat alone
    controller = NodeLifecycleController(api, grace_seconds=GRACE, eviction_seconds=EVICTION, clock=clock)
    clock.advance(1000 + GRACE - 1)
    await controller.reconcile()
    node = (await api.current(NODES, None, "solo", consistent=True)).obj
    tainted = any(t["key"] == UNREACHABLE_TAINT for t in node["spec"].get("taints") or ())
    assert tainted is silent


async def test_the_loop_runs_rounds_at_its_interval_and_survives_a_failing_round(server, caplog):
    import logging

    rounds = []

    async def flaky():
        rounds.append(1)
        if len(rounds) == 1:
            raise RuntimeError("store hiccup")

    controller = NodeLifecycleController(server.api, interval=0.01)
    controller.reconcile = flaky
    with caplog.at_level(logging.ERROR, logger="corral.controllers.nodes.node_lifecycle"):
        controller.start()
        try:
            async with asyncio.timeout(10):
                while len(rounds) < 3:
                    await asyncio.sleep(0.01)
        finally:
            await controller.stop()
    failed = [r for r in caplog.records if r.getMessage() == "node lifecycle round failed"]
    assert [(r.name, r.exc_info[1].args) for r in failed] == [("corral.controllers.nodes.node_lifecycle", ("store hiccup",))]
    assert controller._task.done() and controller._task.get_name() == "node-lifecycle"


@pytest.mark.parametrize("silent_for, tainted", [
    pytest.param(40.0, False, id="silent exactly the 40 s grace period: still Ready"),
    pytest.param(40.001, True, id="a millisecond more: NotReady"),
])
async def test_kubernetes_default_grace_period_and_its_boundary(cluster, silent_for, tainted):
    api, clock, _ = cluster
    controller = NodeLifecycleController(api, clock=clock)  # the defaults, as kube-controller-manager's
    assert controller.interval == 2.0
    clock.advance(silent_for)
    await controller.reconcile()
    assert (await state(api))[0] is tainted


@pytest.mark.parametrize("after_taint, evicted", [
    pytest.param(300.0, False, id="tainted exactly the 300 s eviction timeout: the pod stays"),
    pytest.param(300.001, True, id="a millisecond more: evicted"),
])
async def test_kubernetes_default_eviction_timeout_and_its_boundary(cluster, after_taint, evicted):
    api, clock, _ = cluster
    controller = NodeLifecycleController(api, clock=clock)
    clock.advance(41)
    await controller.reconcile()
    clock.advance(after_taint)
    await controller.reconcile()
    assert await state(api) == ((True, None, "Pending") if evicted else (True, "n1", "Running"))


async def test_not_ready_keeps_the_other_conditions_and_replaces_a_stale_pod_condition(cluster):
    api, clock, controller = cluster
    pressure = {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"}
    node = (await api.current(NODES, None, "n1", consistent=True)).obj
    await api.patch(NODES, None, "n1", {"status": {"conditions": [pressure, *node["status"]["conditions"]]}},
                    "merge", OPTS, "status")
    scheduled = {"type": "PodScheduled", "status": "True"}
    stale = {"type": "NotReadyAt", "status": "True", "reason": "NodeNotReady", "message": "an earlier outage"}
    await api.patch(PODS, "default", "web", {"status": {"conditions": [scheduled, stale]}}, "merge", OPTS, "status")
    clock.advance(GRACE + 1)
    await controller.reconcile()
    node = (await api.current(NODES, None, "n1", consistent=True)).obj
    assert [c["type"] for c in node["status"]["conditions"]] == ["MemoryPressure", "Ready"]
    assert node["status"]["conditions"][0] == pressure
    pod = (await api.current(PODS, "default", "web", consistent=True)).obj
    assert [c["type"] for c in pod["status"]["conditions"]] == ["PodScheduled", "NotReadyAt"]
    assert pod["status"]["conditions"][1]["message"] != stale["message"]


async def test_a_node_that_never_reported_a_heartbeat_gets_no_invented_one(server):
    clock = FakeClock(1_800_000_000.0)
    node = make_node("mute").obj
    node["status"]["conditions"] = []
    await server.api.create(NODES, None, node, OPTS)
    created = (await server.api.current(NODES, None, "mute", consistent=True)).obj["metadata"]["creationTimestamp"]
    from corral.scheduler.cache.node_table import parse_timestamp

    clock = FakeClock(parse_timestamp(created) - 1000)
    controller = NodeLifecycleController(server.api, clock=clock)
    clock.advance(1000 + GRACE + 1)
    await controller.reconcile()
    (ready,) = (await server.api.current(NODES, None, "mute", consistent=True)).obj["status"]["conditions"]
    assert ready["status"] == "Unknown" and "lastHeartbeatTime" not in ready


async def test_eviction_goes_on_past_a_pod_that_was_being_deleted(cluster):
    api, clock, controller = cluster
    for name in ("doomed", "later"):
        pod = make_pod(name).node("n1").obj
        pod["metadata"].pop("uid")
        await api.create(PODS, "default", pod, OPTS)
    await api.delete(PODS, "default", "doomed", 30, None, None)
    clock.advance(GRACE + 1)
    await controller.reconcile()
    clock.advance(EVICTION + 1)
    await controller.reconcile()
    later = (await api.current(PODS, "default", "later", consistent=True)).obj
    assert (later["spec"].get("nodeName"), later["status"]["phase"]) == (None, "Pending")
    events = [e for e in await events_of(api) if e["reason"] == "NodeLost"]
    assert sorted(e["involvedObject"]["name"] for e in events) == ["later", "web"]
    assert all((e["apiVersion"], e["kind"]) == ("v1", "Event") for e in events)


async def test_a_controller_never_started_stops_cleanly(server):
    await NodeLifecycleController(server.api).stop()


async def test_after_a_restart_past_the_grace_period_nodes_get_a_full_grace_period_to_beat_again(server):
    """The server was down for ten minutes: every lease is ten minutes old when it comes back. Its
    controller judges from its own start (as kube-controller-manager does from when it first sees a
    node), so the agents have a grace period to reach it; one that does not is then NotReady."""
    from corral.api.defaults import now_micro_rfc3339

    clock = FakeClock(1_800_000_000.0)
    for name in ("back", "gone"):
        await server.api.create(NODES, None, make_node(name).obj, OPTS)
        await server.api.create(LEASES, "kube-node-lease", {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": name, "renewTime": now_micro_rfc3339(clock() - 600)}}, OPTS)
    controller = NodeLifecycleController(server.api, grace_seconds=GRACE, eviction_seconds=EVICTION, clock=clock)

    async def tainted() -> set[str]:
        await controller.reconcile()
        nodes = [r.obj for r in server.api.cache.items(NODES.store_prefix)]
        return {n["metadata"]["name"] for n in nodes
                if any(t["key"] == UNREACHABLE_TAINT for t in n["spec"].get("taints") or ())}

    assert await tainted() == set()  # just started: no node judged on its old lease
    clock.advance(GRACE - 1)
    await server.api.patch(LEASES, "kube-node-lease", "back", {"spec": {"renewTime": now_micro_rfc3339(clock())}},
                           "merge", OPTS)  # its agent reached the server again
    assert await tainted() == set()
    clock.advance(2)
    assert await tainted() == {"gone"}  # a full grace period from the start, and no heartbeat


async def test_a_lost_nodes_pod_that_a_controller_owns_is_deleted_and_its_controller_replaces_it(cluster):
    api, clock, controller = cluster
    owned = make_pod("web-x1").node("n1").obj
    owned["metadata"].pop("uid")
    owned["metadata"]["labels"] = {"app": "replicated"}
    await api.create(PODS, "default", owned, OPTS)
    await api.create(by_kind("ReplicaSet"), "default", {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "replicated"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "replicated"}},
                 "template": {"metadata": {"labels": {"app": "replicated"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}, OPTS)

    async def pods_of_the_replica_set() -> list[dict]:
        await api.cache.wait_consistent()
        return [r.obj for r in api.cache.items(PODS.store_prefix)
                if (r.obj["metadata"].get("ownerReferences") or [{}])[0].get("name") == "replicated"]

    await until(lambda: pods_of_the_replica_set(), lambda pods: [p["metadata"]["name"] for p in pods] == ["web-x1"])
    after = make_pod("after").node("n1").obj  # a bare pod met after the owned one
    after["metadata"].pop("uid")
    await api.create(PODS, "default", after, OPTS)
    clock.advance(GRACE + 1)
    await controller.reconcile()
    clock.advance(EVICTION + 1)
    await controller.reconcile()
    with pytest.raises(Exception):
        await api.current(PODS, "default", "web-x1", consistent=True)
    assert not (await api.current(PODS, "default", "after", consistent=True)).obj["spec"].get("nodeName")
    assert await state(api) == (True, None, "Pending")  # the bare pod goes back to Pending, as before
    lost = {e["involvedObject"]["name"]: (e["type"], e["message"]) for e in await events_of(api)
            if e["reason"] == "NodeLost"}
    assert lost["web-x1"] == ("Warning",
                              "Deleted: node n1 was unreachable for more than 300s; its ReplicaSet replicated replaces it")
    await until(lambda: pods_of_the_replica_set(),
                lambda pods: len(pods) == 1 and pods[0]["metadata"]["name"].startswith("replicated-"))



async def test_marking_pods_keeps_the_conditions_an_agent_wrote_after_the_controller_read_them(cluster):
    """A lost update found at 10,000 pods: the agent reported Ready between the controller's read
    and its write, and the whole conditions list written back dropped it: the pod never became
    available again."""
    api, clock, controller = cluster
    stale = (await api.current(PODS, "default", "web", consistent=True)).obj  # read before the agent's report
    current = (await api.current(PODS, "default", "web", consistent=True)).obj
    ready = [{"type": "Ready", "status": "True", "lastTransitionTime": rfc3339(clock())}]
    await api.update(PODS, "default", "web", {**current, "status": {**current["status"], "conditions": ready}}, OPTS,
                     subresource="status")
    controller._pods_on = lambda node: [stale]
    clock.advance(GRACE + 1)
    await controller.reconcile()
    pod = (await api.current(PODS, "default", "web", consistent=True)).obj
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]} == {"Ready": "True", "NotReadyAt": "True"}


async def test_a_pod_tolerating_an_unreachable_node_for_good_stays_on_a_lost_node(cluster):
    """A DaemonSet's pod tolerates node.kubernetes.io/unreachable:NoExecute without a time limit:
    Kubernetes never evicts it; a limited toleration does not save a pod."""
    api, clock, controller = cluster
    for name, toleration in (("daemon", {}), ("limited", {"tolerationSeconds": 60}),
                             ("equal", {"operator": "Equal"})):  # Equal to the taint's empty value
        pod = make_pod(name).node("n1").obj
        pod["metadata"].pop("uid")
        pod["spec"]["tolerations"] = [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                       "effect": "NoExecute", **toleration}]
        await api.create(PODS, "default", pod, OPTS)
    clock.advance(GRACE + 1)
    await controller.reconcile()
    clock.advance(EVICTION + 1)
    await controller.reconcile()
    await api.cache.wait_consistent()
    for name in ("daemon", "equal"):
        daemon = (await api.current(PODS, "default", name, consistent=True)).obj
        assert daemon["spec"]["nodeName"] == "n1" and not daemon["metadata"].get("deletionTimestamp")
    limited = (await api.current(PODS, "default", "limited", consistent=True)).obj
    assert not limited["spec"].get("nodeName")  # evicted: back to Pending


@pytest.mark.parametrize("duration, silent_for, tainted", [
    pytest.param(80, 79, False, id="a lease the server lengthened to 80 s: silent 79 s is still Ready"),
    pytest.param(80, 81, True, id="silent past the lease's 80 s: NotReady"),
    pytest.param(20, 39, False, id="a lease shorter than the grace period: the grace period counts"),
])
async def test_a_lease_lengthened_while_the_cluster_was_larger_is_honoured(cluster, duration, silent_for, tainted):
    api, clock, controller = cluster
    current = (await api.current(LEASES, "kube-node-lease", "n1", consistent=True)).obj
    await api.patch(LEASES, "kube-node-lease", "n1", {"spec": {"leaseDurationSeconds": duration}}, "merge", OPTS)
    assert current["spec"]["renewTime"] == lease(clock())["spec"]["renewTime"]
    clock.advance(silent_for)
    await controller.reconcile()
    assert (await state(api))[0] is tainted


@pytest.mark.parametrize("silent_for, tainted", [
    pytest.param(159, False, id="4 nodes at 0.1 renewals/s: factor 4, a 160 s grace period"),
    pytest.param(161, True, id="silent past the scaled grace period: NotReady"),
])
async def test_the_grace_period_grows_with_the_node_count_past_the_heartbeat_rate(cluster, silent_for, tainted):
    from corral.api.kinds.coordination import HeartbeatScale

    api, clock, _ = cluster
    for name in ("n2", "n3"):
        await api.create(NODES, None, make_node(name).heartbeat_at(rfc3339(clock() + 1000)).obj, OPTS)
    controller = NodeLifecycleController(api, grace_seconds=GRACE, eviction_seconds=EVICTION, clock=clock,
                                         heartbeats=HeartbeatScale(interval=10.0, max_per_second=0.1))
    clock.advance(silent_for)
    await controller.reconcile()
    assert (await state(api))[0] is tainted


async def test_passes_come_less_often_as_the_heartbeats_slow(cluster):
    from corral.api.kinds.coordination import HeartbeatScale

    api, clock, _ = cluster
    controller = NodeLifecycleController(api, clock=clock, heartbeats=HeartbeatScale(interval=10.0, max_per_second=0.1))
    await api.delete(NODES, None, "steady", 0, None, None)
    assert controller.pause() == 2.0  # one node: the 2 s interval
    for name in ("n2", "n3"):
        await api.create(NODES, None, make_node(name).obj, OPTS)
    assert controller.pause() == 6.0  # three nodes, heartbeats three times slower: passes too


async def test_the_loop_waits_the_pause_the_controller_asks_for(server):
    rounds = []

    class Counted(NodeLifecycleController):
        async def reconcile(self):
            rounds.append(1)

        def pause(self):
            return 3600.0

    controller = Counted(server.api, interval=0.01)
    controller.start()
    try:
        await asyncio.sleep(0.3)  # 30 passes at the 0.01 s interval
    finally:
        await controller.stop()
    assert len(rounds) == 1


async def test_a_pass_that_finds_many_nodes_lost_reads_the_pod_list_once(cluster, monkeypatch):
    """Found at 5,000 nodes and 51,000 pods: read once for each lost node, the pod list kept a core
    busy for minutes after a benchmark's nodes fell silent. Each node's pods are still its own."""
    api, clock, controller = cluster
    # Three of five nodes lost: a small zone partially disrupted would evict none, and a zone evicts
    # one node every 10 s by default. Limits that let all three go in one pass:
    controller.limits = EvictionLimits(rate=100.0, unhealthy_threshold=1.0)
    for name in ("n2", "n3", "healthy"):
        await api.create(NODES, None, make_node(name).heartbeat_at(rfc3339(clock())).obj, OPTS)
        for i in range(2):
            pod = make_pod(f"{name}-{i}").node(name).obj
            pod["metadata"].pop("uid")
            await api.create(PODS, "default", pod, OPTS)
    reads = []
    items = api.cache.items
    monkeypatch.setattr(api.cache, "items", lambda prefix, *a: reads.append(prefix) or items(prefix, *a))
    clock.advance(GRACE + 1)
    await api.create(LEASES, "kube-node-lease", {**lease(clock()), "metadata": {"name": "healthy",
                                                                                "namespace": "kube-node-lease"}}, OPTS)
    await controller.reconcile()
    assert reads.count(PODS.store_prefix) == 1
    await api.cache.wait_consistent()
    marked = {r.obj["metadata"]["name"] for r in items(PODS.store_prefix)
              if any(c["type"] == "NotReadyAt" for c in r.obj["status"].get("conditions") or ())}
    assert marked == {"web", "n2-0", "n2-1", "n3-0", "n3-1"}
    notes = {(e["involvedObject"]["name"], e["message"].split(" is not ready")[0]) for e in await events_of(api)}
    assert notes == {("web", "Node n1"), ("n2-0", "Node n2"), ("n2-1", "Node n2"), ("n3-0", "Node n3"),
                     ("n3-1", "Node n3")}
    reads.clear()
    clock.advance(EVICTION + 1)
    await api.patch(LEASES, "kube-node-lease", "healthy", {"spec": {"renewTime": rfc3339(clock())}}, "merge", OPTS)
    await controller.reconcile()
    assert reads.count(PODS.store_prefix) == 1
    await api.cache.wait_consistent()
    assert {r.obj["metadata"]["name"]: r.obj["spec"].get("nodeName") for r in items(PODS.store_prefix)} == {
        "web": None, "n2-0": None, "n2-1": None, "n3-0": None, "n3-1": None, "healthy-0": "healthy",
        "healthy-1": "healthy"}
