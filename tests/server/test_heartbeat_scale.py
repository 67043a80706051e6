"""Heartbeats that slow as the cluster grows: the server lengthens node Leases past its heartbeat
rate, agents renew that much less often, and the scheduler's freshness follows."""

from __future__ import annotations

from corral.agent.agent import Agent, AgentConfig
from corral.agent.reporting import renew_lease
from corral.agent.runtimes.process import ProcessRuntime
from corral.api.kinds.coordination import HeartbeatScale
from corral.api.resources import by_kind
from corral.client import Client
from corral.server.rest import WriteOptions
from corral.testing import running_server
from corral.testing.builders import make_node

NODES = by_kind("Node")
SLOW = HeartbeatScale(interval=10.0, max_per_second=0.2)  # past 2 nodes, heartbeats slow down


async def add_nodes(server, *names: str) -> None:
    for name in names:
        await server.api.create(NODES, None, make_node(name).obj, WriteOptions(warn=False))


async def lease_of(server, name: str, namespace: str = "kube-node-lease") -> dict:
    return (await server.api.current(by_kind("Lease"), namespace, name, consistent=True)).obj["spec"]


async def test_the_server_lengthens_node_leases_as_the_cluster_passes_its_heartbeat_rate(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False, heartbeats=SLOW) as server:
        async with Client(credentials=server.node_credentials("n1")) as node:
            # One node: below the rate, the lease is what the agent asked for.
            assert await renew_lease(node, "n1") == 40
            assert (await lease_of(server, "n1"))["leaseDurationSeconds"] == 40
            await add_nodes(server, "a", "b", "c", "d")  # 4 nodes at 0.2 renewals/s of 10 s heartbeats: factor 2
            assert await renew_lease(node, "n1") == 80
            assert await renew_lease(node, "n1", duration_seconds=10) == 20
            assert await renew_lease(node, "n1", duration_seconds=10**6) == 80  # never past the scaled grace
            spec = await lease_of(server, "n1")
            assert spec["leaseDurationSeconds"] == 80 and spec["holderIdentity"] == "n1"
        async with Client(credentials=server.issue_credentials("admin", ["system:masters"])) as admin:
            # kubectl writing a node Lease is lengthened too; a Lease elsewhere is left as written.
            await admin.patch("leases", "n1", {"spec": {"leaseDurationSeconds": 5}}, "kube-node-lease", raw=True)
            assert (await lease_of(server, "n1"))["leaseDurationSeconds"] == 10
            await admin.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                "metadata": {"name": "mine", "namespace": "default"},
                                "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}})
            assert (await lease_of(server, "mine", "default"))["leaseDurationSeconds"] == 15


async def test_an_agent_renews_as_much_less_often_as_its_lease_was_lengthened(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False, heartbeats=SLOW) as server:
        await add_nodes(server, "a", "b", "c")
        async with Client(credentials=server.node_credentials("n1")) as client:
            agent = Agent(client, ProcessRuntime(str(tmp_path / "agent")), AgentConfig(
                name="n1", data_dir=str(tmp_path / "agent"), capacity={"cpu": "1", "memory": "1Gi", "pods": "10"},
                address="127.0.0.1", port=0, heartbeat_seconds=0.5))
            assert agent.heartbeat_interval == 0.5  # before it has heard from the server
            await agent._register()
            await agent.heartbeat()  # 4 nodes: factor 2
            assert agent.lease_seconds == 80 and agent.heartbeat_interval == 1.0
            await add_nodes(server, "x", "y", "z", "w")  # 8 nodes: factor 4
            await agent.heartbeat()
            assert agent.lease_seconds == 160 and agent.heartbeat_interval == 2.0


async def test_the_schedulers_freshness_follows_the_servers_heartbeat_settings(tmp_path):
    async with running_server(str(tmp_path / "s"), controllers=False, heartbeats=SLOW) as server:
        fwk = next(iter(server.scheduler.frameworks.values()))
        node_ready = next(p for p in fwk.filters if p.NAME == "NodeReady")
        assert node_ready.heartbeats == SLOW
