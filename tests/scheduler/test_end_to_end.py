"""The scheduler through the real server and the real CLI, as a user runs them."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time


from corral.testing import ServerProcess
from corral.testing.builders import make_node, make_pod
from corral.testing.process import child_env
from tests.cli.test_cli import CORRAL, corral


def manifests(tmp_path, *objs) -> str:
    path = tmp_path / f"objs-{time.monotonic_ns()}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objs)}))
    return str(path)


def node(name: str, **labels) -> dict:
    obj = make_node(name).capacity(cpu=2, memory="4Gi", pods=20).labels(**labels).obj
    obj.pop("kind"), obj.pop("apiVersion")
    return {"apiVersion": "v1", "kind": "Node", **obj}


def pod(name: str, cpu: str) -> dict:
    obj = make_pod(name).requests(cpu=cpu, memory="64Mi").obj
    obj["metadata"].pop("uid")
    obj.pop("status")
    return obj


def wait_for(predicate, timeout: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


async def _metrics(proc: ServerProcess) -> str:
    async with proc.client() as admin:
        return (await admin.request("GET", "/metrics")).decode()


def pod_nodes(kc: str) -> dict[str, str]:
    out = corral("get", "pods", "-o", "wide", kubeconfig=kc).stdout.splitlines()
    header = out[0].split()
    rows = [line.split() for line in out[1:]]
    return {r[0]: r[header.index("NODE")] for r in rows}


def place_four_pods_and_one_too_big(kc: str, tmp_path) -> None:
    """Two nodes of 2 cpu, four pods of 500m placed two on each, and "huge" (8 cpu) left pending."""
    corral("apply", "-f", manifests(tmp_path, node("node-a"), node("node-b")), kubeconfig=kc)
    corral("apply", "-f", manifests(tmp_path, *[pod(f"web-{i}", "500m") for i in range(4)], pod("huge", "8")),
           kubeconfig=kc)
    placed = wait_for(lambda: (lambda m: m if all(m[f"web-{i}"] != "<none>" for i in range(4)) else None)(
        pod_nodes(kc)), what="web pods to be placed")
    assert sorted(placed[f"web-{i}"] for i in range(4)) == ["node-a", "node-a", "node-b", "node-b"]
    assert placed["huge"] == "<none>"


def test_pods_applied_with_the_cli_are_placed_and_a_pod_too_big_is_explained(cluster_process, tmp_path):
    kc = cluster_process.kubeconfig
    place_four_pods_and_one_too_big(kc, tmp_path)
    statuses = {line.split()[0]: line.split()[2] for line in corral("get", "pods", kubeconfig=kc).stdout.splitlines()[1:]}
    assert statuses["web-0"] == "Scheduled" and statuses["huge"] == "Pending"

    message = "0/2 nodes are available: 2 Insufficient cpu."
    described = wait_for(lambda: (lambda out: out if message in out else None)(
        corral("describe", "pod", "huge", kubeconfig=kc).stdout), what="the FailedScheduling condition")
    assert "FailedScheduling" in described and "Unschedulable" in described

    explained = corral("explain", "pod", "huge", kubeconfig=kc).stdout
    assert message in explained
    assert "node-a   rejected" in explained and "NodeResourcesFit: Insufficient cpu" in explained
    # Each node has 2 cpu and holds two 500m pods: 7 cpu short of the 8 asked, both alike.
    assert "Nearest: node-a lacks 7 cpu; node-b lacks 7 cpu" in explained
    placed_text = corral("explain", "pod", "web-0", kubeconfig=kc).stdout
    assert re.search(r"^node-[ab] (wins by [\d.]+ over the runner-up, node-[ab] \(\d+(\.\d+)?\)\.|is tied with node-[ab]: "
                     r"the tie-break chose\.)$", placed_text, re.M), placed_text
    report = json.loads(corral("explain", "pod", "web-0", "-o", "json", kubeconfig=kc).stdout)
    assert report["runnerUp"]["node"] != report["chosen"]
    assert {n["node"] for n in report["nodes"]} == {"node-a", "node-b"}
    assert all(n["feasible"] and "NodeResourcesFit" in n["scores"] for n in report["nodes"])
    events = corral("events", kubeconfig=kc).stdout
    assert "Scheduled" in events and "Successfully assigned default/web-0 to" in events
    metrics = asyncio.run(_metrics(cluster_process))
    assert 'corral_scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 4.0' in metrics
    assert 'corral_scheduler_pending_pods{queue="unschedulable"} 1.0' in metrics
    assert "corral_scheduler_scheduling_attempt_duration_seconds_bucket" in metrics


def test_a_node_added_later_takes_the_pod_that_was_waiting(cluster_process, tmp_path):
    kc = cluster_process.kubeconfig
    corral("apply", "-f", manifests(tmp_path, node("small")), kubeconfig=kc)
    corral("apply", "-f", manifests(tmp_path, pod("needs-3", "3")), kubeconfig=kc)
    wait_for(lambda: "Insufficient cpu" in corral("describe", "pod", "needs-3", kubeconfig=kc).stdout)
    big = node("big")
    big["status"]["capacity"] = big["status"]["allocatable"] = {"cpu": "4", "memory": "8Gi", "pods": "20"}
    corral("apply", "-f", manifests(tmp_path, big), kubeconfig=kc)
    assert wait_for(lambda: pod_nodes(kc)["needs-3"] == "big" or None, what="the pod on the new node")


def test_the_scheduler_also_runs_as_its_own_process_over_http(tmp_path):
    """Under its own identity, system:kube-scheduler, with only the rights its default role grants."""
    with ServerProcess(str(tmp_path / "api"), "--no-scheduler") as api:
        corral("apply", "-f", manifests(tmp_path, node("n1")), kubeconfig=api.kubeconfig)
        corral("apply", "-f", manifests(tmp_path, pod("p1", "100m")), kubeconfig=api.kubeconfig)
        own = tmp_path / "scheduler.kubeconfig"
        own.write_text(corral("token", "create", "--user", "system:kube-scheduler", kubeconfig=api.kubeconfig).stdout)
        env = child_env({"KUBECONFIG": str(own)})
        proc = subprocess.Popen([CORRAL, "scheduler"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)
        try:
            assert wait_for(lambda: pod_nodes(api.kubeconfig)["p1"] == "n1" or None, what="p1 bound by the scheduler")
            # Explain from the CLI works without an in-process scheduler, computed locally.
            explained = corral("explain", "pod", "p1", kubeconfig=api.kubeconfig).stdout
            assert "n1" in explained and "1/1 nodes are available" in explained
        finally:
            proc.terminate()
            proc.wait(10)


def test_a_bad_scheduler_config_stops_the_server_with_the_setting_named(tmp_path):
    bad = tmp_path / "sched.yaml"
    bad.write_text("profiles:\n- plugins:\n    score:\n      enabled: [{name: NoSuchPlugin}]\n")
    proc = subprocess.run([CORRAL, "server", "--data-dir", str(tmp_path / "d"), "--address", "127.0.0.1:0",
                           "--scheduler-config", str(bad)], capture_output=True, text=True, timeout=30, env=child_env())
    assert proc.returncode == 1
    assert "unknown plugin 'NoSuchPlugin'" in proc.stderr and str(bad) in proc.stderr
