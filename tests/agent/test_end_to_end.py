"""A real cluster on this machine: the server, three agents (process runtime), the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.request

import pytest

from corral.testing.cluster import LocalCluster, wait_for
from tests.cli.test_cli import corral

HERE = os.path.dirname(__file__)


def pods(kc: str) -> dict[str, dict]:
    out = json.loads(corral("get", "pods", "-o", "json", kubeconfig=kc).stdout)
    return {p["metadata"]["name"]: p for p in out["items"]}


def phase(kc: str, name: str) -> str | None:
    return (pods(kc).get(name) or {}).get("status", {}).get("phase")


def apply(kc: str, tmp_path, text: str) -> None:
    path = tmp_path / f"m{abs(hash(text))}.yaml"
    path.write_text(text)
    corral("apply", "-f", str(path), kubeconfig=kc)


def pod_yaml(name: str, command: list[str], *, restart: str = "Always", port: int | None = None,
             containers: int = 1) -> str:
    ports = f"\n    ports: [{{containerPort: {port}, hostPort: {port}}}]" if port else ""
    spec = "".join(
        f"\n  - name: c{i}\n    image: local/none\n    command: {json.dumps(command)}{ports if i == 0 else ''}"
        f"\n    resources: {{requests: {{cpu: 50m, memory: 32Mi}}}}" for i in range(containers))
    return f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  restartPolicy: {restart}\n  containers:{spec}\n"


def running_processes(marker: str) -> int:
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    return len(out.split())


@contextlib.contextmanager
def local_cluster(tmp_path, agents: int):
    """A LocalCluster under ``tmp_path`` once every agent has registered its node."""
    with LocalCluster(str(tmp_path / "cluster"), agents=agents) as c:
        wait_for(lambda: len(json.loads(corral("get", "nodes", "-o", "json", kubeconfig=c.kubeconfig).stdout)["items"])
                 == agents, what=f"{agents} nodes")
        yield c


@pytest.fixture
def cluster(tmp_path):
    with local_cluster(tmp_path, 3) as c:
        yield c


def test_pods_run_do_their_work_log_and_leave_nothing_behind_when_deleted(cluster, tmp_path):
    kc = cluster.kubeconfig
    apply(kc, tmp_path, pod_yaml("web", ["python3", "-m", "http.server", "18765"], port=18765))
    apply(kc, tmp_path, pod_yaml("pair", ["sh", "-c", "echo hello from $POD_NAME; exec sleep 600"], containers=2))
    wait_for(lambda: phase(kc, "web") == "Running" and phase(kc, "pair") == "Running", what="pods Running")
    body = wait_for(lambda: _http("http://127.0.0.1:18765/"), what="the web pod to answer")
    assert b"Directory listing" in body
    assert wait_for(lambda: "hello from pair" in corral("logs", "pair", "-c", "c1", kubeconfig=kc).stdout)
    assert "GET / HTTP" in corral("logs", "web", kubeconfig=kc).stdout
    table = corral("get", "pods", "-o", "wide", kubeconfig=kc).stdout
    assert "Running" in table and "node-" in table
    corral("delete", "pod", "web", "pair", kubeconfig=kc)
    wait_for(lambda: not pods(kc), what="the records to go")
    wait_for(lambda: running_processes("http.server 18765") == 0, what="the web process to stop")
    wait_for(lambda: running_processes("sleep 600") == 0, what="both containers of the pair to stop")


def test_a_pod_that_ignores_sigterm_deleted_again_with_less_time_is_killed_then(tmp_path):
    with local_cluster(tmp_path, 1) as c:
        kc = c.kubeconfig
        apply(kc, tmp_path, pod_yaml("stubborn", ["sh", "-c", "trap '' TERM; exec sleep 601"])
              + "  terminationGracePeriodSeconds: 300\n")
        wait_for(lambda: phase(kc, "stubborn") == "Running", what="the pod to run")
        corral("delete", "pod", "stubborn", kubeconfig=kc)
        wait_for(lambda: phase(kc, "stubborn") == "Terminating", what="the pod to be Terminating")
        time.sleep(1.5)  # its SIGTERM, ignored: it goes on for its 300 s
        assert running_processes("sleep 601") == 1 and phase(kc, "stubborn") == "Terminating"
        corral("delete", "pod", "stubborn", "--grace-period=1", kubeconfig=kc)
        wait_for(lambda: not pods(kc), timeout=15, what="the record to go within seconds, not 300")
        assert running_processes("sleep 601") == 0


def test_the_readmes_two_container_example_shares_its_pods_directory(cluster):
    """examples/multi-container-pod.yaml as `make up` runs it: the reader follows what the writer writes
    (the pods run as an unprivileged user, so the common directory must be theirs)."""
    kc = cluster.kubeconfig
    corral("apply", "-f", os.path.join(HERE, "..", "..", "examples", "multi-container-pod.yaml"), kubeconfig=kc)
    wait_for(lambda: "tick 2" in corral("logs", "pair", "-c", "reader", kubeconfig=kc).stdout,
             what="the reader to show the writer's ticks")
    status = pods(kc)["pair"]["status"]
    assert all(c.get("restartCount", 0) == 0 for c in status["containerStatuses"]), status


def _http(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.read()
    except OSError:
        return None


def test_failures_are_reported_in_words_a_user_understands(cluster, tmp_path):
    kc = cluster.kubeconfig
    apply(kc, tmp_path, pod_yaml("no-such-command", ["definitely-not-a-command-xyz"], restart="Never"))
    apply(kc, tmp_path, pod_yaml("crasher", ["sh", "-c", "echo crashing; exit 3"]))
    apply(kc, tmp_path, pod_yaml("exits-2", ["sh", "-c", "exit 2"], restart="Never"))
    wait_for(lambda: phase(kc, "no-such-command") == "Failed", what="the missing command to fail the pod")
    described = corral("describe", "pod", "no-such-command", kubeconfig=kc).stdout
    assert "StartError" in described and "executable file not found" in described
    wait_for(lambda: phase(kc, "exits-2") == "Failed")
    assert "exit code 2" in pods(kc)["exits-2"]["status"]["message"]
    restarts = wait_for(lambda: (lambda cs: cs[0]["restartCount"] if cs and cs[0]["restartCount"] >= 2 else None)(
        pods(kc)["crasher"]["status"].get("containerStatuses")), what="restarts to grow")
    assert restarts >= 2
    wait_for(lambda: any(line.startswith("crasher") and "CrashLoopBackOff" in line
                         for line in corral("get", "pods", kubeconfig=kc).stdout.splitlines()),
             what="get pods to show CrashLoopBackOff")
    described = corral("describe", "pod", "crasher", kubeconfig=kc).stdout
    assert "BackOff" in described and "Restart Count:" in described


def test_drain_moves_pods_to_the_other_nodes(cluster, tmp_path):
    kc = cluster.kubeconfig
    for i in range(4):
        apply(kc, tmp_path, pod_yaml(f"d{i}", ["sleep", "600"]))
    wait_for(lambda: all(phase(kc, f"d{i}") == "Running" for i in range(4)), what="pods Running")
    victim = pods(kc)["d0"]["spec"]["nodeName"]
    out = corral("drain", victim, kubeconfig=kc).stdout
    assert f"node/{victim} drained" in out
    wait_for(lambda: all(p["spec"].get("nodeName") not in (None, victim) and p["status"].get("phase") == "Running"
                         for p in pods(kc).values()), what="pods Running elsewhere")
    assert "SchedulingDisabled" in corral("get", "nodes", kubeconfig=kc).stdout


def test_a_lost_node_s_pods_are_marked_then_placed_elsewhere_and_never_run_twice_once_it_returns(tmp_path):
    # Grace 5 s with 1 s heartbeats: short, yet not on the edge when the machine is loaded.
    with LocalCluster(str(tmp_path / "c"), agents=3, grace=5, eviction=4) as cluster:
        kc = cluster.kubeconfig
        wait_for(lambda: len(json.loads(corral("get", "nodes", "-o", "json", kubeconfig=kc).stdout)["items"]) == 3)
        for i in range(6):
            apply(kc, tmp_path, pod_yaml(f"job-{i}", ["sleep", f"{7100 + i}"]))
        wait_for(lambda: all(phase(kc, f"job-{i}") == "Running" for i in range(6)), what="pods Running")
        victim = pods(kc)["job-0"]["spec"]["nodeName"]
        index = int(victim.split("-")[1])
        moved = sorted(n for n, p in pods(kc).items() if p["spec"]["nodeName"] == victim)
        cluster.kill_agent(index)

        # 1. NotReady: the node is tainted, and its pods say so.
        def marked():
            ps = pods(kc)
            return all(any(c["type"] == "NotReadyAt" for c in ps[n]["status"].get("conditions", ())) for n in moved)
        wait_for(marked, timeout=20, what="NotReadyAt on the lost node's pods")
        assert "NotReady" in corral("get", "nodes", kubeconfig=kc).stdout
        # 2. Evicted and placed elsewhere, Running.
        wait_for(lambda: all(pods(kc)[n]["spec"].get("nodeName") not in (None, victim)
                             and pods(kc)[n]["status"].get("phase") == "Running" for n in moved),
                 timeout=30, what="the lost node's pods Running elsewhere")
        events = corral("events", kubeconfig=kc).stdout
        assert "NodeLost" in events
        # 3. The agent returns: it stops its stale copies; every pod runs exactly once.
        cluster.start_agent(index)
        for i in range(6):
            wait_for(lambda i=i: running_processes(f"sleep {7100 + i}") == 1, timeout=20,
                     what=f"job-{i} to run exactly once")
        wait_for(lambda: "NotReady" not in corral("get", "nodes", kubeconfig=kc).stdout, what="the node Ready again")
        assert all(p["status"]["phase"] == "Running" for p in pods(kc).values())
