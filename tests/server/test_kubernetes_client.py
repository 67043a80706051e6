"""The official `kubernetes` Python client, unchanged, against a running corral server."""

from __future__ import annotations

import threading

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from kubernetes.client.rest import ApiException


@pytest.fixture
def v1(kubeconfig):
    """As the README shows: the admin kubeconfig the server wrote, loaded by the client itself."""
    config = k8s.Configuration()
    k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=config)
    api_client = k8s.ApiClient(config)
    yield k8s.CoreV1Api(api_client)
    api_client.close()


def make_pod(name: str, labels: dict | None = None, **spec_extra) -> k8s.V1Pod:
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name, labels=labels or {}),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(
            name="main", image="busybox",
            resources=k8s.V1ResourceRequirements(requests={"cpu": "100m", "memory": "64Mi"}),
        )], **spec_extra),
    )


def test_pods_are_created_read_listed_patched_replaced_and_deleted(v1):
    created = v1.create_namespaced_pod("default", make_pod("web", {"app": "web", "tier": "front"}))
    assert created.metadata.uid and created.metadata.resource_version
    assert created.status.phase == "Pending"
    assert created.spec.scheduler_name == "default-scheduler"
    v1.create_namespaced_pod("default", make_pod("db", {"app": "db"}))

    read = v1.read_namespaced_pod("web", "default")
    assert read.spec.containers[0].resources.requests == {"cpu": "100m", "memory": "64Mi"}

    names = lambda pods: sorted(p.metadata.name for p in pods.items)  # noqa: E731
    assert names(v1.list_namespaced_pod("default")) == ["db", "web"]
    assert names(v1.list_namespaced_pod("default", label_selector="app=web")) == ["web"]
    assert names(v1.list_namespaced_pod("default", label_selector="app in (web,db),tier!=front")) == ["db"]
    assert names(v1.list_namespaced_pod("default", field_selector="metadata.name=db")) == ["db"]
    assert names(v1.list_pod_for_all_namespaces(field_selector="status.phase=Pending")) == ["db", "web"]

    patched = v1.patch_namespaced_pod("web", "default", {"metadata": {"labels": {"tier": "edge"}}})
    assert patched.metadata.labels == {"app": "web", "tier": "edge"}
    json_patched = v1.patch_namespaced_pod(
        "web", "default", [{"op": "add", "path": "/metadata/annotations", "value": {"note": "hi"}}])
    assert json_patched.metadata.annotations == {"note": "hi"}

    json_patched.metadata.labels["replaced"] = "yes"
    replaced = v1.replace_namespaced_pod("web", "default", json_patched)
    assert replaced.metadata.labels["replaced"] == "yes"
    assert int(replaced.metadata.resource_version) > int(json_patched.metadata.resource_version)

    v1.delete_namespaced_pod("db", "default")  # unbound: gone at once
    with pytest.raises(ApiException) as err:
        v1.read_namespaced_pod("db", "default")
    assert err.value.status == 404


def test_nodes_are_created_listed_by_field_and_label_and_cordoned(v1):
    node = k8s.V1Node(
        metadata=k8s.V1ObjectMeta(name="node-1", labels={"topology.kubernetes.io/zone": "z1"}),
        status=k8s.V1NodeStatus(capacity={"cpu": "4", "memory": "32Gi", "pods": "110"}),
    )
    created = v1.create_node(node)
    assert created.status.allocatable == {"cpu": "4", "memory": "32Gi", "pods": "110"}
    v1.create_node(k8s.V1Node(metadata=k8s.V1ObjectMeta(name="node-2")))
    zone = v1.list_node(label_selector="topology.kubernetes.io/zone=z1")
    assert [n.metadata.name for n in zone.items] == ["node-1"]
    read = v1.read_node("node-1")
    read.metadata.labels["rack"] = "r7"
    replaced = v1.replace_node("node-1", read)
    assert replaced.metadata.labels == {"topology.kubernetes.io/zone": "z1", "rack": "r7"}
    assert replaced.status.capacity == {"cpu": "4", "memory": "32Gi", "pods": "110"}
    cordoned = v1.patch_node("node-2", {"spec": {"unschedulable": True}})
    assert cordoned.spec.unschedulable is True
    assert [n.metadata.name for n in v1.list_node(field_selector="spec.unschedulable=true").items] == ["node-2"]
    v1.delete_node("node-2")
    assert [n.metadata.name for n in v1.list_node().items] == ["node-1"]


def test_a_watch_sees_added_modified_and_deleted_in_order(v1):
    start_rv = v1.list_namespaced_pod("default").metadata.resource_version
    seen: list[tuple[str, str]] = []
    done = threading.Event()

    def watch() -> None:
        w = k8s_watch.Watch()
        for event in w.stream(v1.list_namespaced_pod, "default", resource_version=start_rv, timeout_seconds=10):
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 4:
                w.stop()
        done.set()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    v1.create_namespaced_pod("default", make_pod("w1"))
    v1.patch_namespaced_pod("w1", "default", {"metadata": {"labels": {"x": "1"}}})
    v1.create_namespaced_pod("default", make_pod("w2"))
    v1.delete_namespaced_pod("w1", "default")
    assert done.wait(15), f"watch saw only {seen}"
    assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("ADDED", "w2"), ("DELETED", "w1")]


def test_a_binding_assigns_the_pod_and_a_second_binding_conflicts(v1):
    v1.create_namespaced_pod("default", make_pod("bind-me"))
    binding = k8s.V1Binding(metadata=k8s.V1ObjectMeta(name="bind-me"),
                            target=k8s.V1ObjectReference(kind="Node", name="node-1"))
    v1.create_namespaced_pod_binding("bind-me", "default", binding)
    pod = v1.read_namespaced_pod("bind-me", "default")
    assert pod.spec.node_name == "node-1"
    assert pod.status.phase == "Scheduled"
    assert [(c.type, c.status) for c in pod.status.conditions] == [("PodScheduled", "True")]
    with pytest.raises(ApiException) as err:
        v1.create_namespaced_pod_binding("bind-me", "default", binding)
    assert err.value.status == 409
    assert "already assigned" in err.value.body


def test_a_replace_with_a_stale_resource_version_gets_409(v1):
    pod = v1.create_namespaced_pod("default", make_pod("stale"))
    v1.patch_namespaced_pod("stale", "default", {"metadata": {"labels": {"v": "2"}}})
    pod.metadata.labels = {"v": "old"}
    with pytest.raises(ApiException) as err:
        v1.replace_namespaced_pod("stale", "default", pod)
    assert err.value.status == 409
    assert v1.read_namespaced_pod("stale", "default").metadata.labels == {"v": "2"}


def test_an_invalid_pod_gets_422_whose_causes_name_the_fields(v1):
    import json

    pod = make_pod("bad")
    pod.spec.containers.append(k8s.V1Container(name="main", image=""))
    pod.spec.containers[0].ports = [k8s.V1ContainerPort(container_port=70000)]
    with pytest.raises(ApiException) as err:
        v1.create_namespaced_pod("default", pod)
    assert err.value.status == 422
    status = json.loads(err.value.body)
    assert status["reason"] == "Invalid"
    fields = {c["field"] for c in status["details"]["causes"]}
    assert {"spec.containers[0].ports[0].containerPort", "spec.containers[1].name",
            "spec.containers[1].image"} <= fields
    assert v1.list_namespaced_pod("default", field_selector="metadata.name=bad").items == []


def test_a_bound_pod_is_deleted_gracefully_and_removed_when_its_agent_reports_terminated(v1):
    v1.create_namespaced_pod("default", make_pod("graceful", node_name="node-1"))
    deleting = v1.delete_namespaced_pod("graceful", "default")
    assert deleting.metadata.deletion_timestamp is not None
    assert deleting.status.phase == "Terminating"
    assert v1.read_namespaced_pod("graceful", "default").status.phase == "Terminating"
    v1.patch_namespaced_pod_status("graceful", "default", {"status": {"phase": "Terminated"}})
    with pytest.raises(ApiException) as err:
        v1.read_namespaced_pod("graceful", "default")
    assert err.value.status == 404
    # Or at once, with grace period 0.
    v1.create_namespaced_pod("default", make_pod("forced", node_name="node-1"))
    v1.delete_namespaced_pod("forced", "default", grace_period_seconds=0)
    assert v1.list_namespaced_pod("default", field_selector="metadata.name=forced").items == []


def test_the_server_version_is_in_kubernetes_form_and_kubectl_sees_no_skew(v1, kubeconfig):
    import os
    import shutil
    import subprocess
    import sys

    from corral.server.discovery import KUBERNETES_VERSION

    info = k8s.VersionApi(v1.api_client).get_code()
    assert (info.major, info.minor) == tuple(KUBERNETES_VERSION.split(".")[:2])
    assert info.git_version.startswith(f"v{KUBERNETES_VERSION}+corral-")
    kubectl = shutil.which("kubectl", path=os.path.dirname(sys.executable))
    out = subprocess.run([kubectl, "--kubeconfig", kubeconfig, "version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and f"Server Version: v{KUBERNETES_VERSION}+corral-" in out.stdout, out.stdout + out.stderr
    assert "skew" not in out.stdout + out.stderr
