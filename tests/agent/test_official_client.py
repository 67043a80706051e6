"""What Kubernetes' own clients make of a real cluster with pods in each state an agent reports
(running, succeeded, failed, crash-looping, never started, pending), the node an agent registered
and one without an agent: the official `kubernetes` Python client's typed models read every kind,
and kubectl prints Kubernetes' columns from the server's tables."""

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


KUBECTL = shutil.which("kubectl", path=os.path.dirname(sys.executable))


def kubectl(kc: str, *args: str) -> str:
    out = subprocess.run([KUBECTL, "--kubeconfig", kc, *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One node-0 with pods in every state, and a Node no agent runs."""
    tmp_path = tmp_path_factory.mktemp("states")
    with local_cluster(tmp_path, 1) as c:
        _pods_in_every_state(c.kubeconfig, tmp_path)
        yield c


def _pods_in_every_state(kc: str, tmp_path) -> None:
    apply(kc, tmp_path, pod_yaml("running", ["sh", "-c", "exec sleep 600"]))
    apply(kc, tmp_path, pod_yaml("succeeded", ["sh", "-c", "exit 0"], restart="Never"))
    apply(kc, tmp_path, pod_yaml("failed", ["sh", "-c", "exit 2"], restart="Never"))
    apply(kc, tmp_path, pod_yaml("crasher", ["sh", "-c", "echo crashing in run $$; exit 3"]))
    apply(kc, tmp_path, pod_yaml("never-started", ["definitely-not-a-command-xyz"], restart="Never"))
    apply(kc, tmp_path, pod_yaml("pending", ["true"]).replace("spec:\n", "spec:\n  nodeSelector: {none: none}\n", 1))
    # Init containers run first, in order: the second sees what the first wrote in the pod's shared
    # directory (the process runtime's ../shared), and so does the container after them.
    init = ("  initContainers:\n"
            "  - {name: fetch, image: local/none, command: [sh, -c, 'echo fetched > ../shared/ready.txt']}\n"
            "  - {name: check, image: local/none, command: [sh, -c, 'test -f ../shared/ready.txt']}\n")
    apply(kc, tmp_path, pod_yaml("initialized", ["sh", "-c", "cat ../shared/ready.txt; exec sleep 600"])
          .replace("  containers:", init + "  containers:", 1))
    apply(kc, tmp_path, pod_yaml("init-fails", ["sh", "-c", "echo never; exec sleep 600"], restart="Never")
          .replace("  containers:", "  initContainers:\n  - {name: setup, image: local/none, command: [sh, -c, "
                   "'exit 4']}\n  containers:", 1))
    corral("apply", "-f", "-", kubeconfig=kc, stdin=json.dumps(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "no-agent"}}))
    wait_for(lambda: [phase(kc, n) for n in ("running", "succeeded", "failed", "never-started", "initialized",
                                             "init-fails")]
             == ["Running", "Succeeded", "Failed", "Failed", "Running", "Failed"], what="the pods to reach their states")
    wait_for(lambda: (pods(kc)["crasher"]["status"].get("containerStatuses") or [{}])[0].get("restartCount", 0) >= 1,
             what="the crasher to restart")


def test_every_kind_in_every_state_reads_through_the_clients_typed_models(cluster):
    kc = cluster.kubeconfig
    config = k8s.Configuration()
    k8s_config.load_kube_config(config_file=kc, client_configuration=config)
    with k8s.ApiClient(config) as api:
        core = k8s.CoreV1Api(api)
        listed = {p.metadata.name: p for p in core.list_namespaced_pod("default").items}
        assert set(listed) == {"running", "succeeded", "failed", "crasher", "never-started", "pending", "initialized",
                               "init-fails"}
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
    wait_for(lambda: "node-0" in corral("get", "leases", "-n", "kube-node-lease", kubeconfig=cluster.kubeconfig).stdout,
             what="the node's lease")
    lease = kubectl(cluster.kubeconfig, "describe", "node", "node-0").split("Lease:", 1)[1].split("\n\n", 1)[0]
    assert "HolderIdentity:  node-0" in lease and "RenewTime:" in lease and "Failed" not in lease, lease


def _table(text: str) -> dict[str, dict[str, str]]:
    """kubectl's printed table as {first cell: {HEADER: cell}}, split on the header's column starts."""
    header, *lines = text.rstrip("\n").split("\n")
    starts = [0] + [i for i in range(1, len(header)) if header[i] != " " and header[i - 2:i] == "  "]
    bounds = list(zip(starts, starts[1:] + [None]))
    names = [header[a:b].strip() for a, b in bounds]
    rows = {}
    for line in lines:
        cells = [line[a:b].strip() for a, b in bounds]
        rows[cells[0]] = dict(zip(names, cells))
    return rows


def test_kubectl_get_prints_kubernetes_columns_from_the_servers_tables(cluster):
    """Before server-side tables kubectl printed NAME and AGE only: no status, readiness or node."""
    kc = cluster.kubeconfig
    wait_for(lambda: _table(kubectl(kc, "get", "pods"))["crasher"]["STATUS"] in ("CrashLoopBackOff", "Error"),
             what="the crasher's status")
    pods_ = _table(kubectl(kc, "get", "pods", "-o", "wide"))
    assert list(pods_["running"]) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE",
                                      "READINESS GATES"]
    assert {k: pods_["running"][k] for k in ("READY", "STATUS", "RESTARTS", "NODE")} == {
        "READY": "1/1", "STATUS": "Running", "RESTARTS": "0", "NODE": "node-0"}
    assert pods_["succeeded"]["STATUS"] == "Completed" and pods_["succeeded"]["READY"] == "0/1"
    assert pods_["failed"]["STATUS"] == "Error"
    assert pods_["pending"]["STATUS"] == "Pending" and pods_["pending"]["NODE"] == "<none>"
    assert int(pods_["crasher"]["RESTARTS"].split()[0]) >= 1 and "ago)" in pods_["crasher"]["RESTARTS"]
    nodes = _table(kubectl(kc, "get", "nodes", "-o", "wide"))
    assert nodes["node-0"]["STATUS"] == "Ready" and nodes["node-0"]["VERSION"].startswith("v")
    assert nodes["node-0"]["OS-IMAGE"] != "<unknown>" and nodes["no-agent"]["STATUS"] == "Unknown"
    events = kubectl(kc, "get", "events")
    assert events.split("\n")[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert "pod/running" in events


def test_init_containers_run_in_order_before_the_containers_and_a_failed_one_fails_the_pod(cluster):
    """Before: initContainers were stored and silently skipped while the pod said Initialized."""
    kc = cluster.kubeconfig
    assert wait_for(lambda: "fetched" in corral("logs", "initialized", kubeconfig=kc).stdout)
    assert corral("logs", "initialized", "-c", "fetch", kubeconfig=kc).returncode == 0  # an init container's log
    done = pods(kc)["initialized"]["status"]
    assert [(s["name"], s["state"]["terminated"]["reason"]) for s in done["initContainerStatuses"]] == [
        ("fetch", "Completed"), ("check", "Completed")]
    failed = pods(kc)["init-fails"]
    assert failed["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 4
    assert "running" not in failed["status"]["containerStatuses"][0]["state"]  # the container never ran
    assert _table(kubectl(kc, "get", "pods"))["init-fails"]["STATUS"] == "Init:Error"
    config = k8s.Configuration()
    k8s_config.load_kube_config(config_file=kc, client_configuration=config)
    with k8s.ApiClient(config) as api:
        typed = k8s.CoreV1Api(api).read_namespaced_pod("initialized", "default")
        assert [s.name for s in typed.status.init_container_statuses] == ["fetch", "check"]


def test_logs_show_the_current_run_and_previous_the_one_before(cluster):
    """A crash-looping container's output per run, as kubectl logs and logs --previous show it: before,
    every run's output piled up in one log and the run before could not be asked for."""
    kc = cluster.kubeconfig
    wait_for(lambda: (pods(kc)["crasher"]["status"].get("containerStatuses") or [{}])[0].get("restartCount", 0) >= 2,
             what="the crasher's third run")
    previous = kubectl(kc, "logs", "crasher", "--previous")  # first: a restart meanwhile keeps the two apart
    current = corral("logs", "crasher", kubeconfig=kc).stdout
    assert current.count("crashing in run") == 1 and previous.count("crashing in run") == 1, (current, previous)
    assert current != previous
    assert corral("logs", "running", "--previous", kubeconfig=kc).stdout == ""  # it never restarted


def test_logs_since_is_refused_plainly_where_the_runtime_keeps_no_times(cluster):
    kc = cluster.kubeconfig
    proc = corral("logs", "running", "--since", "5m", kubeconfig=kc, check=False)
    assert proc.returncode == 1 and "--since is not available on this node" in proc.stderr, proc.stderr
    out = subprocess.run([KUBECTL, "--kubeconfig", kc, "logs", "running", "--since=5m"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0 and "(BadRequest)" in out.stderr and "not available on this node" in out.stderr
    bad = corral("logs", "running", "--since", "soon", kubeconfig=kc, check=False)
    assert bad.returncode == 1 and "is not a duration like 30s" in bad.stderr
