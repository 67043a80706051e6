"""Preemption in a real cluster: the server, an agent running real processes, the CLI."""

from __future__ import annotations

import json

from corral.testing.cluster import LocalCluster, wait_for
from tests.agent.test_end_to_end import apply, pods
from tests.cli.test_cli import corral

CLASSES = "\n---\n".join(
    f"apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\nvalue: {value}"
    for name, value in (("batch", 1), ("standard", 10), ("important", 100), ("urgent", 1000)))


def pod(name: str, priority_class: str, cpu: str, *, stubborn: bool = False) -> str:
    # A stubborn pod ignores SIGTERM: it stays Terminating for its grace period, long enough to read
    # what preemption wrote on it.
    script = "trap '' TERM; while true; do sleep 1; done" if stubborn else "while true; do sleep 1; done"
    return (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  priorityClassName: {priority_class}\n"
            f"  terminationGracePeriodSeconds: 4\n  containers:\n  - name: main\n    image: local/none\n"
            f"    command: [sh, -c, {json.dumps(script)}]\n    resources: {{requests: {{cpu: {cpu}, memory: 32Mi}}}}\n")


def test_a_high_priority_pod_preempts_exactly_the_least_important_pod_it_needs_gone_and_runs(tmp_path):
    with LocalCluster(str(tmp_path / "c"), agents=1, agent_args=("--capacity", "cpu=1,memory=2Gi,pods=20")) as c:
        kc = c.kubeconfig
        wait_for(lambda: "node-0" in corral("get", "nodes", kubeconfig=kc).stdout, what="the node")
        apply(kc, tmp_path, CLASSES)
        apply(kc, tmp_path, "\n---\n".join([pod("keep-important", "important", "300m"),
                                            pod("keep-standard", "standard", "300m"),
                                            pod("batch", "batch", "300m", stubborn=True)]))
        wait_for(lambda: all((p.get("status") or {}).get("phase") == "Running" for p in pods(kc).values())
                 and len(pods(kc)) == 3, what="three running pods")

        # 100m is free; the urgent pod needs 400m: removing the batch pod (the least important) is enough.
        apply(kc, tmp_path, pod("urgent", "urgent", "400m"))
        victim = wait_for(lambda: (lambda p: p if (p.get("metadata") or {}).get("deletionTimestamp") else None)(
            pods(kc).get("batch") or {}), what="the batch pod to be preempted")
        (target,) = [cond for cond in victim["status"]["conditions"] if cond["type"] == "DisruptionTarget"]
        assert (target["status"], target["reason"], target["message"]) == (
            "True", "PreemptionByScheduler", "default-scheduler: preempting to accommodate a higher priority pod")
        assert pods(kc)["urgent"]["status"].get("nominatedNodeName") == "node-0"

        wait_for(lambda: (pods(kc).get("urgent") or {}).get("status", {}).get("phase") == "Running",
                 timeout=30, what="the urgent pod running")
        now = pods(kc)
        assert "batch" not in now
        assert {name: p["status"]["phase"] for name, p in now.items()} == {
            "keep-important": "Running", "keep-standard": "Running", "urgent": "Running"}
        assert now["urgent"]["spec"]["nodeName"] == "node-0"
        events = corral("get", "events", kubeconfig=kc).stdout
        assert "Preempted by default/urgent on node node-0" in events
        assert "preemption: node node-0 nominated, preempting 1 pod(s) of lower priority: default/batch." in events
