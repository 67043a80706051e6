"""Custom plugins: the per-node adapter, and the Reserve / Permit / PreEnqueue / PostFilter points."""

from __future__ import annotations

import pytest

from corral.scheduler.framework.interface import NodeFilterAdapter, Plugin
from corral.scheduler.framework.status import SUCCESS, Status
from corral.scheduler.plugins import REGISTRY, register
from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import Harness

CALLS: list[tuple[str, str]] = []


class EvenNodesOnly(NodeFilterAdapter):
    NAME = "EvenNodesOnly"

    @staticmethod
    def check(pod, node):
        return None if int(node.name[1:]) % 2 == 0 else "node(s) had an odd number"


class Gatekeeper(Plugin):
    NAME = "Gatekeeper"

    def pre_enqueue(self, pod) -> Status:
        return Status(Status.unschedulable().code) if pod.labels.get("gated") == "true" else SUCCESS

    def reserve(self, state, pod, node) -> Status:
        CALLS.append(("reserve", pod.name))
        return Status.unschedulable("refused") if pod.labels.get("refuse") == "reserve" else SUCCESS

    def unreserve(self, state, pod, node) -> None:
        CALLS.append(("unreserve", pod.name))

    async def permit(self, state, pod, node) -> Status:
        CALLS.append(("permit", pod.name))
        return Status.unschedulable("refused") if pod.labels.get("refuse") == "permit" else SUCCESS

    def post_filter(self, state, pod, diagnosis) -> Status:
        CALLS.append(("post_filter", pod.name))
        return Status.unschedulable()


@pytest.fixture(autouse=True)
def registered():
    register(EvenNodesOnly)
    register(Gatekeeper)
    CALLS.clear()
    yield
    REGISTRY.pop("EvenNodesOnly")
    REGISTRY.pop("Gatekeeper")


CONFIG = {"profiles": [{"plugins": {
    "filter": {"enabled": [{"name": "EvenNodesOnly"}]},
    "preEnqueue": {"enabled": [{"name": "Gatekeeper"}]},
    "reserve": {"enabled": [{"name": "Gatekeeper"}]},
    "permit": {"enabled": [{"name": "Gatekeeper"}]},
    "postFilter": {"enabled": [{"name": "Gatekeeper"}]},
}}]}


async def test_a_node_by_node_plugin_filters_and_explains_like_a_column_plugin():
    h = Harness(CONFIG)
    for i in range(4):
        h.add_node(make_node(f"n{i}"))
    for i in range(6):
        h.add_pod(make_pod(f"p{i}"))
    await h.run()
    assert set(h.placements().values()) <= {"n0", "n2"}
    # Only n1 matches the selector, and the custom plugin refuses n1: each node is counted once,
    # under the first plugin (in profile order) that refused it.
    h.add_pod(make_pod("picky").node_selector(**{"kubernetes.io/hostname": "n1"}))
    await h.run()
    assert h.writer.conditions["default/picky"]["message"] == (
        "0/4 nodes are available: 1 node(s) had an odd number, "
        "3 node(s) didn't match Pod's node affinity/selector.")
    assert ("post_filter", "picky") in CALLS


async def test_reserve_and_permit_run_around_binding_and_a_refusal_unreserves():
    h = Harness(CONFIG)
    h.add_node(make_node("n0"))
    h.add_pod(make_pod("ok"))
    h.add_pod(make_pod("no").labels(refuse="permit"))
    s = h.scheduler  # one round by hand: the refused pod must stay in backoff, not be retried
    while (qp := s.queue.pop_nowait()) is not None:
        s.schedule_one(qp)
    import asyncio

    while s._inflight:
        await asyncio.gather(*list(s._inflight))
    assert h.placements() == {"default/ok": "n0"}
    assert [c for c in CALLS if c[1] == "ok"] == [("reserve", "ok"), ("permit", "ok")]
    assert [c for c in CALLS if c[1] == "no"] == [("reserve", "no"), ("permit", "no"), ("unreserve", "no")]
    assert not s.cache.is_assumed("default/no")  # un-assumed, and waiting in backoff
    assert s.queue.get("default/no").where == "backoff"


async def test_a_pre_enqueue_plugin_keeps_a_pod_out_of_the_queue():
    h = Harness(CONFIG)
    h.add_node(make_node("n0"))
    h.add_pod(make_pod("held").labels(gated="true"))
    await h.run()
    assert h.placements() == {} and "default/held" not in h.scheduler.queue
