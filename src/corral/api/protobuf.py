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

from typing import Any, Union

__all__ = ["MAGIC", "CONTENT_TYPE", "ProtobufError", "decode_object", "SCHEMAS"]

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAX_DEPTH = 32

# What a field holds: "string", "bool", "int", ("map",) of strings, a nested schema (dict), or
# ("repeated", one of those).
Kind = Union[str, tuple, dict]
Schema = dict[int, tuple[str, Kind]]


class ProtobufError(ValueError):
    """A body that is not a protobuf object corral can read."""


_OBJECT_META: Schema = {
    1: ("name", "string"), 2: ("generateName", "string"), 3: ("namespace", "string"), 5: ("uid", "string"),
    6: ("resourceVersion", "string"), 11: ("labels", ("map",)), 12: ("annotations", ("map",)),
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


def _message(buf: bytes, schema: Schema, depth: int) -> dict[str, Any]:
    if depth > MAX_DEPTH:
        raise ProtobufError("the message is nested too deeply")
    out: dict[str, Any] = {}
    for number, wire, value in _fields(buf):
        spec = schema.get(number)
        if spec is None:
            continue  # a field corral does not read
        name, kind = spec
        if isinstance(kind, dict):
            if wire != 2:
                raise ProtobufError(f"{name}: expected a message")
            out[name] = _message(value, kind, depth + 1)
        elif isinstance(kind, tuple) and kind[0] == "map":
            entry = _message(value, {1: ("key", "string"), 2: ("value", "string")}, depth + 1)
            out.setdefault(name, {})[entry.get("key", "")] = entry.get("value", "")
        elif isinstance(kind, tuple) and kind[0] == "repeated":
            item = kind[1]
            out.setdefault(name, []).append(_message(value, item, depth + 1) if isinstance(item, dict)
                                            else _scalar(item, wire, value))
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
    obj = _message(unknown.get("raw", b""), schema, 1)
    return {"apiVersion": api_version, "kind": kind, **obj}
