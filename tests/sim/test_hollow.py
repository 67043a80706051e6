"""Hollow nodes against a real server: they join as agents do, register, stay Ready, run and
terminate pods, each writing under its own node identity."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess

from corral import GIT_VERSION
from corral.api.kinds.coordination import HeartbeatScale
from corral.api.resources import by_kind
from corral.client import Client
from corral.server.rest import WriteOptions
from corral.sim.hollow import HollowConfig, HollowNodes
from corral.sim.taint import HOLLOW_TAINT, HOLLOW_TOLERATION
from corral.testing import running_server
from corral.testing.builders import make_node
from corral.testing.cluster import wait_for
from corral.testing.process import child_env
from tests.cli.test_cli import CORRAL, corral


def test_hollow_nodes_register_stay_ready_and_run_pods_through_the_agent_state_machine(cluster_process, tmp_path):
    kc = cluster_process.kubeconfig
    env = child_env({"KUBECONFIG": kc})
    sim = subprocess.Popen([CORRAL, "sim", "--nodes", "20", "--server", cluster_process.url, "--zones", "2", "--run-delay", "0.2"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = sim.stdout.readline()
        assert "20 hollow nodes" in line and "each as system:node:NAME" in line
        nodes = json.loads(corral("get", "nodes", "-o", "json", kubeconfig=kc).stdout)["items"]
        assert len(nodes) == 20
        assert {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes} == {"zone-1", "zone-2"}
        leases = json.loads(corral("get", "leases", "-n", "kube-node-lease", "-o", "json", kubeconfig=kc).stdout)["items"]
        assert len(leases) == 20
        # Tainted by default, so that joined to a real cluster they take only pods meant for them.
        assert all(n["spec"]["taints"] == [HOLLOW_TAINT] for n in nodes)
        assert "tolerations: [{key: corral.dev/hollow" in sim.stdout.readline()
        manifest = tmp_path / "pods.json"
        manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
             "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}],
                      **({"tolerations": [HOLLOW_TOLERATION]} if i else {})}}
            for i in range(31)]}))
        corral("apply", "-f", str(manifest), kubeconfig=kc)

        def phases() -> dict[str, str]:
            items = json.loads(corral("get", "pods", "-o", "json", kubeconfig=kc).stdout)["items"]
            return {p["metadata"]["name"]: p["status"].get("phase") for p in items}

        wait_for(lambda: {v for k, v in phases().items() if k != "p0"} == {"Running"},
                 what="all tolerating pods Running on hollow nodes")
        assert phases()["p0"] == "Pending"  # a pod not meant for them stays off them
        # What they wrote reads through the official client's typed models (which refuse a Node
        # lacking a required nodeInfo field, or a pod's container status lacking imageID).
        from kubernetes import client as k8s

        for node in json.loads(corral("get", "nodes", "-o", "json", kubeconfig=kc).stdout)["items"][:3]:
            assert k8s.V1Node.from_dict(node).status.node_info.kubelet_version == GIT_VERSION
        for pod in [p for p in json.loads(corral("get", "pods", "-o", "json", kubeconfig=kc).stdout)["items"]
                    if p["metadata"]["name"] != "p0"][:3]:
            assert k8s.V1Pod.from_dict(pod).status.container_statuses[0].image_id == ""
        # Each node wrote its Node, its Lease and its pods' statuses as itself, through the node
        # authoriser, and the join token made for them is gone.
        with open(os.path.join(cluster_process.data_dir, "audit.log"), encoding="utf-8") as f:
            writes = [json.loads(line) for line in f]
        node_writes = [(w["user"], w["verb"], w["resource"], w["name"]) for w in writes
                       if w["resource"] in ("nodes", "nodes/status", "leases")]
        creators = sorted(u for u, verb, r, _ in node_writes if verb == "create" and r == "nodes")
        assert creators == sorted(f"system:node:hollow-{i}" for i in range(20))
        assert ("system:node:hollow-3", "patch", "leases", "hollow-3") in node_writes
        assert all(u == f"system:node:{name}" for u, _, _, name in node_writes if name), node_writes
        statuses = [(w["user"], w["code"]) for w in writes if w["resource"] == "pods/status"]
        assert len(statuses) >= 30 and all(u.startswith("system:node:hollow-") and c == 200 for u, c in statuses)
        assert "hollow nodes joining" not in corral("token", "list", kubeconfig=kc).stdout
        corral("delete", "-f", str(manifest), kubeconfig=kc)
        wait_for(lambda: phases() == {}, what="pods Terminated and removed")
        assert "NotReady" not in corral("get", "nodes", kubeconfig=kc).stdout
    finally:
        sim.terminate()
        sim.wait(15)


def test_hollow_nodes_need_a_join_token_their_credential_may_make_or_one_given(server_process, tmp_path):
    admin = server_process.kubeconfig
    vera = tmp_path / "vera.kubeconfig"
    vera.write_text(corral("token", "create", "--user", "vera", kubeconfig=admin).stdout)
    refused = corral("sim", "--nodes", "2", "--server", server_process.url, kubeconfig=str(vera), check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        'error: the hollow nodes could not join: cannot make a join token with this credential: tokens.auth.corral.dev '
        'is forbidden: User "vera" cannot create resource "tokens" in API group "auth.corral.dev" at the cluster '
        'scope; give --join-token (`corral token create --join` prints one)']
    assert corral("get", "nodes", kubeconfig=admin).stdout.strip() in ("", "No resources found")


def test_a_join_token_with_a_line_break_is_refused_before_anything_starts():
    refused = corral("sim", "--nodes", "1", "--server", "https://127.0.0.1:1", "--join-token",
                     "abcdef.0123456789abcdef\n--zones", check=False)
    assert refused.returncode == 1
    assert refused.stderr == "error: --join-token: the token has a line break; a join token is one line, <id>.<secret>\n"


async def test_hollow_nodes_renew_as_much_less_often_as_the_server_lengthened_their_leases(tmp_path):
    # 8 nodes against a server taking 0.2 renewals/s of 10 s heartbeats: leases 4 × 40 s.
    slow = HeartbeatScale(interval=10.0, max_per_second=0.2)
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False, heartbeats=slow) as server:
        async with Client(credentials=server.issue_credentials("admin", ["system:masters"])) as admin:
            hollow = HollowNodes(admin, HollowConfig(count=8, lease_interval=0.2, status_interval=0.4,
                                                     node_identities=False))
            await hollow.start()
            try:
                assert hollow.lease_seconds == 160 and hollow.intervals() == (0.8, 1.6)
                renewals = set()
                for _ in range(40):  # 2 s: 10 renewals at the configured 0.2 s, 2 or 3 at 0.8 s
                    lease = server.cache.get(by_kind("Lease").key("kube-node-lease", "hollow-0"))
                    renewals.add(lease.obj["spec"]["renewTime"])
                    await asyncio.sleep(0.05)
                assert 2 <= len(renewals) <= 4, renewals
                # The cluster doubles: after a round of renewals, the leases and intervals double.
                for i in range(8):
                    await server.api.create(by_kind("Node"), None, make_node(f"more-{i}").obj, WriteOptions(warn=False))
                await asyncio.sleep(2.0)
                assert hollow.lease_seconds == 320 and hollow.intervals() == (1.6, 3.2)
            finally:
                await hollow.stop()


async def test_hollow_nodes_stopped_while_their_requests_queue_leave_no_request_unawaited(tmp_path):
    import gc
    import warnings

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        async with Client(credentials=server.issue_credentials("admin", ["system:masters"])) as admin:
            # One request at a time and rounds back to back: most of each round waits for its turn.
            hollow = HollowNodes(admin, HollowConfig(count=60, lease_interval=0.01, status_interval=0.0,
                                                     concurrency=1, node_identities=False))
            await hollow.start()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                await asyncio.sleep(0.3)
                await hollow.stop()
                gc.collect()
            assert not [w for w in caught if "never awaited" in str(w.message)]


def _ready_of(server, name: str) -> str:
    node = server.cache.get(by_kind("Node").key(None, name)).obj
    return next(c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready")


async def _mark_unknown(admin: Client, names: list[str]) -> None:
    """What the node controller writes for a node it lost."""
    for name in names:
        await admin.patch("nodes", name, {"status": {"conditions": [
            {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
             "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
            subresource="status", raw=True)


async def test_hollow_nodes_restarted_post_ready_at_once_not_at_their_next_heartbeat(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        async with Client(credentials=server.issue_credentials("admin", ["system:masters"])) as admin:
            config = HollowConfig(count=4, lease_interval=0.2, status_interval=3600.0, node_identities=False)
            first = HollowNodes(admin, config)
            await first.start()
            await first.stop()
            names = list(first.names)
            await _mark_unknown(admin, names)  # lost while the simulator was down
            again = HollowNodes(admin, config)
            await again.start()
            try:
                assert {_ready_of(server, n) for n in names} == {"True"}
            finally:
                await again.stop()


async def test_hollow_nodes_cut_off_post_ready_as_soon_as_they_renew_again(tmp_path, monkeypatch):
    from corral.client.rest import ConnectionFailed
    from corral.sim import hollow as hollow_module

    cut = {"hollow-1"}
    renew = hollow_module.renew_lease

    async def renew_unless_cut(client, node, **kwargs):
        if node in cut:
            raise ConnectionFailed("cut off")
        return await renew(client, node, **kwargs)

    monkeypatch.setattr(hollow_module, "renew_lease", renew_unless_cut)
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        async with Client(credentials=server.issue_credentials("admin", ["system:masters"])) as admin:
            hollow = HollowNodes(admin, HollowConfig(count=3, lease_interval=0.1, status_interval=3600.0,
                                                     node_identities=False))
            cut.add("hollow-0")  # registered, then cut off before its first round of renewals
            await hollow.start()
            heartbeat, failing = hollow._heartbeat_node, {"hollow-1"}

            async def heartbeat_failing_once(name):
                if name in failing:  # the server back for its renewal, gone again for its heartbeat
                    failing.discard(name)
                    raise ConnectionFailed("cut off again")
                await heartbeat(name)

            hollow._heartbeat_node = heartbeat_failing_once
            try:
                await asyncio.sleep(0.3)
                await _mark_unknown(admin, ["hollow-0", "hollow-1", "hollow-2"])
                cut.clear()
                for _ in range(40):
                    if _ready_of(server, "hollow-0") == _ready_of(server, "hollow-1") == "True":
                        break
                    await asyncio.sleep(0.05)
                assert [_ready_of(server, n) for n in ("hollow-0", "hollow-1", "hollow-2")] == ["True", "True", "Unknown"]
                assert not failing  # hollow-1's first heartbeat failed; the next renewal tried it again
            finally:
                await hollow.stop()
