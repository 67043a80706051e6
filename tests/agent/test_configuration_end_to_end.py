"""ConfigMaps and Secrets reaching real processes, driven by kubectl: environment variables from
keys and whole objects, files that follow their ConfigMap while the pod runs, a Secret's mode, an
emptyDir two containers share, and a pod waiting (CreateContainerConfigError) until its Secret
exists."""

from __future__ import annotations

import json
import time

from corral.testing.cluster import LocalCluster, wait_for
from tests.agent.test_deployment_end_to_end import kubectl

CONFIG = """apiVersion: v1
kind: ConfigMap
metadata: {name: app-config}
data:
  greeting: hello
  mode: fast
---
apiVersion: v1
kind: Secret
metadata: {name: app-secret}
stringData:
  password: s3cret
"""

POD = """apiVersion: v1
kind: Pod
metadata: {name: app}
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - {name: config, configMap: {name: app-config}}
  - {name: secret, secret: {secretName: app-secret, defaultMode: 0400}}
  - {name: scratch, emptyDir: {}}
  containers:
  - name: app
    image: busybox
    command: ["sh", "-c", "echo env=$GREETING/$PASSWORD/$CFG_mode/$NS; echo mode=$(stat -L -c %a etc/secret/password); echo note > scratch/note; while true; do echo file=$(cat etc/app/greeting); sleep 0.3; done"]
    env:
    - {name: GREETING, valueFrom: {configMapKeyRef: {name: app-config, key: greeting}}}
    - {name: PASSWORD, valueFrom: {secretKeyRef: {name: app-secret, key: password}}}
    - {name: NS, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
    envFrom:
    - {prefix: CFG_, configMapRef: {name: app-config}}
    volumeMounts:
    - {name: config, mountPath: /etc/app}
    - {name: secret, mountPath: /etc/secret}
    - {name: scratch, mountPath: /scratch}
  - name: reader
    image: busybox
    command: ["sh", "-c", "while ! test -e data/note; do sleep 0.2; done; echo shared=$(cat data/note); sleep 3600"]
    volumeMounts:
    - {name: scratch, mountPath: /data}
"""

WAITING = """apiVersion: v1
kind: Pod
metadata: {name: waiting}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "echo token=$TOKEN; sleep 3600"]
    env:
    - {name: TOKEN, valueFrom: {secretKeyRef: {name: late, key: token}}}
"""


def logs(kc: str, pod: str, container: str) -> str:
    return kubectl(kc, "logs", pod, "-c", container)


def waiting_reason(kc: str, pod: str) -> str:
    status = json.loads(kubectl(kc, "get", "pod", pod, "-o", "json"))["status"]
    states = [c.get("state", {}).get("waiting", {}) for c in status.get("containerStatuses") or ()]
    return " ".join(f"{w.get('reason')}: {w.get('message')}" for w in states if w)


def test_configmaps_and_secrets_reach_processes_as_variables_and_files_that_follow_updates(tmp_path):
    with LocalCluster(str(tmp_path / "c"), agents=1, agent_args=("--config-sync-period", "1")) as cluster:
        kc = cluster.kubeconfig
        kubectl(kc, "apply", "-f", "-", stdin=CONFIG)
        kubectl(kc, "apply", "-f", "-", stdin=POD)
        kubectl(kc, "wait", "--for=condition=Ready", "pod/app", "--timeout=60s")
        wait_for(lambda: "file=hello" in logs(kc, "app", "app"), what="the file's first content")
        out = logs(kc, "app", "app")
        assert "env=hello/s3cret/fast/default" in out, out
        assert "mode=400" in out, out
        wait_for(lambda: "shared=note" in logs(kc, "app", "reader"), what="the emptyDir shared")

        kubectl(kc, "patch", "configmap", "app-config", "-p", '{"data": {"greeting": "bonjour"}}')
        changed = time.monotonic()
        wait_for(lambda: "file=bonjour" in logs(kc, "app", "app"), timeout=20, what="the file updated in place")
        assert time.monotonic() - changed < 10  # within a few sync periods (1 s here)
        assert "env=hello/" in logs(kc, "app", "app")  # variables are fixed at start, as in Kubernetes

        kubectl(kc, "apply", "-f", "-", stdin=WAITING)
        wait_for(lambda: "CreateContainerConfigError" in waiting_reason(kc, "waiting"), what="the pod waiting")
        assert 'secret "late" not found' in waiting_reason(kc, "waiting")
        kubectl(kc, "create", "secret", "generic", "late", "--from-literal=token=t0k3n")
        wait_for(lambda: "token=t0k3n" in logs(kc, "waiting", "c"), timeout=60, what="the pod started once it exists")


def test_the_configured_example_serves_its_configmap_and_follows_its_edits(tmp_path):
    """examples/configured.yaml as the README runs it."""
    import os
    import urllib.request

    def page() -> str:
        try:
            with urllib.request.urlopen("http://127.0.0.1:8081/", timeout=2) as resp:
                return resp.read().decode()
        except OSError:
            return ""

    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "configured.yaml")
    with LocalCluster(str(tmp_path / "c"), agents=1, agent_args=("--config-sync-period", "1")) as cluster:
        kc = cluster.kubeconfig
        out = kubectl(kc, "apply", "-f", example)
        assert "configmap/site created" in out and "secret/site-token created" in out and "pod/site created" in out
        wait_for(lambda: "hello from a ConfigMap" in page(), timeout=60, what="the page served")
        assert "token has 16 characters" in kubectl(kc, "logs", "site")
        kubectl(kc, "patch", "configmap", "site", "-p", '{"data": {"index.html": "<h1>edited</h1>"}}')
        wait_for(lambda: "edited" in page(), timeout=20, what="the edited page served")
        kubectl(kc, "delete", "-f", example)
