"""Protobuf request bodies, as kubectl sends them (bytes captured from kubectl v1.37 `auth can-i`)."""

from __future__ import annotations

import pytest

from corral.api.protobuf import ProtobufError, decode_object

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
