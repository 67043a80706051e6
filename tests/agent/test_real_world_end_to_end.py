"""examples/real-world/: manifests written the way public charts write them (a ConfigMap, a Secret,
a Deployment with probes, envFrom, a mounted ConfigMap item and fields corral does not act on, a
migration Job) apply and run unchanged with kubectl; what corral keeps without acting on it is
named in a Warning."""

from __future__ import annotations

import os
import subprocess
import urllib.request

from corral.testing.cluster import LocalCluster, wait_for
from tests.agent.test_deployment_end_to_end import KUBECTL, kubectl

FOLDER = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "real-world")


def served() -> str:
    try:
        with urllib.request.urlopen("http://127.0.0.1:18080/settings.yaml", timeout=2) as resp:
            return resp.read().decode()
    except OSError:
        return ""


def test_chart_style_manifests_apply_and_run_unchanged(tmp_path):
    with LocalCluster(str(tmp_path / "c"), agents=1) as cluster:
        kc = cluster.kubeconfig
        applied = subprocess.run([KUBECTL, "--kubeconfig", kc, "apply", "-f", FOLDER], capture_output=True,
                                 text=True, timeout=60)
        assert applied.returncode == 0, applied.stderr
        for made in ("configmap/shop-config", "secret/shop-secret", "deployment.apps/shop-web", "job.batch/shop-migrate"):
            assert f"{made} created" in applied.stdout, applied.stdout
        warned = applied.stderr
        assert "spec.template.spec.containers[0].securityContext" in warned and "does not act on it" in warned, warned
        assert "spec.template.spec.serviceAccountName" in warned, warned

        kubectl(kc, "rollout", "status", "deployment/shop-web", "--timeout=90s")
        wait_for(lambda: "listen: 0.0.0.0:18080" in served(), what="the mounted ConfigMap item served")
        kubectl(kc, "wait", "--for=condition=complete", "job/shop-migrate", "--timeout=60s")
        assert "migrating postgres://shop@db:5432/shop as 12-character password" in kubectl(kc, "logs", "job/shop-migrate")
        pod = kubectl(kc, "get", "pods", "-l", "app.kubernetes.io/component=web", "-o", "name").split()[0]
        env = kubectl(kc, "exec", pod, "--", "sh", "-c", "echo $LOG_LEVEL $FEATURE_FLAGS $MEMORY_LIMIT_MB $POD_NAME")
        assert env.split() == ["info", "search,reviews", "256", pod.split("/")[1]], env
        kubectl(kc, "delete", "-f", FOLDER)
