"""Kubernetes' protobuf request bodies, read into the JSON-shaped dicts the rest of corral uses.

kubectl's typed clients send ``application/vnd.kubernetes.protobuf``: the four bytes ``k8s\\0``, then
a ``runtime.Unknown`` message (1: typeMeta {1: apiVersion, 2: kind}, 2: raw — the object's own
message, 3: contentEncoding, 4: contentType). The object is decoded by a schema per kind: field
number → (JSON name, what it holds). Only the kinds in :data:`SCHEMAS` are understood; any other is
refused with :class:`ProtobufError`, never guessed at. Answers always go back as JSON (every client
that sends protobuf also accepts JSON).

Field numbers are those of Kubernetes' ``generated.proto`` files, as observed on the wire.
"""

from __future__ import annotations

import base64
from typing import Any, Union

__all__ = ["MAGIC", "CONTENT_TYPE", "ProtobufError", "decode_object", "SCHEMAS", "STRICT_KINDS"]

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAX_DEPTH = 32

# What a field holds: "string", "bool", "int", ("map",) of strings, ("map", "bytes") of bytes (as base64),
# a nested schema (dict), or ("repeated", one of those).
Kind = Union[str, tuple, dict]
Schema = dict[int, tuple[str, Kind]]


class ProtobufError(ValueError):
    """A body that is not a protobuf object corral can read."""


_OBJECT_META: Schema = {  # Go writes its strings even when empty: an empty one is absent, as in JSON
    1: ("name", "string?"), 2: ("generateName", "string?"), 3: ("namespace", "string?"), 5: ("uid", "string?"),
    6: ("resourceVersion", "string?"), 11: ("labels", ("map",)), 12: ("annotations", ("map",)),
    14: ("finalizers", ("repeated", "string")),
}
# k8s.io/apimachinery meta/v1 DeleteOptions and Preconditions
_DELETE_OPTIONS: Schema = {
    1: ("gracePeriodSeconds", "int"), 2: ("preconditions", {1: ("uid", "string"), 2: ("resourceVersion", "string")}),
    3: ("orphanDependents", "bool"), 4: ("propagationPolicy", "string"), 5: ("dryRun", ("repeated", "string")),
}
# k8s.io/api core/v1 ObjectReference
_OBJECT_REFERENCE: Schema = {
    1: ("kind", "string"), 2: ("namespace", "string"), 3: ("name", "string"), 4: ("uid", "string"),
    5: ("apiVersion", "string"), 6: ("resourceVersion", "string"), 7: ("fieldPath", "string"),
}
_RESOURCE_ATTRIBUTES: Schema = {
    1: ("namespace", "string"), 2: ("verb", "string"), 3: ("group", "string"), 4: ("version", "string"),
    5: ("resource", "string"), 6: ("subresource", "string"), 7: ("name", "string"),
}
_NON_RESOURCE_ATTRIBUTES: Schema = {1: ("path", "string"), 2: ("verb", "string")}

# k8s.io/apimachinery meta/v1 LabelSelector
_LABEL_SELECTOR: Schema = {
    1: ("matchLabels", ("map",)),
    2: ("matchExpressions", ("repeated", {1: ("key", "string"), 2: ("operator", "string"),
                                          3: ("values", ("repeated", "string"))})),
}
# k8s.io/api core/v1: the parts of a pod template ``kubectl create deployment|job|cronjob`` fills in.
# Go always writes a string, number or flag that is not a pointer: "string?", "int?", "bool?" read
# an empty or zero one as absent, as JSON's omitempty would have left it out.
_CONTAINER: Schema = {
    1: ("name", "string?"), 2: ("image", "string?"), 3: ("command", ("repeated", "string")),
    4: ("args", ("repeated", "string")), 5: ("workingDir", "string?"),
    6: ("ports", ("repeated", {1: ("name", "string?"), 2: ("hostPort", "int?"), 3: ("containerPort", "int"),
                               4: ("protocol", "string?"), 5: ("hostIP", "string?")})),
    7: ("env", ("repeated", {1: ("name", "string?"), 2: ("value", "string?")})),
    8: ("resources", {1: ("limits", ("quantities",)), 2: ("requests", ("quantities",))}),
    14: ("imagePullPolicy", "string?"), 16: ("stdin", "bool?"), 18: ("tty", "bool?"),
}
_POD_TEMPLATE: Schema = {
    1: ("metadata", _OBJECT_META),
    2: ("spec", {2: ("containers", ("repeated", _CONTAINER)), 20: ("initContainers", ("repeated", _CONTAINER)),
                 3: ("restartPolicy", "string?"), 4: ("terminationGracePeriodSeconds", "int"),
                 7: ("nodeSelector", ("map",)), 10: ("nodeName", "string?"), 19: ("schedulerName", "string?"),
                 24: ("priorityClassName", "string?")}),
}
_DEPLOYMENT_SPEC: Schema = {
    1: ("replicas", "int"), 2: ("selector", _LABEL_SELECTOR), 3: ("template", _POD_TEMPLATE),
    4: ("strategy", {1: ("type", "string?"), 2: ("rollingUpdate", {1: ("maxUnavailable", "intstr"),
                                                                    2: ("maxSurge", "intstr")})}),
    5: ("minReadySeconds", "int?"), 6: ("revisionHistoryLimit", "int"), 7: ("paused", "bool?"),
    9: ("progressDeadlineSeconds", "int"),
}
_REPLICA_SET_SPEC: Schema = {1: ("replicas", "int"), 2: ("selector", _LABEL_SELECTOR), 3: ("template", _POD_TEMPLATE),
                             4: ("minReadySeconds", "int?")}
_JOB_SPEC: Schema = {
    1: ("parallelism", "int"), 2: ("completions", "int"), 3: ("activeDeadlineSeconds", "int"),
    4: ("selector", _LABEL_SELECTOR), 5: ("manualSelector", "bool"), 6: ("template", _POD_TEMPLATE),
    7: ("backoffLimit", "int"), 8: ("ttlSecondsAfterFinished", "int"), 9: ("completionMode", "string?"),
    10: ("suspend", "bool"),
}
_CRONJOB_SPEC: Schema = {
    1: ("schedule", "string?"), 2: ("startingDeadlineSeconds", "int"), 3: ("concurrencyPolicy", "string?"),
    4: ("suspend", "bool"), 5: ("jobTemplate", {1: ("metadata", _OBJECT_META), 2: ("spec", _JOB_SPEC)}),
    6: ("successfulJobsHistoryLimit", "int"), 7: ("failedJobsHistoryLimit", "int"), 8: ("timeZone", "string?"),
}
# Kinds read strictly: a field corral does not read must be empty (as Go writes an unset one), or
# the body is refused naming it — never a field of a workload silently dropped.
STRICT_KINDS = {("apps/v1", "Deployment"), ("apps/v1", "ReplicaSet"), ("batch/v1", "Job"), ("batch/v1", "CronJob")}

SCHEMAS: dict[tuple[str, str], Schema] = {
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): {
        1: ("metadata", _OBJECT_META),
        2: ("spec", {1: ("resourceAttributes", _RESOURCE_ATTRIBUTES),
                     2: ("nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES)}),
    },
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): {
        1: ("metadata", _OBJECT_META),
        2: ("spec", {1: ("namespace", "string")}),
    },
    # kubectl create namespace
    ("v1", "Namespace"): {1: ("metadata", _OBJECT_META), 2: ("spec", {1: ("finalizers", ("repeated", "string"))})},
    ("v1", "Binding"): {1: ("metadata", _OBJECT_META), 2: ("target", _OBJECT_REFERENCE)},
    # kubectl drain: an eviction per pod, or a delete with these options
    ("policy/v1", "Eviction"): {1: ("metadata", _OBJECT_META), 2: ("deleteOptions", _DELETE_OPTIONS)},
    # kubectl create deployment (status, written by the controllers, is not read)
    ("apps/v1", "Deployment"): {1: ("metadata", _OBJECT_META), 2: ("spec", _DEPLOYMENT_SPEC), 3: ("status", "skip")},
    ("apps/v1", "ReplicaSet"): {1: ("metadata", _OBJECT_META), 2: ("spec", _REPLICA_SET_SPEC), 3: ("status", "skip")},
    # kubectl create configmap|secret (bytes values become base64, as JSON carries them)
    ("v1", "ConfigMap"): {1: ("metadata", _OBJECT_META), 2: ("data", ("map",)), 3: ("binaryData", ("map", "bytes")),
                          4: ("immutable", "bool")},
    ("v1", "Secret"): {1: ("metadata", _OBJECT_META), 2: ("data", ("map", "bytes")), 3: ("type", "string?"),
                       4: ("stringData", ("map",)), 5: ("immutable", "bool")},
    # kubectl create job|cronjob
    ("batch/v1", "Job"): {1: ("metadata", _OBJECT_META), 2: ("spec", _JOB_SPEC), 3: ("status", "skip")},
    ("batch/v1", "CronJob"): {1: ("metadata", _OBJECT_META), 2: ("spec", _CRONJOB_SPEC), 3: ("status", "skip")},
    ("meta.k8s.io/v1", "DeleteOptions"): _DELETE_OPTIONS,
    ("v1", "DeleteOptions"): _DELETE_OPTIONS,
}

_UNKNOWN: Schema = {1: ("typeMeta", {1: ("apiVersion", "string"), 2: ("kind", "string")}), 2: ("raw", "bytes"),
                    3: ("contentEncoding", "string"), 4: ("contentType", "string")}


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ProtobufError("truncated or overlong varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes):
    """(field number, wire type, value) for each field: an int for varints, bytes for the rest."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise ProtobufError("a field runs past the end of the message")
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise ProtobufError("a field runs past the end of the message")
        yield number, wire, value


def _scalar(kind: str, wire: int, value: Any) -> Any:
    if kind in ("string", "bytes"):
        if wire != 2:
            raise ProtobufError(f"expected a length-delimited {kind}")
        if kind == "bytes":
            return value
        try:
            return value.decode()
        except UnicodeDecodeError:
            raise ProtobufError("a string is not valid UTF-8") from None
    if wire != 0:
        raise ProtobufError(f"expected a varint {kind}")
    if kind == "bool":
        return bool(value)
    return value - (1 << 64) if value >= 1 << 63 else value  # int64: two's complement


_STRING_ENTRY: Schema = {1: ("key", "string"), 2: ("value", "string")}
_BYTES_ENTRY: Schema = {1: ("key", "string"), 2: ("value", "bytes")}
_QUANTITY_ENTRY: Schema = {1: ("key", "string"), 2: ("value", {1: ("string", "string")})}
_INT_OR_STRING: Schema = {1: ("type", "int"), 2: ("intVal", "int"), 3: ("strVal", "string")}


def _message(buf: bytes, schema: Schema, depth: int, strict: str = "") -> dict[str, Any]:
    """``strict``: the path of this message in a kind read strictly (see :data:`STRICT_KINDS`)."""
    if depth > MAX_DEPTH:
        raise ProtobufError("the message is nested too deeply")
    out: dict[str, Any] = {}
    for number, wire, value in _fields(buf):
        spec = schema.get(number)
        if spec is None:
            if strict and value not in (0, b""):
                raise ProtobufError(f"field {number} of {strict} is not read by corral from protobuf: send the "
                                    f"object as JSON (Content-Type: application/json)")
            continue  # a field corral does not read
        name, kind = spec
        path = f"{strict}.{name}" if strict else ""
        if kind == "skip":
            continue
        if isinstance(kind, dict):
            if wire != 2:
                raise ProtobufError(f"{name}: expected a message")
            out[name] = _message(value, kind, depth + 1, path)
        elif kind == "intstr":
            if wire != 2:
                raise ProtobufError(f"{name}: expected a message")
            held = _message(value, _INT_OR_STRING, depth + 1)
            out[name] = held.get("strVal", "") if held.get("type") == 1 else held.get("intVal", 0)
        elif isinstance(kind, tuple) and kind[0] == "quantities":
            entry = _message(value, _QUANTITY_ENTRY, depth + 1)
            out.setdefault(name, {})[entry.get("key", "")] = (entry.get("value") or {}).get("string", "")
        elif isinstance(kind, tuple) and kind[0] == "map":
            binary = kind[1:] == ("bytes",)
            entry = _message(value, _BYTES_ENTRY if binary else _STRING_ENTRY, depth + 1)
            held = entry.get("value", b"" if binary else "")
            out.setdefault(name, {})[entry.get("key", "")] = base64.b64encode(held).decode() if binary else held
        elif isinstance(kind, tuple) and kind[0] == "repeated":
            item = kind[1]
            out.setdefault(name, []).append(_message(value, item, depth + 1, path) if isinstance(item, dict)
                                            else _scalar(item, wire, value))
        elif isinstance(kind, str) and kind.endswith("?"):
            scalar = _scalar(kind[:-1], wire, value)
            if scalar:  # Go wrote an unset field: absent, as JSON's omitempty
                out[name] = scalar
        else:
            out[name] = _scalar(kind, wire, value)
    return out


def decode_object(body: bytes) -> dict[str, Any]:
    """The object a protobuf request body carries, with its ``apiVersion`` and ``kind``."""
    if not body.startswith(MAGIC):
        raise ProtobufError("the body does not start with Kubernetes' protobuf prefix")
    unknown = _message(body[len(MAGIC):], _UNKNOWN, 0)
    meta = unknown.get("typeMeta") or {}
    api_version, kind = meta.get("apiVersion", ""), meta.get("kind", "")
    if unknown.get("contentEncoding"):
        raise ProtobufError(f"content encoding {unknown['contentEncoding']!r} is not supported")
    schema = SCHEMAS.get((api_version, kind))
    if schema is None:
        raise ProtobufError(f"corral reads {kind or 'this kind'} ({api_version or '?'}) only as JSON: send "
                            f"Content-Type: application/json")
    strict = kind if (api_version, kind) in STRICT_KINDS else ""
    obj = _message(unknown.get("raw", b""), schema, 1, strict)
    return {"apiVersion": api_version, "kind": kind, **obj}
