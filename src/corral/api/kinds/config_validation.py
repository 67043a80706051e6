"""Validation of ConfigMaps and Secrets, and of what a pod takes from them (``env[].valueFrom``,
``envFrom``, ``volumes``, ``volumeMounts``), with Kubernetes' field paths and messages. Imported by
:mod:`corral.api.validation` alone (which it builds on). No I/O here.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Callable

from corral.api import models
from corral.api.kinds.config import MAX_DATA_BYTES, SECRET_TYPES, ConfigMap, Secret
from corral.api.quantity import QuantityError, parse_quantity
from corral.api.validation import (DUPLICATE, FORBIDDEN, INVALID, REQUIRED, TOO_LONG, Cause, _invalid, _not_supported,
                                   dns1123_subdomain, qualified_name, unique_label)

__all__ = ["CONFIG_CHECKS", "CONFIG_UPDATE_CHECKS", "pod_configuration"]

_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
# What env[].valueFrom.fieldRef may name (Kubernetes' list for env, not for downward-API volumes).
FIELD_PATHS = ("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
               "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")
_FIELD_MAPS = re.compile(r"^metadata\.(labels|annotations)\['(?P<key>[^']+)'\]$")
RESOURCE_FIELDS = ("limits.cpu", "limits.memory", "limits.ephemeral-storage", "requests.cpu", "requests.memory",
                   "requests.ephemeral-storage")
MAX_MODE = 0o777


def config_key(path: str, key: str) -> list[Cause]:
    """A ConfigMap's or Secret's key: what may become a file name (Kubernetes' IsConfigMapKey)."""
    why = []
    if len(key) > 253:
        why.append("must be no more than 253 characters")
    if not _KEY.match(key):
        why.append("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name', "
                   "or 'KEY_NAME', or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")
    if key in (".", ".."):
        why.append(f"must not be '{key}'")
    elif key.startswith(".."):
        why.append("must not start with '..'")
    return [_invalid(path, key, "; ".join(why))] if why else []


def _keys(field: str, data: dict[str, str] | None) -> list[Cause]:
    return [c for key in data or () for c in config_key(f"{field}[{key}]", key)]


def _size(values: list[int]) -> list[Cause]:
    if sum(values) > MAX_DATA_BYTES:
        return [Cause("data", TOO_LONG, f"Too long: must have at most {MAX_DATA_BYTES} bytes")]
    return []


def _decoded(field: str, data: dict[str, str] | None, causes: list[Cause]) -> dict[str, bytes]:
    out = {}
    for key, value in (data or {}).items():
        try:
            out[key] = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            causes.append(Cause(f"{field}[{key}]", INVALID, "Invalid value: illegal base64 data"))
    return out


def _config_map(cm: ConfigMap) -> list[Cause]:
    causes = _keys("data", cm.data) + _keys("binaryData", cm.binary_data)
    for key in set(cm.data or ()) & set(cm.binary_data or ()):
        causes.append(Cause(f"data[{key}]", DUPLICATE, f'Duplicate value: "{key}": duplicate of key present in '
                                                       "binaryData"))
    binary = _decoded("binaryData", cm.binary_data, causes)
    return causes + _size([len(k) + len(v.encode()) for k, v in (cm.data or {}).items()]
                          + [len(k) + len(v) for k, v in binary.items()])


def _secret(secret: Secret) -> list[Cause]:
    causes = _keys("data", secret.data) + _keys("stringData", secret.string_data)
    data = _decoded("data", secret.data, causes)
    data.update({k: v.encode() for k, v in (secret.string_data or {}).items()})
    causes += _size([len(k) + len(v) for k, v in data.items()])
    kind = secret.type or "Opaque"
    if kind not in SECRET_TYPES:
        causes += qualified_name("type", kind)
    for key in SECRET_TYPES.get(kind, ()):
        if key not in data:
            causes.append(Cause(f"data[{key}]", REQUIRED, "Required value"))
    if kind == "kubernetes.io/basic-auth" and "username" not in data and "password" not in data:
        causes.append(Cause("data[username]", REQUIRED, "Required value: either username or password or both must "
                                                        "be provided"))
    return causes


def _immutable(kind: str, current: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    """Kubernetes' update rules: a Secret's type is fixed; an ``immutable`` one keeps its data and stays
    immutable."""
    causes = []
    if kind == "Secret" and new.get("type") != current.get("type"):
        causes.append(_invalid("type", new.get("type"), "field is immutable"))
    if current.get("immutable"):
        if not new.get("immutable"):
            causes.append(Cause("immutable", FORBIDDEN, "Forbidden: field is immutable when `immutable` is set"))
        for field in ("data", "binaryData"):
            if new.get(field) != current.get(field):
                causes.append(Cause(field, FORBIDDEN, "Forbidden: field is immutable when `immutable` is set"))
    return causes


# --- what pods take from them ----------------------------------------------------------------------------


def _mode(path: str, mode: int | None) -> list[Cause]:
    if mode is not None and not 0 <= mode <= MAX_MODE:
        return [_invalid(path, mode, "must be a number between 0 and 0777 (octal), both inclusive")]
    return []


def _items(path: str, items: list[models.KeyToPath] | None) -> list[Cause]:
    causes: list[Cause] = []
    for i, item in enumerate(items or ()):
        p = f"{path}.items[{i}]"
        if not item.key:
            causes.append(Cause(f"{p}.key", REQUIRED, "Required value"))
        causes += _relative(f"{p}.path", item.path, required=True)
        causes += _mode(f"{p}.mode", item.mode)
    return causes


def _relative(path: str, value: str | None, *, required: bool) -> list[Cause]:
    """A path inside a volume: relative, no ``..`` element (what keeps a file inside its volume)."""
    if not value:
        return [Cause(path, REQUIRED, "Required value")] if required else []
    if value.startswith("/"):
        return [_invalid(path, value, "must be a relative path")]
    if ".." in value.split("/"):
        return [_invalid(path, value, "must not contain '..'")]
    return []


def _volumes(volumes: list[models.Volume] | None) -> tuple[list[Cause], set[str]]:
    causes: list[Cause] = []
    names: set[str] = set()
    for i, v in enumerate(volumes or ()):
        p = f"spec.volumes[{i}]"
        causes += unique_label(f"{p}.name", v.name, names)
        sources = [s for s in (v.config_map, v.secret, v.empty_dir) if s is not None]
        if len(sources) > 1:
            causes.append(Cause(p, FORBIDDEN, "Forbidden: may not specify more than 1 volume type"))
        if v.config_map is not None:
            if not v.config_map.name:
                causes.append(Cause(f"{p}.configMap.name", REQUIRED, "Required value"))
            causes += _mode(f"{p}.configMap.defaultMode", v.config_map.default_mode)
            causes += _items(f"{p}.configMap", v.config_map.items)
        if v.secret is not None:
            if not v.secret.secret_name:
                causes.append(Cause(f"{p}.secret.secretName", REQUIRED, "Required value"))
            causes += _mode(f"{p}.secret.defaultMode", v.secret.default_mode)
            causes += _items(f"{p}.secret", v.secret.items)
        if v.empty_dir is not None:
            if v.empty_dir.medium not in (None, "", "Memory"):
                causes.append(_not_supported(f"{p}.emptyDir.medium", v.empty_dir.medium, ("", "Memory")))
            if v.empty_dir.size_limit is not None:
                try:
                    parse_quantity(v.empty_dir.size_limit)
                except QuantityError as exc:
                    causes.append(_invalid(f"{p}.emptyDir.sizeLimit", v.empty_dir.size_limit, str(exc)))
    return causes, names


def _env(path: str, env: list[models.EnvVar] | None) -> list[Cause]:
    causes: list[Cause] = []
    for i, e in enumerate(env or ()):
        p = f"{path}.env[{i}]"
        if e.name and not _ENV_NAME.match(e.name):
            causes.append(_invalid(f"{p}.name", e.name, "a valid environment variable name must consist of "
                                   "alphabetic characters, digits, '_', '-', or '.', and must not start with a digit"))
        source = e.value_from
        if source is None:
            continue
        p = f"{p}.valueFrom"
        given = [s for s in (source.field_ref, source.resource_field_ref, source.config_map_key_ref,
                             source.secret_key_ref) if s is not None]
        if e.value:
            causes.append(Cause(p, INVALID, "Invalid value: \"\": may not be specified when `value` is not empty"))
        if len(given) != 1:
            causes.append(Cause(p, INVALID, "Invalid value: \"\": may not have more than one field specified at a time"
                                if given else "Invalid value: \"\": must specify one of: `fieldRef`, "
                                "`resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
        for field, ref in (("configMapKeyRef", source.config_map_key_ref), ("secretKeyRef", source.secret_key_ref)):
            if ref is None:
                continue
            if not ref.name:
                causes.append(Cause(f"{p}.{field}.name", REQUIRED, "Required value"))
            if not ref.key:
                causes.append(Cause(f"{p}.{field}.key", REQUIRED, "Required value"))
            else:
                causes += config_key(f"{p}.{field}.key", ref.key)
        if source.field_ref is not None:
            fp = source.field_ref.field_path
            if not fp:
                causes.append(Cause(f"{p}.fieldRef.fieldPath", REQUIRED, "Required value"))
            elif fp not in FIELD_PATHS and not _FIELD_MAPS.match(fp):
                causes.append(_not_supported(f"{p}.fieldRef.fieldPath", fp, FIELD_PATHS))
        if source.resource_field_ref is not None:
            rf = source.resource_field_ref
            if rf.resource not in RESOURCE_FIELDS:
                causes.append(_not_supported(f"{p}.resourceFieldRef.resource", rf.resource, RESOURCE_FIELDS))
            if rf.divisor is not None:
                try:
                    if parse_quantity(rf.divisor) <= 0:
                        raise QuantityError("must be greater than 0")
                except QuantityError as exc:
                    causes.append(_invalid(f"{p}.resourceFieldRef.divisor", rf.divisor, str(exc)))
    return causes


def _env_from(path: str, sources: list[models.EnvFromSource] | None) -> list[Cause]:
    causes: list[Cause] = []
    for i, s in enumerate(sources or ()):
        p = f"{path}.envFrom[{i}]"
        refs = [r for r in (s.config_map_ref, s.secret_ref) if r is not None]
        if len(refs) != 1:
            causes.append(Cause(p, INVALID, "Invalid value: \"\": may not have more than one field specified at a time"
                                if refs else "Invalid value: \"\": must specify one of: `configMapRef` or `secretRef`"))
        for field, ref in (("configMapRef", s.config_map_ref), ("secretRef", s.secret_ref)):
            if ref is not None:
                causes += [Cause(f"{p}.{field}.name", REQUIRED, "Required value")] if not ref.name else \
                    dns1123_subdomain(f"{p}.{field}.name", ref.name)
    return causes


def _mounts(path: str, mounts: list[models.VolumeMount] | None, volumes: set[str]) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, m in enumerate(mounts or ()):
        p = f"{path}.volumeMounts[{i}]"
        if not m.name:
            causes.append(Cause(f"{p}.name", REQUIRED, "Required value"))
        elif m.name not in volumes:
            causes.append(Cause(f"{p}.name", "FieldValueNotFound", f'Not found: "{m.name}"'))
        if not m.mount_path:
            causes.append(Cause(f"{p}.mountPath", REQUIRED, "Required value"))
        else:
            if ".." in m.mount_path.split("/"):
                causes.append(_invalid(f"{p}.mountPath", m.mount_path, "must not contain '..'"))
            if m.mount_path.rstrip("/") in seen:
                causes.append(_invalid(f"{p}.mountPath", m.mount_path, "must be unique"))
            seen.add(m.mount_path.rstrip("/"))
        causes += _relative(f"{p}.subPath", m.sub_path, required=False)
    return causes


def pod_configuration(spec: models.PodSpec) -> list[Cause]:
    """The pod's volumes, each container's mounts of them, and its environment's sources."""
    causes, volumes = _volumes(spec.volumes)
    for kind, containers in (("initContainers", spec.init_containers), ("containers", spec.containers)):
        for i, c in enumerate(containers or ()):
            p = f"spec.{kind}[{i}]"
            causes += _env(p, c.env) + _env_from(p, c.env_from) + _mounts(p, c.volume_mounts, volumes)
    return causes


CONFIG_CHECKS: dict[str, Callable[[Any], list[Cause]]] = {"ConfigMap": _config_map, "Secret": _secret}
CONFIG_UPDATE_CHECKS: dict[str, Callable[[str, dict[str, Any], dict[str, Any]], list[Cause]]] = {
    "ConfigMap": _immutable, "Secret": _immutable}
