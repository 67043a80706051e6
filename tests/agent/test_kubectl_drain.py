"""kubectl drain against real agents: it cordons the node, evicts its pods through the eviction API
(protobuf from kubectl's typed client) and waits for them to go, and a PodDisruptionBudget holds it
back until the budget allows it, as with Kubernetes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from corral.testing.cluster import wait_for
from tests.agent.test_end_to_end import apply, local_cluster, pods

KUBECTL = shutil.which("kubectl", path=os.path.dirname(sys.executable))


def kubectl(kc: str, *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([KUBECTL, "--kubeconfig", kc, *args], capture_output=True, text=True, timeout=timeout)


def web_pod(name: str, node: str) -> str:
    return (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: web}}}}\nspec:\n"
            f"  nodeName: {node}\n  containers:\n  - name: c\n    image: local/none\n"
            f"    command: [sh, -c, 'exec sleep 600']\n    resources: {{requests: {{cpu: 10m}}}}\n")


def ready(kc: str, name: str) -> bool:
    pod = pods(kc).get(name) or {}
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def test_kubectl_drain_honours_a_disruption_budget_then_empties_the_node(tmp_path):
    with local_cluster(tmp_path, 2) as cluster:
        kc = cluster.kubeconfig
        for name, node in (("web-a", "node-0"), ("web-b", "node-0"), ("web-c", "node-1")):
            apply(kc, tmp_path, web_pod(name, node))
        wait_for(lambda: all(ready(kc, n) for n in ("web-a", "web-b", "web-c")), what="three Ready pods")
        apply(kc, tmp_path, "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\n"
                            "spec:\n  minAvailable: 2\n  selector: {matchLabels: {app: web}}\n")

        # Three healthy, two wanted: one of node-0's pods may go, the other is held back; the
        # disruption controller says so in the budget's status, as kubectl shows it.
        wait_for(lambda: kubectl(kc, "get", "pdb", "web", "--no-headers").stdout.split()[1:4] == ["2", "N/A", "1"],
                 what="kubectl get pdb to show MIN AVAILABLE 2 and ALLOWED DISRUPTIONS 1")
        held = kubectl(kc, "drain", "node-0", "--force", "--timeout=12s")
        assert held.returncode != 0
        assert "disruption budget" in held.stderr, held.stderr
        left = {n for n, p in pods(kc).items() if (p.get("spec") or {}).get("nodeName") == "node-0"}
        assert len(left) == 1 and ready(kc, left.pop())
        node = json.loads(kubectl(kc, "get", "node", "node-0", "-o", "json").stdout)
        assert node["spec"]["unschedulable"] is True
        wait_for(lambda: kubectl(kc, "get", "pdb", "web", "--no-headers").stdout.split()[3] == "0",
                 what="no disruption allowed any more")

        assert kubectl(kc, "delete", "pdb", "web").returncode == 0
        done = kubectl(kc, "drain", "node-0", "--force", "--timeout=60s")
        assert done.returncode == 0, done.stderr
        assert "drained" in done.stdout
        assert set(pods(kc)) == {"web-c"}  # kubectl's eviction deletes, as Kubernetes' does
