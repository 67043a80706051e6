"""Kubernetes' own field names, to tell a misspelt field from one corral keeps without acting on it.

kubectl sends ``fieldValidation=Strict`` by default. Kubernetes refuses a field its schema does not
have; corral models fewer fields than Kubernetes, so refusing every field corral does not model
would refuse most real manifests (probes, volumes, security contexts). Under Strict corral refuses
what Kubernetes would refuse, and warns about the rest. The field names come from
``kubernetes_fields.json`` (written by ``tools/kubernetes_fields.py`` from the locked official
client); a kind it does not list (corral's own) is judged by corral's model alone.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

__all__ = ["kubernetes_unknown_fields", "knows_kind"]

_PATH = os.path.join(os.path.dirname(__file__), "kubernetes_fields.json")


@functools.lru_cache(maxsize=1)
def _schema() -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    with open(_PATH, encoding="utf-8") as f:
        data = json.load(f)
    return data["kinds"], data["types"]


def knows_kind(api_version: str, kind: str) -> bool:
    return f"{api_version}/{kind}" in _schema()[0]


def _walk(value: Any, type_name: str, path: str, out: list[str]) -> None:
    if not isinstance(value, dict):
        return
    fields = _schema()[1].get(type_name)
    if fields is None:
        return
    for key, child in value.items():
        where = f"{path}.{key}" if path else key
        held = fields.get(key)
        if held is None:
            out.append(where)
        elif held.startswith("[]"):
            if isinstance(child, list):
                for i, item in enumerate(child):
                    _walk(item, held[2:], f"{where}[{i}]", out)
        elif held.startswith("{}"):
            if isinstance(child, dict):
                for k, item in child.items():
                    _walk(item, held[2:], f"{where}[{k}]", out)
        elif held not in ("", "*"):
            _walk(child, held, where, out)


def kubernetes_unknown_fields(api_version: str, kind: str, obj: dict[str, Any]) -> list[str] | None:
    """Field paths in ``obj`` that Kubernetes' schema of the kind does not have (in corral's path
    form: ``spec.containers[0].imagePullPolice``); None for a kind Kubernetes does not define."""
    root = _schema()[0].get(f"{api_version}/{kind}")
    if root is None:
        return None
    out: list[str] = []
    _walk(obj, root, "", out)
    return out
