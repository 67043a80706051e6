"""What every workload controller makes its pods from: the template's metadata and spec, a name
from the owner's, the owner as controller."""

from __future__ import annotations

import pytest

from corral.api.defaults import rfc3339
from corral.controllers.pods import is_available, pod_from_template

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
    from corral.controllers.node_rollout import HASH_LABEL, node_of, pod_for_node

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
