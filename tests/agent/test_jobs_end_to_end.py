"""Jobs and CronJobs on a real agent, driven by kubectl: a Job that completes, an Indexed Job whose
pods each see their index, a failing Job that ends Failed after backoffLimit + 1 tries, and a
CronJob every minute (real time) that makes its Jobs."""

from __future__ import annotations

import json

from corral.testing.cluster import LocalCluster, wait_for
from tests.agent.test_deployment_end_to_end import kubectl

FAILING = """apiVersion: batch/v1
kind: Job
metadata: {name: failing}
spec:
  backoffLimit: 2
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - {name: c, image: busybox, command: ["sh", "-c", "echo trying; exit 3"]}
"""

INDEXED = """apiVersion: batch/v1
kind: Job
metadata: {name: shards}
spec:
  completions: 3
  parallelism: 3
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: c, image: busybox, command: ["sh", "-c", "echo shard $JOB_COMPLETION_INDEX"]}
"""


def pods_of(kc: str, job: str) -> list[dict]:
    return json.loads(kubectl(kc, "get", "pods", "-l", f"batch.kubernetes.io/job-name={job}", "-o", "json"))["items"]


def test_jobs_complete_fail_after_their_backoff_limit_and_cronjobs_make_theirs(tmp_path):
    with LocalCluster(str(tmp_path / "c"), agents=1) as cluster:
        kc = cluster.kubeconfig
        # kubectl create sends protobuf for both
        kubectl(kc, "create", "cronjob", "tick", "--image=busybox", "--schedule=* * * * *", "--", "sh", "-c", "echo tick")
        kubectl(kc, "apply", "-f", "-", stdin=FAILING)
        kubectl(kc, "create", "job", "once", "--image=busybox", "--", "sh", "-c", "echo done")
        kubectl(kc, "apply", "-f", "-", stdin=INDEXED)

        kubectl(kc, "wait", "--for=condition=complete", "job/once", "--timeout=60s")
        assert "done" in kubectl(kc, "logs", "job/once")
        assert "Complete   1/1" in kubectl(kc, "get", "job", "once")

        kubectl(kc, "wait", "--for=condition=complete", "job/shards", "--timeout=60s")
        shards = sorted(kubectl(kc, "logs", p["metadata"]["name"]).strip() for p in pods_of(kc, "shards"))
        assert shards == ["shard 0", "shard 1", "shard 2"]
        assert json.loads(kubectl(kc, "get", "job", "shards", "-o", "json"))["status"]["completedIndexes"] == "0-2"

        kubectl(kc, "wait", "--for=condition=failed", "job/failing", "--timeout=120s")
        tries = pods_of(kc, "failing")
        assert len(tries) == 3 and all(p["status"]["phase"] == "Failed" for p in tries)  # 1 + backoffLimit 2
        failed = json.loads(kubectl(kc, "get", "job", "failing", "-o", "json"))["status"]
        assert failed["failed"] == 3 and [c["reason"] for c in failed["conditions"]] == ["BackoffLimitExceeded"]

        made = wait_for(lambda: [j for j in json.loads(kubectl(kc, "get", "jobs", "-o", "json"))["items"]
                                 if j["metadata"]["name"].startswith("tick-")], timeout=90, what="the CronJob's Job")
        kubectl(kc, "wait", "--for=condition=complete", f"job/{made[0]['metadata']['name']}", "--timeout=60s")
        row = kubectl(kc, "get", "cronjob", "tick").splitlines()[1]
        assert "* * * * *" in row and row.split()[-2] != "<none>", row  # LAST SCHEDULE: when it last ran
