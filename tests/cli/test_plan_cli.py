"""`corral plan` and `corral apply --if-plan-version`, run as a user runs them, against a real
server process with its scheduler."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli import corral
from tests.scheduler.test_end_to_end import manifests, node, pod, wait_for


@pytest.fixture
def cluster(cluster_process, tmp_path):
    kc = cluster_process.kubeconfig
    zone = "topology.kubernetes.io/zone"
    corral("apply", "-f", manifests(tmp_path, node("node-a", **{zone: "a"}), node("node-b", **{zone: "b"})), kubeconfig=kc)
    return kc


def test_a_plan_that_places_everything_exits_0_and_says_where_and_why(cluster, tmp_path):
    path = manifests(tmp_path, pod("web-1", "500m"), pod("web-2", "500m"))
    proc = corral("plan", "-f", path, kubeconfig=cluster)
    out = proc.stdout
    assert proc.returncode == 0
    lines = out.splitlines()
    assert lines[0].startswith("Plan of 2 pod(s) against the cluster at revision ")
    header = next(line for line in lines if line.startswith("POD"))
    assert header.split() == ["POD", "FROM", "NODE", "SCORE", "WHY"]
    rows = {line.split()[0]: line for line in lines if line.startswith("default/")}
    assert set(rows) == {"default/web-1", "default/web-2"}
    nodes = {name: row.split()[3] for name, row in rows.items()}  # FROM is "Pod default/web-1": two words
    assert set(nodes.values()) == {"node-a", "node-b"}  # spread by the scores
    assert "2 pod(s) would be placed." in out
    assert corral("get", "pods", kubeconfig=cluster).stdout.strip() in ("", "No resources found in default namespace.")


def test_a_pod_that_fits_nowhere_exits_1_with_the_reason_and_the_nearest_misses(cluster, tmp_path):
    path = manifests(tmp_path, pod("huge", "3"), pod("small", "100m"))
    proc = corral("plan", "-f", path, kubeconfig=cluster, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "Would stay Pending (1):" in proc.stdout
    assert "default/huge (Pod default/huge): 0/2 nodes are available: 2 Insufficient cpu." in proc.stdout
    assert "    nearest: node-a lacks 1 cpu; node-b lacks 1 cpu" in proc.stdout
    assert "1 pod(s) would be placed, 1 would stay Pending." in proc.stdout
    report = json.loads(corral("plan", "-f", path, "-o", "json", kubeconfig=cluster, check=False).stdout)
    assert report["pending"] == 1
    added = corral("plan", "-f", path, "--add-nodes", "1x{cpu:8,memory:16Gi,labels:{zone:c}}", kubeconfig=cluster)
    assert "huge" in added.stdout and "plan-node-1" in added.stdout


def test_errors_exit_2_with_one_line_naming_the_file_document_and_field(cluster, tmp_path):
    bad = pod("bad", "100m")
    bad["spec"]["containers"][0].pop("image")
    path = manifests(tmp_path, pod("good", "100m"), bad)
    proc = corral("plan", "-f", path, kubeconfig=cluster, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {path}: document 2 (Pod bad): spec.containers[0].image: Required value")
    assert len(proc.stderr.splitlines()) == 1
    shape = corral("plan", "-f", manifests(tmp_path, pod("good", "100m")), "--add-nodes", "4x{cpu:8}",
                   kubeconfig=cluster, check=False)
    assert shape.returncode == 2
    assert shape.stderr.strip() == "error: PlanRequest is invalid: addNodes[0].memory: Required value" or \
        "addNodes[0].memory" in shape.stderr
    garbled = corral("plan", "-f", manifests(tmp_path, pod("good", "100m")), "--add-nodes", "four nodes",
                     kubeconfig=cluster, check=False)
    assert garbled.returncode == 2 and garbled.stderr.startswith("error: --add-nodes 'four nodes': expected COUNTx{")
    without = corral("plan", "-f", manifests(tmp_path, pod("good", "100m")), "--without-node", "node-b",
                     kubeconfig=cluster)
    zone_b = next(line for line in without.stdout.splitlines() if line.startswith("b "))
    assert zone_b.split()[1:3] == ["1", "->"] and zone_b.split()[3] == "0", without.stdout
    gone = corral("plan", "-f", manifests(tmp_path, pod("good", "100m")), "--without-node", "node-z",
                  kubeconfig=cluster, check=False)
    assert gone.returncode == 2 and "no node 'node-z' in the cluster" in gone.stderr


def test_apply_with_the_plan_version_applies_while_the_cluster_is_unchanged_and_refuses_after(cluster, tmp_path):
    first = manifests(tmp_path, pod("one", "100m"))
    version = json.loads(corral("plan", "-f", first, "-o", "json", kubeconfig=cluster).stdout)["planVersion"]
    assert corral("apply", "-f", first, "--if-plan-version", version, kubeconfig=cluster).stdout == "pod/one created\n"
    wait_for(lambda: "node-" in corral("get", "pods", "-o", "wide", kubeconfig=cluster).stdout, what="one bound")
    second = manifests(tmp_path, pod("two", "100m"))
    stale = version  # planned before "one" was bound: placement has changed since
    proc = corral("apply", "-f", second, "--if-plan-version", stale, kubeconfig=cluster, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: the cluster changed since the plan (plan version {stale}, now ")
    assert "two" not in corral("get", "pods", kubeconfig=cluster).stdout
