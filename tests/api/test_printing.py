"""kubectl's columns computed as Kubernetes' printers compute them: ages, a pod's status and
readiness from its containers, a node's status and roles."""

from __future__ import annotations

import pytest

from corral.api.kubectl import printing
from corral.api.kubectl.printing import human_duration, node_roles, node_status, pod_ready, pod_restarts, pod_status

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def ts(seconds_ago: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(NOW - seconds_ago, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("seconds, shown", [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (150, "2m30s"), (599, "9m59s"),
    (600, "10m"), (3 * 3600 - 1, "179m"), (3 * 3600, "3h"), (3 * 3600 + 20 * 60, "3h20m"), (8 * 3600, "8h"),
    (47 * 3600 + 59 * 60, "47h"), (48 * 3600, "2d"), (52 * 3600, "2d4h"), (8 * 86400, "8d"),
    (400 * 86400, "400d"), (730 * 86400, "2y"), (750 * 86400, "2y20d"), (9 * 365 * 86400, "9y"),
])
def test_ages_read_as_kubernetes_human_duration_writes_them(seconds, shown):
    assert human_duration(seconds) == shown


def test_an_age_without_a_timestamp_is_unknown():
    assert printing.age(None, NOW) == "<unknown>" and printing.age("not a time", NOW) == "<unknown>"
    assert printing.age(ts(90), NOW) == "90s" and printing.age("2027-01-15T07:59:00.000000Z", NOW) == "60s"


def pod(phase="Running", containers=1, statuses=(), init=0, init_statuses=(), conditions=(), **meta):
    return {"metadata": {"name": "p", **meta},
            "spec": {"containers": [{"name": f"c{i}"} for i in range(containers)],
                     "initContainers": [{"name": f"i{i}"} for i in range(init)]},
            "status": {"phase": phase, "containerStatuses": list(statuses),
                       "initContainerStatuses": list(init_statuses), "conditions": list(conditions)}}


def running(ready=True, restarts=0, last_finished=None):
    cs = {"ready": ready, "restartCount": restarts, "state": {"running": {"startedAt": ts(60)}}}
    if last_finished is not None:
        cs["lastState"] = {"terminated": {"exitCode": 1, "finishedAt": ts(last_finished)}}
    return cs


def waiting(reason, restarts=0):
    return {"ready": False, "restartCount": restarts, "state": {"waiting": {"reason": reason}}}


def terminated(code, reason=None, signal=None):
    t = {"exitCode": code, **({"reason": reason} if reason else {}), **({"signal": signal} if signal else {})}
    return {"ready": False, "restartCount": 0, "state": {"terminated": t}}


@pytest.mark.parametrize("p, status, ready", [
    (pod(statuses=[running()]), "Running", "1/1"),
    (pod(containers=2, statuses=[running(), running(ready=False)]), "Running", "1/2"),
    (pod("Pending", statuses=[]), "Pending", "0/1"),
    (pod("Pending", statuses=[waiting("ContainerCreating")]), "ContainerCreating", "0/1"),
    (pod(statuses=[waiting("CrashLoopBackOff", restarts=4)]), "CrashLoopBackOff", "0/1"),
    (pod("Succeeded", statuses=[terminated(0, "Completed")]), "Completed", "0/1"),
    (pod("Failed", statuses=[terminated(2, "Error")]), "Error", "0/1"),
    (pod("Failed", statuses=[terminated(137)]), "ExitCode:137", "0/1"),
    (pod("Failed", statuses=[terminated(0, signal=9)]), "Signal:9", "0/1"),
    (pod("Failed", statuses=[], reason="Evicted"), "Failed", "0/1"),
    (pod("Pending", init=2, init_statuses=[terminated(0, "Completed"), waiting("PodInitializing")]), "Init:1/2", "0/1"),
    (pod("Pending", init=1, init_statuses=[waiting("CrashLoopBackOff")]), "Init:CrashLoopBackOff", "0/1"),
    (pod("Failed", init=1, init_statuses=[terminated(3, "Error")]), "Init:Error", "0/1"),
    (pod("Failed", init=1, init_statuses=[terminated(3)]), "Init:ExitCode:3", "0/1"),
    (pod(statuses=[running()], deletionTimestamp=ts(1)), "Terminating", "1/1"),
    (pod("Succeeded", statuses=[terminated(0, "Completed")], deletionTimestamp=ts(1)), "Completed", "0/1"),
    (pod(containers=2, statuses=[terminated(0, "Completed"), running()],
         conditions=[{"type": "Ready", "status": "True"}]), "Running", "1/2"),
    (pod(containers=2, statuses=[terminated(0, "Completed"), running()]), "NotReady", "1/2"),
    (pod("Pending", conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]),
     "SchedulingGated", "0/1"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_a_pods_status_and_readiness_add_up_from_its_containers_as_kubectl_shows_them(p, status, ready):
    assert (pod_status(p), pod_ready(p)) == (status, ready)


def test_a_pod_reported_lost_with_its_node_shows_unknown_while_it_is_deleted():
    p = pod(statuses=[running()], deletionTimestamp=ts(1))
    p["status"]["reason"] = "NodeLost"
    assert pod_status(p) == "Unknown"


def test_restarts_say_when_the_last_one_was():
    assert pod_restarts(pod(statuses=[running(restarts=0)]), NOW) == "0"
    assert pod_restarts(pod(statuses=[running(restarts=3, last_finished=300)]), NOW) == "3 (5m ago)"
    assert pod_restarts(pod(containers=2, statuses=[running(restarts=1, last_finished=900),
                                                   running(restarts=2, last_finished=30)]), NOW) == "3 (30s ago)"


def node(ready: str | None = "True", unschedulable=False, labels=None):
    conditions = [{"type": "MemoryPressure", "status": "False"}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready})
    return {"metadata": {"name": "n", "labels": labels or {}}, "spec": {"unschedulable": unschedulable},
            "status": {"conditions": conditions}}


@pytest.mark.parametrize("n, shown", [
    (node("True"), "Ready"), (node("False"), "NotReady"), (node("Unknown"), "NotReady"), (node(None), "Unknown"),
    (node("True", unschedulable=True), "Ready,SchedulingDisabled"),
])
def test_a_nodes_status(n, shown):
    assert node_status(n) == shown


def test_a_nodes_roles_come_from_its_role_labels():
    assert node_roles(node()) == "<none>"
    assert node_roles(node(labels={"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/gpu": "true",
                                   "kubernetes.io/role": "edge", "zone": "a"})) == "edge,gpu,worker"


def test_every_kind_has_a_name_column_and_cells_for_each_column_even_for_an_empty_object():
    from corral.api.resources import RESOURCES

    for r in RESOURCES:
        cols = printing.columns_for(r.kind)
        assert any(c.format == "name" for c in cols), r.kind
        assert len(printing.row_cells(cols, {}, NOW)) == len(cols)
        assert all(c.definition()["type"] in ("string", "integer", "number", "boolean", "date") for c in cols)


@pytest.mark.parametrize("amount, shown", [
    (32 * 2**30, "32Gi"), (2002 * 2**20, "2002Mi"), (1_500_000_000, "1431Mi"), (16_001_437_696, "14.9Gi"),
    (3_000, "3Ki"), (512, "512"), (0, "0"),
])
def test_corral_get_shows_memory_in_binary_units_rounded_when_not_exact(amount, shown):
    from corral.cli.printers import human_bytes

    assert human_bytes(amount) == shown
