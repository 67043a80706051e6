"""The roles every cluster starts with, as Kubernetes names them, and who holds them.

``cluster-admin`` (everything), ``admin`` (everything in a namespace, bindings included), ``edit``
(workloads and their configuration, not RBAC), ``view`` (read, not Secrets); and the system roles:
``system:discovery`` and ``system:basic-user`` for every authenticated user (discovery, OpenAPI,
version, ``kubectl auth can-i``), ``system:public-info-viewer`` (health, version), and
``system:kube-scheduler`` for a scheduler running as its own process; ``corral:planner`` (``corral
plan``), bound to nobody at first. Nodes are judged by the node
authoriser, not by RBAC. The server recreates a missing default at start; it never overwrites one.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CLUSTER_ROLES", "CLUSTER_ROLE_BINDINGS"]

READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
# What users run, by API group; a user's own view of each (status, logs, scale, corral's explain).
_WORKLOADS: dict[str, list[str]] = {
    "": ["pods", "pods/log", "pods/status", "pods/explain", "configmaps", "events", "services"],
    "apps": ["deployments", "deployments/scale", "deployments/status", "replicasets", "replicasets/scale",
             "replicasets/status", "daemonsets", "daemonsets/status", "controllerrevisions"],
    "batch": ["jobs", "jobs/status", "cronjobs", "cronjobs/status"],
    "policy": ["poddisruptionbudgets", "poddisruptionbudgets/status"],
    "placement.corral.dev": ["placements", "placements/status"],
    "scheduling.corral.dev": ["podgroups", "podgroups/status"],
}
# What only a writer does: evict a pod, read Secrets (their values are as good as write access), run
# commands in a pod or reach its ports (exec, attach, port-forward: as good as the pod's own rights).
_WRITER_ONLY: dict[str, list[str]] = {"": ["pods/eviction", "secrets", "pods/exec", "pods/attach",
                                           "pods/portforward"]}


def _rule(verbs: list[str], resources: list[str], groups: list[str] | None = None) -> dict[str, Any]:
    return {"apiGroups": groups if groups is not None else [""], "resources": resources, "verbs": verbs}


def _per_group(verbs: list[str], *tables: dict[str, list[str]]) -> list[dict[str, Any]]:
    groups = sorted({g for t in tables for g in t})
    return [_rule(verbs, [r for t in tables for r in t.get(g, ())], [g]) for g in groups]


# A user reads these views but does not write them: status is what the controllers, the scheduler and
# the agents report (Kubernetes' admin and edit roles do not write it either), and logs and explain
# are views only.
_READ_ONLY_VIEWS = ("/status", "/log", "/explain")


def _writable(table: dict[str, list[str]]) -> dict[str, list[str]]:
    return {g: [r for r in rs if not r.endswith(_READ_ONLY_VIEWS)] for g, rs in table.items()}


def _writer(*tables: dict[str, list[str]]) -> list[dict[str, Any]]:
    """A writer's rules: read every resource of ``tables``, write all but their read-only views."""
    return [*_per_group(READ, *tables), *_per_group(WRITE, *map(_writable, tables))]


def _role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}}, "rules": rules}


# kubectl top, for whoever may read pods (nodes' figures only under a ClusterRoleBinding), as
# metrics-server's aggregated reader role gives it.
_METRICS = _rule(READ, ["pods", "nodes"], ["metrics.k8s.io"])

CLUSTER_ROLES: list[dict[str, Any]] = [
    _role("cluster-admin", [_rule(["*"], ["*"], ["*"]), {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
    _role("admin", [
        *_writer(_WORKLOADS, _WRITER_ONLY),
        _rule(READ + WRITE, ["roles", "rolebindings"], ["rbac.authorization.k8s.io"]),
        _rule(READ + WRITE, ["leases"], ["coordination.k8s.io"]),
        _rule(READ, ["namespaces"]),
        _METRICS,
    ]),
    _role("edit", [
        *_writer(_WORKLOADS, _WRITER_ONLY),
        _rule(READ, ["namespaces"]),
        _METRICS,
    ]),
    _role("view", [
        *_per_group(READ, _WORKLOADS),
        _rule(READ, ["namespaces"]),
        _METRICS,
    ]),
    _role("system:discovery", [{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*",
                                                    "/version", "/version/"], "verbs": ["get"]}]),
    _role("system:public-info-viewer", [{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version",
                                                             "/version/"], "verbs": ["get"]}]),
    _role("system:basic-user", [_rule(["create"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                                      ["authorization.k8s.io"])]),
    # corral plan: a dry run that shows every node and where every pod runs, so only for those
    # bound to it (kubectl create clusterrolebinding NAME --clusterrole=corral:planner --user=U).
    _role("corral:planner", [{"nonResourceURLs": ["/corral/v1/plan", "/corral/v1/plan/version"],
                              "verbs": ["get", "post"]}]),
    _role("system:kube-scheduler", [
        _rule(READ, ["nodes", "namespaces", "pods"]),
        _rule(["delete"], ["pods"]),  # preemption's victims
        _rule(["create"], ["pods/binding", "bindings"]),
        _rule(["patch", "update"], ["pods/status"]),
        _rule(["create", "patch", "update"], ["events"]),
        _rule(READ, ["priorityclasses"], ["scheduling.k8s.io"]),
        _rule(READ, ["poddisruptionbudgets"], ["policy"]),  # preemption prefers victims within budgets
        _rule(READ + ["create", "update", "patch"], ["leases"], ["coordination.k8s.io"]),
        _rule(READ, ["podgroups"], ["scheduling.corral.dev"]),
        _rule(["patch", "update"], ["podgroups/status"], ["scheduling.corral.dev"]),
        _rule(READ, ["placements"], ["placement.corral.dev"]),
        _rule(["patch", "update"], ["placements/status"], ["placement.corral.dev"]),  # its decisions
    ]),
]


def _binding(name: str, role: str, kind: str, subject: str) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": subject}]}


CLUSTER_ROLE_BINDINGS: list[dict[str, Any]] = [
    _binding("cluster-admin", "cluster-admin", "Group", "system:masters"),
    _binding("system:discovery", "system:discovery", "Group", "system:authenticated"),
    _binding("system:basic-user", "system:basic-user", "Group", "system:authenticated"),
    _binding("system:public-info-viewer", "system:public-info-viewer", "Group", "system:authenticated"),
    _binding("system:kube-scheduler", "system:kube-scheduler", "User", "system:kube-scheduler"),
]
