"""Configuration for pods, in ``v1``: ConfigMap and Secret, as Kubernetes defines them.

Models and defaults; validation is in :mod:`corral.api.kinds.config_validation`. A Secret's
``stringData`` is write-only, as in Kubernetes: each write folds it into ``data`` (base64), so what
is stored and read back has ``data`` alone. No I/O here.
"""

from __future__ import annotations

import base64
from typing import Any

from corral.api.models import Model, ObjectMeta

__all__ = ["ConfigMap", "Secret", "CONFIG_DEFAULTS", "MAX_DATA_BYTES", "SECRET_TYPES", "secret_value", "references"]

MAX_DATA_BYTES = 1024 * 1024  # a ConfigMap's or Secret's data, all keys together (Kubernetes' limit)
OPAQUE = "Opaque"
# The built-in types and the keys each must hold (Kubernetes' ValidateSecret); any other type
# (``example.com/thing``) is the user's own and holds what it likes.
SECRET_TYPES: dict[str, tuple[str, ...]] = {
    OPAQUE: (),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/basic-auth": (),  # username, password or both: checked on their own
    "bootstrap.kubernetes.io/token": (),
    "kubernetes.io/service-account-token": (),
}


class ConfigMap(Model, tag_field="kind", tag="ConfigMap"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    data: dict[str, str] | None = None
    binary_data: dict[str, str] | None = None  # base64, as JSON carries bytes
    immutable: bool | None = None


class Secret(Model, tag_field="kind", tag="Secret"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    data: dict[str, str] | None = None  # base64
    string_data: dict[str, str] | None = None  # write-only: folded into data on every write
    type: str | None = None
    immutable: bool | None = None


def secret_value(encoded: str) -> bytes:
    """A ``data`` value's bytes (base64 as JSON carries them); raises ``ValueError``."""
    return base64.b64decode(encoded, validate=True)


def references(pod: dict[str, Any]) -> set[tuple[str, str]]:
    """The ConfigMaps and Secrets ``pod`` takes configuration from, as (``configmaps`` | ``secrets``,
    name): its volumes, and its containers' ``env[].valueFrom`` and ``envFrom``."""
    spec = pod.get("spec") or {}
    out: set[tuple[str, str]] = set()
    for volume in spec.get("volumes") or ():
        if (volume.get("configMap") or {}).get("name"):
            out.add(("configmaps", volume["configMap"]["name"]))
        if (volume.get("secret") or {}).get("secretName"):
            out.add(("secrets", volume["secret"]["secretName"]))
    for container in (*(spec.get("initContainers") or ()), *(spec.get("containers") or ())):
        for env in container.get("env") or ():
            source = env.get("valueFrom") or {}
            for field, resource in (("configMapKeyRef", "configmaps"), ("secretKeyRef", "secrets")):
                if (source.get(field) or {}).get("name"):
                    out.add((resource, source[field]["name"]))
        for source in container.get("envFrom") or ():
            for field, resource in (("configMapRef", "configmaps"), ("secretRef", "secrets")):
                if (source.get(field) or {}).get("name"):
                    out.add((resource, source[field]["name"]))
    return out


def _secret_defaults(obj: dict[str, Any]) -> None:
    if not obj.get("type"):
        obj["type"] = OPAQUE
    plain = obj.pop("stringData", None)
    if isinstance(plain, dict) and plain:
        data = obj.get("data")
        data = obj["data"] = dict(data) if isinstance(data, dict) else {}
        for key, value in plain.items():  # stringData wins over data, as in Kubernetes
            data[key] = base64.b64encode(value.encode()).decode() if isinstance(value, str) else value


# Applied on create and on every write (so the stored object never holds stringData).
CONFIG_DEFAULTS = {"Secret": _secret_defaults}
