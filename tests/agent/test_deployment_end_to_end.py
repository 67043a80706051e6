"""Deployments on real agents, driven by a real kubectl as a user drives them: a rollout that never
has more than maxUnavailable pods down (checked on every watch event), undo, scale, orphaning
delete, and a lost node's replicas replaced on another node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

from corral.testing.cluster import LocalCluster, wait_for
from tests.agent.test_end_to_end import running_processes

KUBECTL = os.path.join(os.path.dirname(sys.executable), "kubectl")


def deployment_yaml(replicas: int, marker: str) -> str:
    return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  strategy: {{rollingUpdate: {{maxSurge: 1, maxUnavailable: 1}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: busybox
        command: ["sleep", "{marker}"]
"""


def kubectl(kc: str, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
    proc = subprocess.run([KUBECTL, "--kubeconfig", kc, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def web_pods(kc: str) -> list[dict]:
    return json.loads(kubectl(kc, "get", "pods", "-l", "app=web", "-o", "json"))["items"]


def ready(pod: dict) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or ())


class PodWatch:
    """``kubectl get pods --watch -o json``: after every event, how many pods exist and how many are ready."""

    def __init__(self, kc: str) -> None:
        self.proc = subprocess.Popen([KUBECTL, "--kubeconfig", kc, "get", "pods", "-l", "app=web", "--watch",
                                      "--output-watch-events", "-o", "json"], stdout=subprocess.PIPE, text=True)
        self.pods: dict[str, dict] = {}
        self.seen: list[tuple[int, int]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        decoder, buffer = json.JSONDecoder(), ""
        for line in self.proc.stdout:  # type: ignore[union-attr]
            buffer += line
            try:
                event, end = decoder.raw_decode(buffer.lstrip())
            except json.JSONDecodeError:
                continue
            buffer = buffer.lstrip()[end:]
            pod = event["object"]
            if event["type"] == "DELETED":
                self.pods.pop(pod["metadata"]["name"], None)
            else:
                self.pods[pod["metadata"]["name"]] = pod
            live = [p for p in self.pods.values() if not p["metadata"].get("deletionTimestamp")]
            self.seen.append((len(live), sum(1 for p in live if ready(p))))

    def stop(self) -> list[tuple[int, int]]:
        self.proc.terminate()
        self.proc.wait(10)
        self.thread.join(10)
        return self.seen


def test_a_deployment_rolls_out_undoes_and_scales_within_its_limits_with_kubectl(tmp_path):
    with LocalCluster(str(tmp_path / "c"), agents=2) as cluster:
        kc = cluster.kubeconfig
        kubectl(kc, "apply", "-f", "-", stdin=deployment_yaml(3, "7301"))
        kubectl(kc, "rollout", "status", "deployment/web", "--timeout=90s")
        assert running_processes("sleep 7301") == 3
        watch = PodWatch(kc)
        wait_for(lambda: len(watch.seen) >= 3, what="the watch's first events")
        start = len(watch.seen) - 1  # from the whole first listing on (its first events see part of it)
        kubectl(kc, "patch", "deployment", "web", "--type=json", "-p",
                '[{"op": "replace", "path": "/spec/template/spec/containers/0/command/1", "value": "7302"}]')
        kubectl(kc, "rollout", "status", "deployment/web", "--timeout=90s")
        seen = watch.stop()[start:]
        assert len(seen) > 6  # the rollout was watched
        assert max(total for total, _ in seen) <= 4  # replicas + maxSurge
        assert min(up for _, up in seen) >= 2  # replicas - maxUnavailable, at every event
        wait_for(lambda: running_processes("sleep 7302") == 3 and running_processes("sleep 7301") == 0,
                 what="the new pods running, the old ones stopped")
        history = kubectl(kc, "rollout", "history", "deployment/web")
        assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]

        kubectl(kc, "rollout", "undo", "deployment/web")
        kubectl(kc, "rollout", "status", "deployment/web", "--timeout=90s")
        assert {p["spec"]["containers"][0]["command"][1] for p in web_pods(kc) if ready(p)} == {"7301"}
        wait_for(lambda: running_processes("sleep 7301") == 3, what="the first template's pods back")

        kubectl(kc, "scale", "deployment/web", "--replicas=5")
        kubectl(kc, "rollout", "status", "deployment/web", "--timeout=90s")
        assert "5/5" in kubectl(kc, "get", "deployment", "web")

        # Orphaned: the Deployment goes; its ReplicaSets stay, owned by nobody, and keep their pods.
        kubectl(kc, "delete", "deployment", "web", "--cascade=orphan")
        wait_for(lambda: "web" not in kubectl(kc, "get", "deployments"), what="the Deployment gone")
        sets = json.loads(kubectl(kc, "get", "replicasets", "-o", "json"))["items"]
        wait_for(lambda: all(not rs["metadata"].get("ownerReferences") for rs in
                             json.loads(kubectl(kc, "get", "replicasets", "-o", "json"))["items"]),
                 what="the ReplicaSets released")
        assert len(sets) == 2  # undo brought the first ReplicaSet back: no third one
        assert len([p for p in web_pods(kc) if ready(p)]) == 5


def test_a_lost_nodes_replicas_are_replaced_on_another_node(tmp_path):
    with LocalCluster(str(tmp_path / "c"), agents=2, grace=5, eviction=4) as cluster:
        kc = cluster.kubeconfig
        kubectl(kc, "apply", "-f", "-", stdin=deployment_yaml(2, "7311"))
        kubectl(kc, "rollout", "status", "deployment/web", "--timeout=90s")
        before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in web_pods(kc)}
        victim = sorted(before.values())[0]
        lost = {name for name, node in before.items() if node == victim}
        cluster.kill_agent(int(victim.split("-")[1]))

        def replaced() -> bool:
            now = [p for p in web_pods(kc) if ready(p)]
            return (len(now) == 2 and not lost & {p["metadata"]["name"] for p in now}
                    and all(p["spec"]["nodeName"] != victim for p in now))

        wait_for(replaced, timeout=60, what="the lost node's replicas replaced on the other node")
        assert "2/2" in kubectl(kc, "get", "deployment", "web")


SERVING = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  strategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: python:3.11-slim
        command: ["sh", "-c", "mkdir -p www && echo $VERSION > www/index.html && exec python3 -m http.server 18200 --bind $HOST_IP --directory www"]
        env:
        - {name: HOST_IP, valueFrom: {fieldRef: {fieldPath: status.hostIP}}}
        - {name: VERSION, value: "%s"}
        ports: [{containerPort: 18200, hostPort: 18200}]
        readinessProbe: {httpGet: {path: /, port: 18200}, periodSeconds: 1}
"""


def test_a_rollout_keeps_replicas_minus_max_unavailable_serving_http_on_their_host_ports(tmp_path):
    """Three web pods on three nodes (each node its own address, the same hostPort on each), rolled
    out to a new template: at every moment at least two answer HTTP, as maxUnavailable 1 promises."""
    import urllib.request

    def answering(addresses: list[str]) -> int:
        count = 0
        for address in addresses:
            try:
                with urllib.request.urlopen(f"http://{address}:18200/", timeout=0.5):
                    count += 1
            except OSError:
                pass
        return count

    with LocalCluster(str(tmp_path / "c"), agents=3, own_addresses=True) as cluster:
        kc = cluster.kubeconfig
        addresses = [cluster.address(i) for i in range(3)]
        kubectl(kc, "apply", "-f", "-", stdin=SERVING % "1")
        kubectl(kc, "rollout", "status", "deployment/web", "--timeout=90s")
        assert sorted(p["spec"]["nodeName"] for p in web_pods(kc)) == ["node-0", "node-1", "node-2"]
        assert answering(addresses) == 3
        seen: list[int] = []
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                seen.append(answering(addresses))

        poller = threading.Thread(target=watch, daemon=True)
        poller.start()
        kubectl(kc, "apply", "-f", "-", stdin=SERVING % "2")
        kubectl(kc, "rollout", "status", "deployment/web", "--timeout=120s")
        done.set()
        poller.join(10)
        assert len(seen) > 10 and min(seen) >= 2, seen  # replicas - maxUnavailable, all along
        assert 2 in seen  # and a pod was replaced meanwhile: the check could fail
        assert {c["value"] for p in web_pods(kc) if ready(p) for c in p["spec"]["containers"][0]["env"]
                if c["name"] == "VERSION"} == {"2"}
