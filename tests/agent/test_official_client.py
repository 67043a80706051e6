"""The official `kubernetes` Python client's typed models read everything corral writes: pods in
each state an agent reports (running, succeeded, failed, crash-looping, never started, pending),
the node an agent registered and one without an agent, and the other kinds corral serves."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.testing.cluster import wait_for
from tests.agent.test_end_to_end import apply, local_cluster, phase, pod_yaml, pods
from tests.cli.test_cli import corral


@pytest.fixture
def cluster(tmp_path):
    with local_cluster(tmp_path, 1) as c:
        yield c


def test_every_kind_in_every_state_reads_through_the_clients_typed_models(cluster, tmp_path):
    kc = cluster.kubeconfig
    apply(kc, tmp_path, pod_yaml("running", ["sh", "-c", "exec sleep 600"]))
    apply(kc, tmp_path, pod_yaml("succeeded", ["sh", "-c", "exit 0"], restart="Never"))
    apply(kc, tmp_path, pod_yaml("failed", ["sh", "-c", "exit 2"], restart="Never"))
    apply(kc, tmp_path, pod_yaml("crasher", ["sh", "-c", "exit 3"]))
    apply(kc, tmp_path, pod_yaml("never-started", ["definitely-not-a-command-xyz"], restart="Never"))
    apply(kc, tmp_path, pod_yaml("pending", ["true"]).replace("spec:\n", "spec:\n  nodeSelector: {none: none}\n", 1))
    corral("apply", "-f", "-", kubeconfig=kc, stdin=json.dumps(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "no-agent"}}))
    wait_for(lambda: [phase(kc, n) for n in ("running", "succeeded", "failed", "never-started")]
             == ["Running", "Succeeded", "Failed", "Failed"], what="the pods to reach their states")
    wait_for(lambda: (pods(kc)["crasher"]["status"].get("containerStatuses") or [{}])[0].get("restartCount", 0) >= 1,
             what="the crasher to restart")

    config = k8s.Configuration()
    k8s_config.load_kube_config(config_file=kc, client_configuration=config)
    with k8s.ApiClient(config) as api:
        core = k8s.CoreV1Api(api)
        listed = {p.metadata.name: p for p in core.list_namespaced_pod("default").items}
        assert set(listed) == {"running", "succeeded", "failed", "crasher", "never-started", "pending"}
        running = listed["running"].status.container_statuses[0]
        assert running.ready and running.state.running and running.image == "local/none"
        assert running.image_id == "" and running.container_id.startswith("process://")  # no image: none to name
        assert listed["failed"].status.container_statuses[0].state.terminated.exit_code == 2
        assert listed["crasher"].status.container_statuses[0].restart_count >= 1
        for name in listed:
            assert core.read_namespaced_pod(name, "default").metadata.name == name
        nodes = {n.metadata.name: n for n in core.list_node().items}
        info = nodes["node-0"].status.node_info
        assert info.kubelet_version and info.operating_system == "linux" and info.architecture
        assert info.machine_id is not None and info.boot_id is not None and info.kube_proxy_version is not None
        assert core.read_node("no-agent").metadata.name == "no-agent"
        assert core.list_event_for_all_namespaces().items
        assert {n.metadata.name for n in core.list_namespace().items} >= {"default", "kube-system"}
        assert k8s.CoordinationV1Api(api).list_lease_for_all_namespaces().items
        assert k8s.SchedulingV1Api(api).list_priority_class().items
        rbac = k8s.RbacAuthorizationV1Api(api)
        assert rbac.list_cluster_role().items and rbac.list_cluster_role_binding().items


def test_kubectl_describe_node_finds_the_nodes_lease(cluster):
    """kubectl reads a node's Lease from kube-node-lease and its times as MicroTime (six digits of
    microseconds): before, "Failed to get lease" twice over (namespace, then the time's format)."""
    kubectl = shutil.which("kubectl", path=os.path.dirname(sys.executable))
    wait_for(lambda: "node-0" in corral("get", "leases", "-n", "kube-node-lease", kubeconfig=cluster.kubeconfig).stdout,
             what="the node's lease")
    out = subprocess.run([kubectl, "--kubeconfig", cluster.kubeconfig, "describe", "node", "node-0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lease = out.stdout.split("Lease:", 1)[1].split("\n\n", 1)[0]
    assert "HolderIdentity:  node-0" in lease and "RenewTime:" in lease and "Failed" not in lease, lease
