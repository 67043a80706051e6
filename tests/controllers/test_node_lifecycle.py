"""The node lifecycle controller's timing, driven by a fake clock: NotReady after the grace period,
pods moved only after the eviction timeout, the taint lifted when the node heartbeats again."""

from __future__ import annotations

import pytest

from corral.api.defaults import rfc3339
from corral.api.resources import by_kind
from corral.controllers.node_lifecycle import UNREACHABLE_TAINT, NodeLifecycleController
from corral.server.rest import WriteOptions
from corral.testing.builders import make_node, make_pod
from corral.testing.clock import FakeClock

GRACE, EVICTION = 40.0, 300.0
NODES, PODS, LEASES = by_kind("Node"), by_kind("Pod"), by_kind("Lease")
OPTS = WriteOptions(warn=False)


@pytest.fixture
async def cluster(server):
    """One node whose lease was renewed at the fake clock's start, with one pod running on it."""
    clock = FakeClock(1_800_000_000.0)
    api = server.api
    await api.create(NODES, None, make_node("n1").heartbeat_at(rfc3339(clock())).obj, OPTS)
    await api.create(LEASES, "corral-node-lease", lease(clock()), OPTS)
    pod = make_pod("web").node("n1").obj
    pod["metadata"].pop("uid")
    await api.create(PODS, "default", pod, OPTS)
    controller = NodeLifecycleController(api, grace_seconds=GRACE, eviction_seconds=EVICTION, clock=clock)
    return api, clock, controller


def lease(renewed: float) -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "n1", "namespace": "corral-node-lease"},
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
    await api.patch(LEASES, "corral-node-lease", "n1", {"spec": {"renewTime": rfc3339(clock())}}, "merge", OPTS)
    await controller.reconcile()
    assert await state(api) == (False, "n1", "Running")
