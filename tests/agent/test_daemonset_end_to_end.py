"""A DaemonSet on real agents, driven by kubectl: one pod on each node, placed by the scheduler,
rolled out to a new template node by node (kubectl rollout status), a daemon on a cordoned node
stays, and kubectl rollout history and undo work from its ControllerRevisions."""

from __future__ import annotations

import json

from corral.testing.cluster import LocalCluster, wait_for
from tests.agent.test_deployment_end_to_end import kubectl
from tests.agent.test_end_to_end import running_processes


def daemon_set(marker: str) -> str:
    return f"""apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: logs}}
spec:
  selector: {{matchLabels: {{app: logs}}}}
  template:
    metadata: {{labels: {{app: logs}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {{name: c, image: busybox, command: ["sleep", "{marker}"]}}
"""


def test_a_daemonset_runs_on_every_node_and_rolls_out_node_by_node(tmp_path):
    with LocalCluster(str(tmp_path / "c"), agents=2) as cluster:
        kc = cluster.kubeconfig
        wait_for(lambda: len(json.loads(kubectl(kc, "get", "nodes", "-o", "json"))["items"]) == 2, what="2 nodes")
        kubectl(kc, "apply", "-f", "-", stdin=daemon_set("7401"))
        kubectl(kc, "rollout", "status", "daemonset/logs", "--timeout=60s")
        pods = json.loads(kubectl(kc, "get", "pods", "-l", "app=logs", "-o", "json"))["items"]
        assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(cluster.node_name(i) for i in range(2))
        assert running_processes("sleep 7401") == 2
        row = kubectl(kc, "get", "daemonset", "logs").splitlines()[1].split()
        assert row[1:6] == ["2", "2", "2", "2", "2"], row  # DESIRED CURRENT READY UP-TO-DATE AVAILABLE

        kubectl(kc, "cordon", cluster.node_name(0))  # a daemon stays on a cordoned node
        kubectl(kc, "apply", "-f", "-", stdin=daemon_set("7402"))
        kubectl(kc, "rollout", "status", "daemonset/logs", "--timeout=90s")
        wait_for(lambda: running_processes("sleep 7402") == 2 and running_processes("sleep 7401") == 0,
                 what="the new template on both nodes, the old one gone")

        history = kubectl(kc, "rollout", "history", "daemonset/logs")
        assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"], history
        assert "7401" in kubectl(kc, "rollout", "history", "daemonset/logs", "--revision=1")
        kubectl(kc, "rollout", "undo", "daemonset/logs")
        kubectl(kc, "rollout", "status", "daemonset/logs", "--timeout=90s")
        wait_for(lambda: running_processes("sleep 7401") == 2 and running_processes("sleep 7402") == 0,
                 what="the first template back on both nodes")
        history = kubectl(kc, "rollout", "history", "daemonset/logs")
        assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"], history
