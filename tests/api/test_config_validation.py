"""ConfigMaps, Secrets and what pods take from them: validated with Kubernetes' field paths, and
the Secret defaults (type Opaque, stringData folded into data) applied on every write."""

from __future__ import annotations

import base64

import pytest

from corral.api.defaults import apply_create_defaults, apply_update_defaults
from corral.api.kinds.config import references
from corral.api.resources import by_kind
from corral.api.validation import update_causes, validate

CM, SECRET, POD = by_kind("ConfigMap"), by_kind("Secret"), by_kind("Pod")


def fields_of(resource, obj) -> set[str]:
    _, causes = validate(resource, {"metadata": {"name": "x"}, **obj})
    return {c.field for c in causes}


def pod(volumes=None, **container) -> dict:
    return {"spec": {"volumes": volumes or [], "containers": [{"name": "c", "image": "busybox", **container}]}}


@pytest.mark.parametrize("resource, obj, bad", [
    pytest.param(CM, {"data": {"app.conf": "x", "KEY_1": "y", "a-b": "z"}}, set(), id="config keys may be file names"),
    pytest.param(CM, {"data": {"a/b": "x"}}, {"data[a/b]"}, id="a key is no path"),
    pytest.param(CM, {"data": {"..x": "x", ".": "y"}}, {"data[..x]", "data[.]"}, id="nor a dot-dot name"),
    pytest.param(CM, {"data": {"k": "x"}, "binaryData": {"k": "eA=="}}, {"data[k]"}, id="a key in data and binaryData"),
    pytest.param(CM, {"binaryData": {"k": "not base64!"}}, {"binaryData[k]"}, id="binaryData is base64"),
    pytest.param(CM, {"data": {"k": "x" * (1024 * 1024)}}, {"data"}, id="at most 1 MiB in all"),
    pytest.param(SECRET, {"data": {"k": "eA=="}}, set(), id="a Secret's data is base64"),
    pytest.param(SECRET, {"data": {"k": "x"}}, {"data[k]"}, id="and must be"),
    pytest.param(SECRET, {"type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}}, {"data[tls.key]"},
                 id="a TLS Secret holds a certificate and its key"),
    pytest.param(SECRET, {"type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}, "stringData": {"tls.key": "k"}},
                 set(), id="stringData counts towards the keys a type needs"),
    pytest.param(SECRET, {"type": "kubernetes.io/basic-auth"}, {"data[username]"}, id="basic-auth needs a user or password"),
    pytest.param(SECRET, {"type": "example.com/mine"}, set(), id="a type of one's own holds anything"),
    pytest.param(SECRET, {"type": "no good"}, {"type"}, id="but is a qualified name"),
])
def test_configmaps_and_secrets_are_validated(resource, obj, bad):
    assert fields_of(resource, obj) == bad


@pytest.mark.parametrize("obj, bad", [
    pytest.param(pod([{"name": "v", "configMap": {"name": "cm", "items": [{"key": "k", "path": "sub/f", "mode": 0o600}]}},
                      {"name": "s", "secret": {"secretName": "s", "defaultMode": 0o400}}, {"name": "e", "emptyDir": {}}],
                     volumeMounts=[{"name": "v", "mountPath": "/etc/v"}, {"name": "e", "mountPath": "/tmp/e"}],
                     env=[{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}},
                          {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                          {"name": "C", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}}],
                     envFrom=[{"prefix": "P_", "secretRef": {"name": "s"}}]), set(), id="what charts write is valid"),
    pytest.param(pod([{"name": "v", "configMap": {"name": "cm", "items": [{"key": "k", "path": "../escape"}]}}]),
                 {"spec.volumes[0].configMap.items[0].path"}, id="an item's path stays in its volume"),
    pytest.param(pod([{"name": "v", "configMap": {"name": "cm", "items": [{"key": "k", "path": "/abs"}]}}]),
                 {"spec.volumes[0].configMap.items[0].path"}, id="and is relative"),
    pytest.param(pod([{"name": "v", "secret": {"secretName": "s", "defaultMode": 0o1777}}]),
                 {"spec.volumes[0].secret.defaultMode"}, id="modes are at most 0777"),
    pytest.param(pod([{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]), {"spec.volumes[1].name"},
                 id="volume names are unique"),
    pytest.param(pod([{"name": "v", "emptyDir": {}, "configMap": {"name": "c"}}]), {"spec.volumes[0]"},
                 id="one source per volume"),
    pytest.param(pod(volumeMounts=[{"name": "missing", "mountPath": "/m"}]),
                 {"spec.containers[0].volumeMounts[0].name"}, id="a mount names a volume of the pod"),
    pytest.param(pod([{"name": "v", "emptyDir": {}}], volumeMounts=[{"name": "v", "mountPath": "/m/../etc"},
                                                                     {"name": "v", "mountPath": "/a", "subPath": "../x"}]),
                 {"spec.containers[0].volumeMounts[0].mountPath", "spec.containers[0].volumeMounts[1].subPath"},
                 id="no way out of a mount"),
    pytest.param(pod(env=[{"name": "A", "value": "x", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]),
                 {"spec.containers[0].env[0].valueFrom"}, id="value or valueFrom, not both"),
    pytest.param(pod(env=[{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s"}}}]),
                 {"spec.containers[0].env[0].valueFrom.secretKeyRef.key"}, id="a key reference names its key"),
    pytest.param(pod(env=[{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}}]),
                 {"spec.containers[0].env[0].valueFrom.fieldRef.fieldPath"}, id="only the downward API's fields"),
    pytest.param(pod(env=[{"name": "1A", "value": "x"}]), {"spec.containers[0].env[0].name"},
                 id="a variable name does not start with a digit"),
    pytest.param(pod(envFrom=[{"configMapRef": {"name": "a"}, "secretRef": {"name": "b"}}]),
                 {"spec.containers[0].envFrom[0]"}, id="one source per envFrom entry"),
])
def test_what_a_pod_takes_from_configmaps_and_secrets_is_validated(obj, bad):
    assert fields_of(POD, obj) == bad


def test_a_secret_is_opaque_by_default_and_its_string_data_becomes_data_on_every_write():
    obj = {"metadata": {"name": "s"}, "data": {"a": "eA=="}, "stringData": {"a": "over", "b": "plain"}}
    apply_create_defaults(SECRET, obj, "default")
    assert obj["type"] == "Opaque" and "stringData" not in obj
    assert {k: base64.b64decode(v) for k, v in obj["data"].items()} == {"a": b"over", "b": b"plain"}
    update = {"metadata": {"name": "s"}, "stringData": {"c": "new"}}
    apply_update_defaults(SECRET, update)
    assert update == {"metadata": {"name": "s"}, "type": "Opaque", "data": {"c": "bmV3"}}


def test_an_immutable_object_keeps_its_data_and_a_secrets_type_is_fixed():
    current = {"data": {"a": "eA=="}, "type": "Opaque", "immutable": True}
    assert {c.field for c in update_causes(SECRET, current, {**current, "data": {"a": "eQ=="}})} == {"data"}
    assert {c.field for c in update_causes(SECRET, current, {**current, "immutable": False})} == {"immutable"}
    assert {c.field for c in update_causes(SECRET, current, {**current, "type": "kubernetes.io/tls"})} == {"type"}
    assert update_causes(SECRET, current, {**current, "metadata": {"labels": {"x": "y"}}}) == []
    mutable = {"data": {"a": "x"}}
    assert update_causes(CM, mutable, {"data": {"a": "y"}, "immutable": True}) == []


def test_references_are_every_configmap_and_secret_a_pod_uses():
    obj = pod([{"name": "v", "configMap": {"name": "cm"}}, {"name": "s", "secret": {"secretName": "sec"}}],
              env=[{"name": "A", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}}],
              envFrom=[{"configMapRef": {"name": "env-cm"}}])
    assert references(obj) == {("configmaps", "cm"), ("secrets", "sec"), ("secrets", "env-secret"),
                               ("configmaps", "env-cm")}
