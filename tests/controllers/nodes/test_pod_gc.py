"""The pod garbage collector, driven by a fake clock: orphans go after the quarantine, pods being
deleted on a silent node go once their grace period is over, and nothing else is touched."""

from __future__ import annotations

from corral.api.resources import by_kind
from corral.controllers.nodes.node_lifecycle import UNREACHABLE_TAINT
from corral.controllers.nodes.pod_gc import PodGarbageCollector
from corral.server.rest import WriteOptions
from corral.testing.builders import make_node, make_pod
from corral.testing.clock import FakeClock

NODES, PODS = by_kind("Node"), by_kind("Pod")
OPTS = WriteOptions(warn=False)
QUARANTINE = 40.0


async def pods(api) -> set[str]:
    await api.cache.wait_consistent()
    return {r.obj["metadata"]["name"] for r in api.cache.items(PODS.store_prefix)}


async def add_pod(api, name: str, node: str) -> None:
    pod = make_pod(name).node(node).obj
    pod["metadata"].pop("uid")
    await api.create(PODS, "default", pod, OPTS)


async def test_a_pod_whose_node_does_not_exist_goes_after_the_quarantine_unless_the_node_comes(server, caplog):
    """An unbound pod (first in the list here) is no orphan, and the ones after it are still looked
    at; the orphan goes once the quarantine is over, with a warning that says why."""
    api, clock = server.api, FakeClock(1_800_000_000.0)
    gc = PodGarbageCollector(api, quarantine_seconds=QUARANTINE, clock=clock)
    await api.create(NODES, None, make_node("n1").obj, OPTS)
    await api.create(PODS, "default", {**make_pod("awaiting").obj, "metadata": {"name": "awaiting"}}, OPTS)
    for name, node in (("kept", "n1"), ("orphan", "gone"), ("early", "late")):
        await add_pod(api, name, node)
    await gc.reconcile()
    clock.advance(QUARANTINE - 1)
    await api.create(NODES, None, make_node("late").obj, OPTS)  # registers within the quarantine
    await gc.reconcile()
    assert await pods(api) == {"kept", "orphan", "early", "awaiting"}
    clock.advance(1)
    await gc.reconcile()
    assert await pods(api) == {"kept", "early", "awaiting"}
    assert "deleted pod default/orphan: its node gone does not exist" in caplog.text


async def test_a_node_deleted_under_its_pods_leaves_them_orphans(server):
    api, clock = server.api, FakeClock(1_800_000_000.0)
    gc = PodGarbageCollector(api, quarantine_seconds=QUARANTINE, clock=clock)
    await api.create(NODES, None, make_node("n1").obj, OPTS)
    await add_pod(api, "web", "n1")
    await gc.reconcile()
    await api.delete(NODES, None, "n1", None, None, None)
    await gc.reconcile()  # the quarantine starts when the orphan is first seen
    clock.advance(QUARANTINE - 1)
    await gc.reconcile()
    assert await pods(api) == {"web"}
    clock.advance(1)
    await gc.reconcile()
    assert await pods(api) == set()


async def test_a_pod_being_deleted_on_a_silent_node_goes_when_its_grace_period_is_over(server, caplog):
    api = server.api
    silent = make_node("silent").obj
    silent["spec"]["taints"] = [{"key": UNREACHABLE_TAINT, "effect": "NoExecute"}]
    await api.create(NODES, None, silent, OPTS)
    await api.create(NODES, None, make_node("alive").obj, OPTS)
    await add_pod(api, "stuck", "silent")
    await add_pod(api, "stopping", "alive")
    for name in ("stuck", "stopping"):
        await api.delete(PODS, "default", name, 5, None, None)  # Terminating: waits for the agent
    import time

    from corral.scheduler.cache.node_table import parse_timestamp

    clock = FakeClock(time.time())
    gc = PodGarbageCollector(api, quarantine_seconds=QUARANTINE, clock=clock)
    await gc.reconcile()
    assert await pods(api) == {"stuck", "stopping"}
    clock.now = parse_timestamp((await api.current(PODS, "default", "stuck")).obj["metadata"]["deletionTimestamp"])
    await gc.reconcile()  # the grace period's last moment
    assert await pods(api) == {"stopping"}  # the live node's agent finishes its own deletions
    assert "deleted pod default/stuck: it is terminating on node silent, which is not ready" in caplog.text
    clock.advance(7)
    await gc.reconcile()
    assert await pods(api) == {"stopping"}
