"""What every workload controller makes its pods from: the template's metadata and spec, a name
from the owner's, the owner as controller."""

from __future__ import annotations

import pytest

from corral.api.defaults import rfc3339
from corral.controllers.workloads.pods import deletion_order, is_available, pod_from_template, ready_since

OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-abc", "namespace": "team",
                                                                      "uid": "u-1"}}


def test_a_pod_from_a_template_carries_its_labels_annotations_finalizers_and_spec_as_copies():
    template = {"metadata": {"labels": {"app": "web"}, "annotations": {"note": "n"}, "finalizers": ["example.com/f"],
                             "name": "ignored", "namespace": "ignored"},
                "spec": {"containers": [{"name": "c", "image": "web:1"}]}}
    pod = pod_from_template(OWNER, template)
    assert pod == {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "generateName": "web-abc-", "namespace": "team", "labels": {"app": "web"}, "annotations": {"note": "n"},
        "finalizers": ["example.com/f"], "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "u-1", "controller": True,
            "blockOwnerDeletion": True}]}, "spec": {"containers": [{"name": "c", "image": "web:1"}]}}
    pod["metadata"]["labels"]["x"] = "y"
    pod["metadata"]["finalizers"].append("z")
    pod["spec"]["containers"][0]["image"] = "changed"
    assert template["metadata"]["labels"] == {"app": "web"} and template["metadata"]["finalizers"] == ["example.com/f"]
    assert template["spec"]["containers"][0]["image"] == "web:1"  # the owner's template is never changed


def test_a_template_without_metadata_gives_a_pod_with_only_its_name_namespace_and_owner():
    pod = pod_from_template(OWNER, {"spec": {"containers": []}})
    assert sorted(pod["metadata"]) == ["generateName", "namespace", "ownerReferences"]
    assert pod_from_template(OWNER, {})["spec"] == {}


def test_a_pod_for_a_node_adds_its_revision_the_node_affinity_and_only_the_tolerations_it_lacks():
    from corral.controllers.workloads.node_rollout import HASH_LABEL, node_of, pod_for_node

    own, extra = {"key": "gpu", "operator": "Exists"}, {"key": "node.kubernetes.io/unreachable", "operator": "Exists"}
    template = {"spec": {"containers": [], "tolerations": [own]}}  # no labels at all
    pod = pod_for_node(OWNER, template, "n7", "rev-1", [own, extra])
    assert pod["metadata"]["labels"] == {HASH_LABEL: "rev-1"}
    assert pod["spec"]["tolerations"] == [own, extra]  # its own first, each once
    assert node_of(pod) == "n7" and template["spec"]["tolerations"] == [own]
    assert pod_for_node(OWNER, template, "n7", "rev-1")["spec"]["tolerations"] == [own]  # none to add


def ready_pod(since: float) -> dict:
    return {"metadata": {}, "status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": rfc3339(since)}]}}


@pytest.mark.parametrize("ready_for, min_ready, available", [
    (0.5, 1, False),  # one second asked, half a second ready
    (1.0, 1, True),
    (-30.0, 0, True),  # its agent's clock ahead of this one: without minReadySeconds, ready is available
    (-30.0, 1, False),
])
def test_a_pod_is_available_once_ready_for_min_ready_seconds(ready_for, min_ready, available):
    now = 1_800_000_000.5  # times are written to the second: now - 0.5 is one exactly
    assert is_available(ready_pod(now - ready_for), min_ready, now) is available


def running(name: str = "p", *, node: str | None = "n1", phase: str | None = "Running",
            ready_since_: float | None = 1000.0, ready: bool = True, restarts: tuple[int | None, ...] = (0,),
            created: float = 500.0) -> dict:
    conditions = [] if ready_since_ is None else [{"type": "Ready", "status": str(ready),
                                                    "lastTransitionTime": rfc3339(ready_since_)}]
    return {"metadata": {"name": name, "creationTimestamp": rfc3339(created)},
            "spec": {"nodeName": node} if node else {},
            "status": {"phase": phase, "conditions": conditions,
                       "containerStatuses": [{"name": f"c{i}", **({} if n is None else {"restartCount": n})}
                                             for i, n in enumerate(restarts)]}}


@pytest.mark.parametrize("first, then", [
    pytest.param(running(node=None), running(), id="not yet placed before placed"),
    pytest.param(running(phase="Pending", ready_since_=None), running(phase="Unknown", ready_since_=None),
                 id="Pending before Unknown"),
    pytest.param(running(phase="Unknown", ready_since_=None), running(ready_since_=None), id="Unknown before Running"),
    pytest.param(running(ready_since_=None), running(), id="not ready before ready"),
    pytest.param(running(ready_since_=2000.0), running(ready_since_=1000.0), id="ready for less time before longer"),
    pytest.param(running(restarts=(0, 3)), running(restarts=(2, 0)), id="more restarts (of any container) before fewer"),
    pytest.param(running(restarts=(1,)), running(restarts=()), id="a restart before no container status at all"),
    pytest.param(running(restarts=(1,)), running(restarts=(None,)), id="a restart before a status without a count"),
    pytest.param(running(created=600.0), running(created=500.0), id="newer before older"),
    pytest.param(running(phase=None, ready_since_=None), running(phase="Unknown", ready_since_=None),
                 id="no phase yet counts as Pending"),
    pytest.param(running(ready=False, ready_since_=1000.0, restarts=(3,)), running(ready=False, ready_since_=2000.0),
                 id="between pods not ready, when they stopped being ready does not count"),
    pytest.param({"metadata": {"name": "bare", "creationTimestamp": rfc3339(500.0)}, "spec": {}}, running(),
                 id="a pod without a status yet is not placed, Pending, not ready"),
])
def test_a_scale_down_deletes_pods_in_kubernetes_order(first, then):
    assert sorted([then, first], key=deletion_order) == [first, then]
    assert sorted([first, then], key=deletion_order) == [first, then]


def test_a_pod_never_ready_became_ready_at_time_zero():
    assert ready_since(running(ready_since_=None)) == 0.0
    assert ready_since(running(ready_since_=1234.0)) == 1234.0
