"""Discovery: ``/api``, ``/apis``, ``/api/v1``, ``/apis/{group}/{version}`` and ``/version``.

Built once from the resource registry; answered from bytes.
"""

from __future__ import annotations

import platform
from typing import Any

import msgspec

import corral
from corral import GIT_VERSION, KUBERNETES_VERSION
from corral.agent.node_info import go_arch
from corral.api.resources import RESOURCES, groups

__all__ = ["discovery_documents", "KUBERNETES_VERSION"]  # KUBERNETES_VERSION: from corral


_encode = msgspec.json.Encoder().encode


def _resource_list(group: str, version: str) -> dict[str, Any]:
    resources = []
    for r in RESOURCES:
        if r.group != group or r.version != version:
            continue
        resources.append({
            "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
            "kind": r.kind, "verbs": list(r.verbs), "shortNames": list(r.short_names),
        })
        for sub in r.subresources:
            verbs = {"binding": ["create"], "eviction": ["create"], "log": ["get"], "exec": ["create", "get"],
                     "attach": ["create", "get"], "portforward": ["create", "get"]}.get(sub, ["get", "patch", "update"])
            kind = {"binding": "Binding", "eviction": "Eviction", "exec": "PodExecOptions",
                    "attach": "PodAttachOptions", "portforward": "PodPortForwardOptions"}.get(sub, r.kind)
            entry = {"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced,
                     "kind": kind, "verbs": verbs}
            if sub == "eviction":  # kubectl drain evicts (rather than deletes) only when this names policy/v1
                entry.update(group="policy", version="v1")
            resources.append(entry)
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version, "resources": resources}


def discovery_documents() -> dict[str, bytes]:
    """Path → JSON body for every discovery endpoint."""
    docs: dict[str, Any] = {
        "/api": {"kind": "APIVersions", "versions": ["v1"],
                 "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]},
        "/api/v1": _resource_list("", "v1"),
    }
    group_list = []
    for group, versions in groups().items():
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        group_list.append({"name": group, "versions": gvs, "preferredVersion": gvs[0]})
        docs[f"/apis/{group}"] = {"kind": "APIGroup", "apiVersion": "v1", "name": group,
                                  "versions": gvs, "preferredVersion": gvs[0]}
        for v in versions:
            docs[f"/apis/{group}/{v}"] = _resource_list(group, v)
    # The resource metrics API (kubectl top looks for it here), served from the agents' figures.
    metrics = [{"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"}]
    group_list.append({"name": "metrics.k8s.io", "versions": metrics, "preferredVersion": metrics[0]})
    docs["/apis/metrics.k8s.io"] = {"kind": "APIGroup", "apiVersion": "v1", "name": "metrics.k8s.io",
                                    "versions": metrics, "preferredVersion": metrics[0]}
    docs["/apis/metrics.k8s.io/v1beta1"] = {
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "metrics.k8s.io/v1beta1",
        "resources": [{"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics",
                       "verbs": ["get", "list"]},
                      {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics",
                       "verbs": ["get", "list"]}]}
    docs["/apis"] = {"kind": "APIGroupList", "apiVersion": "v1", "groups": group_list}
    # In Kubernetes' form, for the Kubernetes release whose API corral serves (and whose kubectl
    # and Python client its tests run), with corral's own version as build metadata, as k3s
    # writes v1.28.4+k3s1: kubectl compares major.minor with its own and warned of a skew of 36
    # minor versions when this said v0.1.0.
    major, minor = KUBERNETES_VERSION.split(".")[:2]
    docs["/version"] = {
        "major": major, "minor": minor, "gitVersion": GIT_VERSION,
        "gitCommit": "", "gitTreeState": "", "buildDate": "", "goVersion": "",
        "compiler": f"corral {corral.__version__} (Python {platform.python_version()})",
        "platform": f"{platform.system().lower()}/{go_arch()}", "corralVersion": corral.__version__,
    }
    docs["/version/"] = docs["/version"]  # as Kubernetes serves it too (the Python client asks there)
    return {path: _encode(doc) for path, doc in docs.items()}
