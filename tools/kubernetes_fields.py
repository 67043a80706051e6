"""Write src/corral/api/kubectl/kubernetes_fields.py: the field names of Kubernetes' API types for the kinds
corral serves, read from the locked official Python client's models (its ``openapi_types`` and
``attribute_map``, generated from Kubernetes' OpenAPI). Facts only: names and what each field holds.

    .venv/bin/python tools/kubernetes_fields.py

Run it when the locked ``kubernetes`` client changes; the server reads the file to tell a misspelt
field (unknown to Kubernetes: refused under fieldValidation=Strict) from a Kubernetes field corral
keeps but does not act on (a warning, never a refusal).

The module: ``KINDS`` maps "apiVersion/Kind" to a type; ``TYPES`` maps each type to its fields, each
field to "" (a scalar, or a list or map of scalars), "*" (anything: free-form), "T" (an object of
type T), "[]T" (a list of them) or "{}T" (a map of them).
"""

from __future__ import annotations

import json
import os
import re
import sys

from kubernetes import __version__ as client_version
from kubernetes.client import models

ROOTS = {
    "v1/Pod": "V1Pod", "v1/Node": "V1Node", "v1/Namespace": "V1Namespace", "v1/Event": "CoreV1Event",
    "v1/Binding": "V1Binding", "v1/Service": "V1Service", "coordination.k8s.io/v1/Lease": "V1Lease",
    "scheduling.k8s.io/v1/PriorityClass": "V1PriorityClass",
    "rbac.authorization.k8s.io/v1/Role": "V1Role", "rbac.authorization.k8s.io/v1/ClusterRole": "V1ClusterRole",
    "rbac.authorization.k8s.io/v1/RoleBinding": "V1RoleBinding",
    "rbac.authorization.k8s.io/v1/ClusterRoleBinding": "V1ClusterRoleBinding",
    "authorization.k8s.io/v1/SelfSubjectAccessReview": "V1SelfSubjectAccessReview",
    "authorization.k8s.io/v1/SelfSubjectRulesReview": "V1SelfSubjectRulesReview",
    "policy/v1/Eviction": "V1Eviction", "policy/v1/PodDisruptionBudget": "V1PodDisruptionBudget",
    "v1/ConfigMap": "V1ConfigMap", "v1/Secret": "V1Secret",
    "apps/v1/Deployment": "V1Deployment", "apps/v1/ReplicaSet": "V1ReplicaSet", "apps/v1/DaemonSet": "V1DaemonSet",
    "apps/v1/ControllerRevision": "V1ControllerRevision",
    "batch/v1/Job": "V1Job", "batch/v1/CronJob": "V1CronJob",
}
OUT = os.path.join(os.path.dirname(__file__), "..", "src", "corral", "api", "kubectl", "kubernetes_fields.py")


def field_kind(openapi_type: str) -> tuple[str, str | None]:
    """(what the file says, the model to visit next or None)."""
    if openapi_type == "object":
        return "*", None
    for pattern, prefix in ((r"List\[(\w+)\]", "[]"), (r"Dict\[str, (\w+)\]", "{}"), (r"(\w+)", "")):
        m = re.fullmatch(pattern, openapi_type)
        if m and hasattr(models, m[1]):
            return prefix + m[1], m[1]
    return "", None


def main() -> int:
    types: dict[str, dict[str, str]] = {}
    todo = list(ROOTS.values())
    while todo:
        name = todo.pop()
        if name in types:
            continue
        cls = getattr(models, name)
        fields = types[name] = {}
        for attr, openapi_type in cls.openapi_types.items():
            shown, nested = field_kind(openapi_type)
            fields[cls.attribute_map[attr]] = shown
            if nested is not None:
                todo.append(nested)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(f'''"""Kubernetes' field names for the kinds corral serves, from the official Python client
{client_version}'s models. Written by tools/kubernetes_fields.py; do not edit (run it again).
"""

# fmt: off
CLIENT = {client_version!r}
KINDS = {json.dumps(ROOTS, sort_keys=True)}
TYPES = {json.dumps(dict(sorted(types.items())), sort_keys=True)}
''')
    print(f"{len(types)} types for {len(ROOTS)} kinds from kubernetes {client_version} -> {os.path.normpath(OUT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
