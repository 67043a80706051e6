"""How many lost nodes' pods are evicted, and when none are: Kubernetes' zones, rates and disruption
states, driven by a fake clock. A zone evicts one lost node every 10 s; a small zone where most nodes
are lost evicts none, a large one one every 100 s; with every node lost nothing is evicted, and once a
node is back the others wait a whole eviction timeout from then."""

from __future__ import annotations

import logging

import pytest

from corral.api.defaults import rfc3339
from corral.api.resources import by_kind
from corral.controllers.nodes.node_lifecycle import UNREACHABLE_TAINT, EvictionLimits, NodeLifecycleController
from corral.server.rest import WriteOptions
from corral.testing.builders import make_node, make_pod
from corral.testing.clock import FakeClock

GRACE, EVICTION = 40.0, 300.0
NODES, PODS, LEASES = by_kind("Node"), by_kind("Pod"), by_kind("Lease")
OPTS = WriteOptions(warn=False)
ZONE = "topology.kubernetes.io/zone"


class Cluster:
    """Nodes with a lease each (renewed at the fake clock's start) and one pod on each."""

    def __init__(self, api, clock: FakeClock, limits: EvictionLimits = EvictionLimits()) -> None:
        self.api, self.clock = api, clock
        self.controller = NodeLifecycleController(api, grace_seconds=GRACE, eviction_seconds=EVICTION, clock=clock,
                                                  limits=limits)

    async def add(self, name: str, zone: str | None = None) -> None:
        node = make_node(name).heartbeat_at(rfc3339(self.clock())).obj
        if zone is not None:
            node["metadata"].setdefault("labels", {})[ZONE] = zone
        await self.api.create(NODES, None, node, OPTS)
        await self.api.create(LEASES, "kube-node-lease", {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": rfc3339(self.clock())}}, OPTS)
        pod = make_pod(f"on-{name}").node(name).obj
        pod["metadata"].pop("uid")
        await self.api.create(PODS, "default", pod, OPTS)

    async def beat(self, *names: str) -> None:
        for name in names:
            await self.api.patch(LEASES, "kube-node-lease", name, {"spec": {"renewTime": rfc3339(self.clock())}},
                                 "merge", OPTS)

    async def after(self, seconds: float, *beating: str) -> None:
        """``seconds`` later, with the ``beating`` nodes' leases renewed then: one pass."""
        self.clock.advance(seconds)
        await self.beat(*beating)
        await self.controller.reconcile()

    async def evicted(self) -> set[str]:
        """The nodes whose pod was evicted (back to Pending)."""
        await self.api.cache.wait_consistent()
        pods = [r.obj for r in self.api.cache.items(PODS.store_prefix)]
        return {p["metadata"]["name"].removeprefix("on-") for p in pods if not p["spec"].get("nodeName")}

    async def tainted(self) -> set[str]:
        await self.api.cache.wait_consistent()
        return {r.obj["metadata"]["name"] for r in self.api.cache.items(NODES.store_prefix)
                if any(t["key"] == UNREACHABLE_TAINT for t in r.obj["spec"].get("taints") or ())}


@pytest.fixture
def make(server):
    def make(limits: EvictionLimits = EvictionLimits()) -> Cluster:
        return Cluster(server.api, FakeClock(1_800_000_000.0), limits)
    return make


@pytest.mark.parametrize("zones", [
    pytest.param(["a"], id="a one-node cluster"),
    pytest.param(["a", "a", "a"], id="three nodes in one zone"),
    pytest.param(["a", "b", None], id="three zones, one node without a zone label"),
])
async def test_with_every_node_lost_nothing_is_evicted(make, zones, caplog):
    """The control plane lost its connection, or came back after a long outage: every pod would be
    moved with nowhere to go. Kubernetes evicts nothing then; the nodes are still marked NotReady."""
    c = make()
    names = [f"n{i}" for i in range(len(zones))]
    for name, zone in zip(names, zones):
        await c.add(name, zone)
    with caplog.at_level(logging.WARNING, logger="corral.controllers.nodes.node_lifecycle"):
        await c.after(GRACE + 1)
        for _ in range(3):
            await c.after(EVICTION)
    assert await c.tainted() == set(names)
    assert await c.evicted() == set()
    every = [r for r in caplog.records if r.getMessage().startswith("every node is NotReady")]
    assert len(every) == 1  # said once, not at every pass


async def test_once_a_node_is_ready_again_the_others_wait_a_whole_eviction_timeout(make, caplog):
    c = make()
    for name in ("n0", "n1", "n2"):
        await c.add(name)
    await c.after(GRACE + 1)
    await c.after(2 * EVICTION)  # long past the timeout, every node lost
    with caplog.at_level(logging.WARNING, logger="corral.controllers.nodes.node_lifecycle"):
        await c.after(1, "n0")  # n0's agent reaches the server again
    assert (await c.tainted(), await c.evicted()) == ({"n1", "n2"}, set())
    assert any(r.getMessage() == "a node is Ready again: the NotReady nodes' pods are evicted 300s from now "
                                 "at the earliest" for r in caplog.records)
    await c.after(EVICTION, "n0")
    assert await c.evicted() == set()  # exactly the timeout since n0 came back: not yet
    await c.after(0.001, "n0")
    assert await c.evicted() == {"n1"}  # one of them; the zone's next token comes 10 s later
    await c.after(9.5, "n0")
    assert await c.evicted() == {"n1"}
    await c.after(0.6, "n0")
    assert await c.evicted() == {"n1", "n2"}


async def test_a_zone_evicts_one_lost_node_every_ten_seconds_the_longest_lost_first(make):
    c = make()
    for i in range(10):
        await c.add(f"n{i}")
    healthy = [f"n{i}" for i in range(2, 10)]
    await c.after(5, "n0", *healthy)  # n1 is silent from the start, n0 from 5 s on
    await c.after(GRACE - 4, *healthy)
    assert await c.tainted() == {"n1"}
    await c.after(5, *healthy)
    assert await c.tainted() == {"n0", "n1"}
    await c.after(EVICTION + 0.001, *healthy)  # both past the timeout: the one lost longer goes first
    assert await c.evicted() == {"n1"}
    await c.after(5, *healthy)
    assert await c.evicted() == {"n1"}
    await c.after(4.9, *healthy)
    assert await c.evicted() == {"n1"}
    await c.after(0.2, *healthy)  # 10 s after the first
    assert await c.evicted() == {"n0", "n1"}


async def test_the_zones_are_limited_apart_and_a_lost_zone_among_healthy_ones_is_evicted(make):
    """Zone a is entirely lost and zone b healthy: the pods have somewhere to go, so a evicts at the
    normal rate (Kubernetes' FullDisruption of one zone), and b's own lost node does not wait for a's."""
    c = make()
    for name, zone in (("a0", "a"), ("a1", "a"), ("b0", "b"), ("b1", "b"), ("b2", "b"), ("b3", "b")):
        await c.add(name, zone)
    await c.after(GRACE + 1, "b1", "b2", "b3")
    await c.after(EVICTION + 1, "b1", "b2", "b3")
    assert await c.evicted() == {"b0", "a0"}  # one of each zone at once (lost at the same instant: by name)
    await c.after(5, "b1", "b2", "b3")
    assert await c.evicted() == {"b0", "a0"}
    await c.after(5.5, "b1", "b2", "b3")
    assert await c.evicted() == {"b0", "a0", "a1"}


@pytest.mark.parametrize("size, lost, first, every", [
    pytest.param(5, 3, 0, None, id="a small zone (5 nodes) with 3 lost evicts none"),
    pytest.param(60, 34, 1, 100.0, id="a large zone (60 nodes) with 34 lost (57 %) evicts one every 100 s"),
    pytest.param(60, 32, 1, 10.0, id="32 lost of 60 (53 %) is below the 55 % threshold: one every 10 s"),
])
async def test_a_partially_disrupted_zone_evicts_slowly_or_not_at_all(make, size, lost, first, every):
    c = make()
    names = [f"n{i:02d}" for i in range(size)]
    for name in names:
        await c.add(name)
    healthy = names[lost:]
    await c.after(GRACE + 1, *healthy)
    await c.after(EVICTION + 1, *healthy)
    assert len(await c.evicted()) == first
    if every is None:
        await c.after(10 * EVICTION, *healthy)
        assert await c.evicted() == set()
        return
    await c.after(every - 1, *healthy)
    assert len(await c.evicted()) == 1
    await c.after(1.5, *healthy)
    assert len(await c.evicted()) == 2


async def test_the_limits_are_settings(make):
    """`corral server --node-eviction-rate 0.5 --unhealthy-zone-threshold 0.9`: three of five lost
    is no longer a disruption, and a node goes every 2 s."""
    c = make(EvictionLimits(rate=0.5, unhealthy_threshold=0.9))
    names = [f"n{i}" for i in range(5)]
    for name in names:
        await c.add(name)
    await c.after(GRACE + 1, "n3", "n4")
    await c.after(EVICTION + 1, "n3", "n4")
    assert len(await c.evicted()) == 1
    await c.after(1.5, "n3", "n4")
    assert len(await c.evicted()) == 1
    await c.after(0.6, "n3", "n4")
    assert len(await c.evicted()) == 2
    await c.after(2.1, "n3", "n4")
    assert await c.evicted() == {"n0", "n1", "n2"}


def metrics(text: str, name: str) -> dict[str, float]:
    """``name``'s samples in a /metrics text, by their labels (as written; "" for a sample without)."""
    found = {}
    for line in text.splitlines():
        if line.startswith((name + "{", name + " ")):
            labels, value = line[len(name):].rsplit(" ", 1)
            found[labels] = float(value)
    return found


async def test_the_zones_and_evictions_are_on_the_servers_metrics(make):
    """kube-controller-manager's node_collector_* figures: each zone's size, NotReady nodes, health
    and disruption state as the last pass found them, and the lost nodes evicted."""
    from prometheus_client import generate_latest

    from corral.server.metrics import ServerMetrics

    c = make()
    for name, zone in (("a0", "a"), ("a1", "a"), ("b0", "b"), ("b1", "b"), ("b2", "b"), ("b3", "b"), ("x", None)):
        await c.add(name, zone)
    await c.api.patch(NODES, None, "x", {"metadata": {"labels": {"topology.kubernetes.io/region": "eu",
                                                                 ZONE: "c"}}}, "merge", OPTS)
    server_metrics = ServerMetrics()

    def shown(name: str) -> dict[str, float]:
        server_metrics.node_zones(c.controller)
        return metrics(generate_latest(server_metrics.registry).decode(), name)

    await c.after(GRACE + 1, "b1", "b2", "b3", "x")
    assert shown("corral_node_collector_zone_size") == {'{zone="a"}': 2, '{zone="b"}': 4, '{zone="eu/c"}': 1}
    assert shown("corral_node_collector_unhealthy_nodes_in_zone") == {'{zone="a"}': 2, '{zone="b"}': 1,
                                                                     '{zone="eu/c"}': 0}
    assert shown("corral_node_collector_zone_health") == {'{zone="a"}': 0, '{zone="b"}': 75, '{zone="eu/c"}': 100}
    assert {k: v for k, v in shown("corral_node_collector_zone_disruption").items() if v} == {
        '{state="FullDisruption",zone="a"}': 1, '{state="Normal",zone="b"}': 1, '{state="Normal",zone="eu/c"}': 1}
    assert shown("corral_node_collector_evictions_total") == {}
    await c.after(EVICTION + 1, "b1", "b2", "b3", "x")
    await c.after(11, "b1", "b2", "b3", "x")
    assert shown("corral_node_collector_evictions_total") == {'{zone="a"}': 2, '{zone="b"}': 1}
    await c.api.delete(NODES, None, "x", 0, None, None)
    await c.after(1, "b1", "b2", "b3")
    assert shown("corral_node_collector_zone_size") == {'{zone="a"}': 2, '{zone="b"}': 4}  # its zone is gone
    c.controller = NodeLifecycleController(c.api, grace_seconds=GRACE, eviction_seconds=EVICTION, clock=c.clock)
    # A new term's controller (another leader) finds the lost nodes a grace period after its start,
    # still tainted since long ago: it evicts them again (a0 and b0 at once, a1 a token later), and
    # the count goes on from the last term's.
    await c.after(GRACE + 1, "b1", "b2", "b3")
    await c.after(EVICTION + 1, "b1", "b2", "b3")
    assert shown("corral_node_collector_evictions_total") == {'{zone="a"}': 4, '{zone="b"}': 2}


@pytest.mark.parametrize("ready, not_ready, state", [
    (0, 1, "FullDisruption"), (0, 0, "Normal"), (1, 2, "Normal"), (2, 3, "PartialDisruption"),
    (3, 3, "Normal"), (9, 11, "PartialDisruption"), (1000, 1, "Normal"),
])
def test_zone_states_as_kubernetes_computes_them(ready, not_ready, state):
    """More than two NotReady and at least 55 % of the zone: partially disrupted; none Ready: fully."""
    assert EvictionLimits().zone_state(ready, not_ready) == state


def test_a_servers_eviction_flags_reach_its_controller(tmp_path):
    """A real `corral server` with 2 s grace and 1 s eviction timeout: with `--node-eviction-rate 0`
    a lost node's pod stays while another node beats (the default would evict it within seconds,
    as above); once that one falls silent too, the server says every node is NotReady."""
    import asyncio
    import time

    from corral.api.defaults import now_micro_rfc3339
    from corral.testing import ServerProcess

    args = ("--no-scheduler", "--node-heartbeat", "1", "--node-monitor-grace-period", "2",
            "--pod-eviction-timeout", "1", "--node-eviction-rate", "0")

    async def scenario(server) -> None:
        async with server.client() as client:
            async def beat(name: str) -> None:
                await client.patch("leases", name, {"spec": {"renewTime": now_micro_rfc3339()}}, "kube-node-lease")

            for name in ("alive", "lost"):
                await client.create(make_node(name).obj)
                await client.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                     "metadata": {"name": name, "namespace": "kube-node-lease"},
                                     "spec": {"holderIdentity": name, "leaseDurationSeconds": 2,
                                              "renewTime": now_micro_rfc3339()}})
            pod = make_pod("stays").node("lost").obj
            pod["metadata"].pop("uid")
            await client.create(pod, "default")
            deadline = time.monotonic() + 9  # grace 2 s, a pass every 2 s, the timeout 1 s: twice over
            while time.monotonic() < deadline:
                await beat("alive")
                await asyncio.sleep(0.5)
            node = await client.get("nodes", "lost", raw=True)
            assert any(t["key"] == UNREACHABLE_TAINT for t in node["spec"]["taints"])
            assert (await client.get("pods", "stays", "default", raw=True))["spec"]["nodeName"] == "lost"
            assert "every node is NotReady" not in server.log()
            shown = (await client.request("GET", "/metrics")).decode()
            assert metrics(shown, "corral_node_collector_zone_size") == {'{zone=""}': 2}
            assert metrics(shown, "corral_node_collector_unhealthy_nodes_in_zone") == {'{zone=""}': 1}
            assert metrics(shown, "corral_node_collector_evictions_total") == {}
            deadline = time.monotonic() + 15
            while "every node is NotReady" not in server.log() and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            assert "every node is NotReady: no pod is evicted until a node is Ready again" in server.log()

    with ServerProcess(str(tmp_path / "s"), *args) as server:
        asyncio.run(scenario(server))
