"""Hollow nodes against a real server: they register, stay Ready, run and terminate pods."""

from __future__ import annotations

import json
import subprocess

from corral.testing.cluster import wait_for
from corral.testing.process import child_env
from tests.cli.test_cli import CORRAL, corral


def test_hollow_nodes_register_stay_ready_and_run_pods_through_the_agent_state_machine(cluster_process, tmp_path):
    kc = cluster_process.kubeconfig
    env = child_env({"KUBECONFIG": kc})
    sim = subprocess.Popen([CORRAL, "sim", "--nodes", "20", "--server", cluster_process.url, "--zones", "2", "--run-delay", "0.2"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert "20 hollow nodes" in sim.stdout.readline()
        nodes = json.loads(corral("get", "nodes", "-o", "json", kubeconfig=kc).stdout)["items"]
        assert len(nodes) == 20
        assert {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes} == {"zone-1", "zone-2"}
        leases = json.loads(corral("get", "leases", "-n", "corral-node-lease", "-o", "json", kubeconfig=kc).stdout)["items"]
        assert len(leases) == 20
        manifest = tmp_path / "pods.json"
        manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
             "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}]}}
            for i in range(30)]}))
        corral("apply", "-f", str(manifest), kubeconfig=kc)

        def phases() -> dict[str, str]:
            items = json.loads(corral("get", "pods", "-o", "json", kubeconfig=kc).stdout)["items"]
            return {p["metadata"]["name"]: p["status"].get("phase") for p in items}

        wait_for(lambda: set(phases().values()) == {"Running"}, what="all pods Running on hollow nodes")
        corral("delete", "-f", str(manifest), kubeconfig=kc)
        wait_for(lambda: phases() == {}, what="pods Terminated and removed")
        assert "NotReady" not in corral("get", "nodes", kubeconfig=kc).stdout
    finally:
        sim.terminate()
        sim.wait(15)
