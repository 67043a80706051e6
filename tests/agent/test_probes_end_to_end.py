"""Probes on a real agent (process runtime): a container whose liveness probe starts failing is
killed and restarted, with events saying why; a pod is Ready only once its readiness probe passes,
and its Deployment counts it available only then; liveness waits for the startup probe."""

from __future__ import annotations

import json

from corral.testing.cluster import LocalCluster, wait_for
from tests.agent.test_deployment_end_to_end import kubectl

PODS = """apiVersion: v1
kind: Pod
metadata: {name: live}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "touch alive; sleep 2; rm alive; exec sleep 3600"]
    livenessProbe: {exec: {command: ["test", "-e", "alive"]}, periodSeconds: 1, failureThreshold: 2}
---
apiVersion: v1
kind: Pod
metadata: {name: gate}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: python:3.11-slim
    command: ["sh", "-c", "sleep 3; exec python3 -m http.server 18091"]
    ports: [{containerPort: 18091, name: web}]
    startupProbe: {tcpSocket: {port: web}, periodSeconds: 1, failureThreshold: 30}
    readinessProbe: {httpGet: {path: /, port: 18091}, periodSeconds: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: held}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: python:3.11-slim
    command: ["sh", "-c", "sleep 4; exec python3 -m http.server 18092"]
    ports: [{containerPort: 18092}]
    startupProbe: {tcpSocket: {port: 18092}, periodSeconds: 1, failureThreshold: 30}
    livenessProbe: {exec: {command: ["false"]}, periodSeconds: 1, failureThreshold: 1}
"""

UNREADY = """apiVersion: apps/v1
kind: Deployment
metadata: {name: unready}
spec:
  replicas: 1
  selector: {matchLabels: {app: unready}}
  template:
    metadata: {labels: {app: unready}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: busybox
        command: ["sleep", "3600"]
        readinessProbe: {exec: {command: ["false"]}, periodSeconds: 1}
"""


def pod(kc: str, name: str) -> dict:
    return json.loads(kubectl(kc, "get", "pod", name, "-o", "json"))


def condition(p: dict, kind: str) -> str:
    return next((c["status"] for c in p["status"].get("conditions") or () if c["type"] == kind), "")


def events(kc: str, name: str) -> str:
    return kubectl(kc, "get", "events", "--field-selector", f"involvedObject.name={name}")


def test_liveness_restarts_readiness_gates_and_startup_holds_liveness_back(tmp_path):
    with LocalCluster(str(tmp_path / "c"), agents=1) as cluster:
        kc = cluster.kubeconfig
        kubectl(kc, "apply", "-f", "-", stdin=PODS)
        kubectl(kc, "apply", "-f", "-", stdin=UNREADY)

        # gate: not started and not ready until its server listens, then both
        wait_for(lambda: pod(kc, "gate")["status"].get("phase") == "Running", what="gate running")
        early = pod(kc, "gate")
        assert condition(early, "Ready") == "False" and not early["status"]["containerStatuses"][0]["started"]
        # held: its liveness probe fails at once, but is not run before the startup probe passes
        assert pod(kc, "held")["status"]["containerStatuses"][0]["restartCount"] == 0
        kubectl(kc, "wait", "--for=condition=Ready", "pod/gate", "--timeout=30s")
        ready = pod(kc, "gate")["status"]["containerStatuses"][0]
        assert ready["ready"] and ready["started"] and ready["restartCount"] == 0

        # live: its file goes after 2 s, two failed probes later it is killed and started again
        wait_for(lambda: pod(kc, "live")["status"]["containerStatuses"][0]["restartCount"] >= 1, timeout=30,
                 what="the container restarted by its liveness probe")
        said = events(kc, "live")
        assert "Liveness probe failed" in said and "failed liveness probe, will be restarted" in said, said

        # a Deployment whose pod never passes its readiness probe: running, never ready nor available
        (unready,) = json.loads(kubectl(kc, "get", "pods", "-l", "app=unready", "-o", "json"))["items"]
        wait_for(lambda: "Readiness probe failed" in events(kc, unready["metadata"]["name"]),
                 what="the readiness probe failing")
        status = json.loads(kubectl(kc, "get", "deployment", "unready", "-o", "json"))["status"]
        assert status.get("readyReplicas", 0) == 0 and status.get("availableReplicas", 0) == 0, status
        unready = pod(kc, unready["metadata"]["name"])
        assert unready["status"]["phase"] == "Running" and condition(unready, "Ready") == "False"

        held = wait_for(lambda: (p := pod(kc, "held"))["status"]["containerStatuses"][0]["restartCount"] >= 1
                        and p, timeout=30, what="held killed once started (its liveness probe fails)")
        assert "Liveness probe failed" in events(kc, "held")
        assert held["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] != 0
