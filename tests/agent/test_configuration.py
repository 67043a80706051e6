"""What a container's environment and mounts become before it starts (corral.agent.configuration),
against a stand-in for the API's reads: Kubernetes' order (envFrom, then env over it), prefixes,
keys that are no variable name skipped, optional references, the downward API, and the
CreateContainerConfigError a missing object or key gives."""

from __future__ import annotations

import base64

import pytest

from corral.agent.configuration import PodConfiguration
from corral.agent.runtimes.base import StartError
from corral.client import NotFound

OBJECTS = {
    ("configmaps", "default", "app"): {"data": {"mode": "fast", "1bad": "x", "greeting": "hello"}},
    ("secrets", "default", "db"): {"data": {"password": base64.b64encode(b"s3cret").decode()}},
}


async def get(resource: str, namespace: str, name: str) -> dict:
    if (resource, namespace, name) not in OBJECTS:
        raise NotFound(404, {"message": "not found"})
    return OBJECTS[(resource, namespace, name)]


POD = {"metadata": {"name": "web-1", "namespace": "default", "uid": "u1", "labels": {"app": "web"}},
       "spec": {"nodeName": "n1"}}


async def environment(container: dict, tmp_path) -> dict[str, str]:
    configuration = PodConfiguration(get, lambda uid: tmp_path / uid, node_allocatable=lambda: {"memory": "8Gi"})
    prepared, _ = await configuration.prepare(POD, {"name": "c", **container}, host_ip="10.0.0.5")
    return {e["name"]: e["value"] for e in prepared["env"]}


async def test_env_from_then_env_over_it_with_prefixes_and_no_invalid_names(tmp_path):
    env = await environment({
        "envFrom": [{"configMapRef": {"name": "app"}}, {"prefix": "DB_", "secretRef": {"name": "db"}}],
        "env": [{"name": "mode", "value": "slow"},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}}],
    }, tmp_path)
    assert env == {"mode": "slow", "greeting": "hello", "DB_password": "s3cret", "APP": "web", "IP": "10.0.0.5",
                   "MEM": "8192"}  # "1bad" is no variable name: left out; no memory limit: the node's


async def test_optional_references_are_skipped_and_missing_ones_are_a_config_error(tmp_path):
    env = await environment({"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k",
                                                                                  "optional": True}}}],
                             "envFrom": [{"configMapRef": {"name": "gone", "optional": True}}]}, tmp_path)
    assert env == {}
    for container, message in (
            ({"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k"}}}]}, 'secret "gone" not found'),
            ({"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "nope"}}}]},
             "couldn't find key nope in ConfigMap default/app"),
            ({"envFrom": [{"secretRef": {"name": "gone"}}]}, 'secret "gone" not found')):
        with pytest.raises(StartError) as err:
            await environment(container, tmp_path)
        assert (err.value.reason, err.value.message) == ("CreateContainerConfigError", message)
