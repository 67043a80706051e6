"""Protobuf request bodies, as kubectl sends them (bytes captured from kubectl v1.37 `auth can-i`)."""

from __future__ import annotations

import pytest

from corral.api.wire.protobuf import ProtobufError, decode_object

# kubectl auth can-i create pods (namespace default), byte for byte
CAN_I_CREATE_PODS = (
    b"k8s\x00\x0a\x32\x0a\x17authorization.k8s.io/v1\x12\x17SelfSubjectAccessReview\x12\x3f"
    b"\x0a\x10\x0a\x00\x12\x00\x1a\x00\x22\x00\x2a\x00\x32\x00\x38\x00\x42\x00"
    b"\x12\x21\x0a\x1f\x0a\x07default\x12\x06create\x1a\x00\x22\x00\x2a\x04pods\x32\x00\x3a\x00"
    b"\x1a\x08\x08\x00\x12\x00\x1a\x00\x20\x00\x1a\x00\x22\x00"
)


def _unknown(api_version: bytes, kind: bytes, raw: bytes) -> bytes:
    def field(number: int, payload: bytes) -> bytes:
        return bytes([number << 3 | 2, len(payload)]) + payload

    return b"k8s\x00" + field(1, field(1, api_version) + field(2, kind)) + field(2, raw)


def test_an_access_review_reads_as_its_json_would():
    obj = decode_object(CAN_I_CREATE_PODS)
    assert obj["kind"] == "SelfSubjectAccessReview" and obj["apiVersion"] == "authorization.k8s.io/v1"
    assert obj["spec"] == {"resourceAttributes": {"namespace": "default", "verb": "create", "group": "",
                                                  "version": "", "resource": "pods", "subresource": "", "name": ""}}


def test_a_non_resource_review_and_a_rules_review():
    non = _unknown(b"authorization.k8s.io/v1", b"SelfSubjectAccessReview",
                   b"\x12\x11\x12\x0f\x0a\x08/metrics\x12\x03get")
    assert decode_object(non)["spec"] == {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}
    rules = _unknown(b"authorization.k8s.io/v1", b"SelfSubjectRulesReview", bytes.fromhex("12060a047465616d"))
    assert decode_object(rules)["spec"] == {"namespace": "team"}


@pytest.mark.parametrize("body, message", [
    pytest.param(b'{"kind": "Pod"}', "prefix", id="JSON labelled protobuf"),
    pytest.param(_unknown(b"v1", b"Pod", b""), "only as JSON", id="a kind corral reads only as JSON"),
    pytest.param(b"k8s\x00\x0a\xff", "varint", id="truncated"),
    pytest.param(_unknown(b"authorization.k8s.io/v1", b"SelfSubjectRulesReview", b"\x12\x10\x0a"),
                 "past the end", id="a field longer than the message"),
    pytest.param(_unknown(b"authorization.k8s.io/v1", b"SelfSubjectRulesReview", b"\x12\x03\x0a\x01\xff"),
                 "UTF-8", id="a string that is not UTF-8"),
    pytest.param(_unknown(b"authorization.k8s.io/v1", b"SelfSubjectRulesReview", b"\x13"), "wire type",
                 id="a group wire type"),
])
def test_bad_bodies_are_refused_with_a_reason(body, message):
    with pytest.raises(ProtobufError, match=message):
        decode_object(body)


# kubectl create namespace team-a (kubectl v1.37.1), byte for byte from its -v=9 log
CREATE_NAMESPACE = bytes.fromhex(
    "6b 38 73 00 0a 0f 0a 02 76 31 12 09 4e 61 6d 65 73 70 61 63 65 12 1e 0a 16 0a 06 74 65 61 6d 2d"
    "61 12 00 1a 00 22 00 2a 00 32 00 38 00 42 00 12 00 1a 02 0a 00 1a 00 22 00")


def test_a_namespace_from_kubectl_create_reads_as_its_json_would():
    obj = decode_object(CREATE_NAMESPACE)
    assert (obj["apiVersion"], obj["kind"], obj["metadata"]["name"]) == ("v1", "Namespace", "team-a")


def _field(number: int, payload: bytes) -> bytes:
    return bytes([number << 3 | 2, len(payload)]) + payload


def test_an_eviction_and_delete_options_carry_grace_preconditions_and_dry_run():
    options = (b"\x08\x1e" + _field(2, _field(2, b"42")) + _field(4, b"Foreground") + _field(5, b"All"))
    eviction = _unknown(b"policy/v1", b"Eviction", _field(1, _field(1, b"web") + _field(3, b"default"))
                        + _field(2, options))
    obj = decode_object(eviction)
    assert obj["metadata"] == {"name": "web", "namespace": "default"}
    assert obj["deleteOptions"] == {"gracePeriodSeconds": 30, "preconditions": {"resourceVersion": "42"},
                                    "propagationPolicy": "Foreground", "dryRun": ["All"]}
    negative = _unknown(b"meta.k8s.io/v1", b"DeleteOptions", b"\x08" + b"\xff" * 9 + b"\x01")
    assert decode_object(negative)["gracePeriodSeconds"] == -1  # int64 as two's complement: refused later, as a 400


def _length_field(number: int, payload: bytes) -> bytes:
    """A length-delimited field of any size (the length as a varint)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _go_container(*extra: bytes) -> bytes:
    """A container as Go writes one: every string that is not a pointer, set or not."""
    f = _length_field
    return (f(1, b"web") + f(2, b"busybox:1.36") + f(3, b"sleep") + f(3, b"3600") + f(5, b"")
            + f(6, f(1, b"") + _int_field(2, 0) + _int_field(3, 8080) + f(4, b"TCP") + f(5, b""))
            + f(8, f(2, f(1, b"cpu") + f(2, f(1, b"100m")))) + f(13, b"") + f(14, b"")
            + _int_field(16, 0) + _int_field(17, 0) + _int_field(18, 0) + f(20, b"") + b"".join(extra))


def _go_deployment(container: bytes) -> bytes:
    f = _length_field
    labels = f(11, f(1, b"app") + f(2, b"web"))
    template = f(1, labels) + f(2, f(2, container) + f(3, b"") + f(6, b"") + f(8, b"") + f(10, b"") + f(19, b""))
    spec = (_int_field(1, 2) + f(2, f(1, f(1, b"app") + f(2, b"web"))) + f(3, template)
            + f(4, f(1, b"") + f(2, f(1, _int_field(1, 1) + f(3, b"25%")) + f(2, _int_field(1, 0) + _int_field(2, 1))))
            + _int_field(5, 0) + _int_field(7, 0))
    raw = f(1, f(1, b"web") + labels) + f(2, spec) + f(3, b"")
    return b"k8s\x00" + f(1, f(1, b"apps/v1") + f(2, b"Deployment")) + f(2, raw)


def test_a_deployment_from_kubectl_create_reads_as_its_json_would_without_gos_empty_fields():
    obj = decode_object(_go_deployment(_go_container()))
    assert obj == {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{
                     "name": "web", "image": "busybox:1.36", "command": ["sleep", "3600"],
                     "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                     "resources": {"requests": {"cpu": "100m"}}}]}},
                 "strategy": {"rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}}}}


def test_a_deployment_field_corral_cannot_read_from_protobuf_is_refused_not_dropped():
    probe = _length_field(10, _length_field(1, _length_field(1, _length_field(1, b"true"))))  # a livenessProbe
    with pytest.raises(ProtobufError, match=r"field 10 of Deployment\.spec\.template\.spec\.containers is not read"):
        decode_object(_go_deployment(_go_container(probe)))
