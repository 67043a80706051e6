"""Builders for API objects in tests: ``make_pod("p").requests(cpu="500m").obj``.

Every method returns the builder, so calls chain; ``.obj`` is the finished dict (a fresh copy).
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from typing import Any

__all__ = ["make_pod", "make_node", "PodBuilder", "NodeBuilder"]


def _ts(seconds_ago: float = 0.0) -> str:
    return (datetime.now(timezone.utc) - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


class PodBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
            "spec": {"schedulerName": "default-scheduler",
                     "containers": [{"name": "main", "image": "registry.local/app:1"}]},
            "status": {"phase": "Pending"},
        }

    @property
    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)

    @property
    def spec(self) -> dict[str, Any]:
        return self._obj["spec"]

    def requests(self, **amounts: Any) -> "PodBuilder":
        res = self.spec["containers"][0].setdefault("resources", {}).setdefault("requests", {})
        res.update({k.replace("_", "-"): str(v) for k, v in amounts.items()})
        return self

    def labels(self, **labels: str) -> "PodBuilder":
        self._obj["metadata"].setdefault("labels", {}).update(labels)
        return self

    def label(self, key: str, value: str) -> "PodBuilder":
        self._obj["metadata"].setdefault("labels", {})[key] = value
        return self

    def priority(self, value: int) -> "PodBuilder":
        self.spec["priority"] = value
        return self

    def scheduler(self, name: str) -> "PodBuilder":
        self.spec["schedulerName"] = name
        return self

    def node(self, name: str) -> "PodBuilder":
        """Already bound to ``name`` (an existing pod)."""
        self.spec["nodeName"] = name
        self._obj["status"]["phase"] = "Running"
        return self

    def image(self, image: str) -> "PodBuilder":
        self.spec["containers"][0]["image"] = image
        return self

    def container(self, name: str, image: str) -> "PodBuilder":
        """One more container."""
        self.spec["containers"].append({"name": name, "image": image})
        return self

    def init_container(self, name: str, image: str) -> "PodBuilder":
        self.spec.setdefault("initContainers", []).append({"name": name, "image": image})
        return self

    def node_selector(self, **labels: str) -> "PodBuilder":
        self.spec.setdefault("nodeSelector", {}).update(labels)
        return self

    def require_node(self, key: str, operator: str, *values: str) -> "PodBuilder":
        """Adds a requirement to the first required node-affinity term."""
        terms = (self.spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
                 .setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
                 .setdefault("nodeSelectorTerms", [{"matchExpressions": []}]))
        terms[0]["matchExpressions"].append({"key": key, "operator": operator, **({"values": list(values)} if values else {})})
        return self

    def require_node_term(self, *expressions: tuple) -> "PodBuilder":
        """Adds another required term (terms are ORed); each expression is (key, operator, *values)."""
        terms = (self.spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
                 .setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
                 .setdefault("nodeSelectorTerms", []))
        terms.append({"matchExpressions": [
            {"key": e[0], "operator": e[1], **({"values": list(e[2:])} if len(e) > 2 else {})} for e in expressions]})
        return self

    def match_field(self, operator: str, *names: str) -> "PodBuilder":
        terms = (self.spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
                 .setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
                 .setdefault("nodeSelectorTerms", []))
        terms.append({"matchFields": [{"key": "metadata.name", "operator": operator, "values": list(names)}]})
        return self

    def prefer_node(self, weight: int, key: str, operator: str, *values: str) -> "PodBuilder":
        prefs = (self.spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
                 .setdefault("preferredDuringSchedulingIgnoredDuringExecution", []))
        prefs.append({"weight": weight, "preference": {"matchExpressions": [
            {"key": key, "operator": operator, **({"values": list(values)} if values else {})}]}})
        return self

    def toleration(self, key: str = "", value: str = "", effect: str = "", operator: str | None = None) -> "PodBuilder":
        t: dict[str, Any] = {"operator": operator or ("Equal" if value else "Exists")}
        if key:
            t["key"] = key
        if value:
            t["value"] = value
        if effect:
            t["effect"] = effect
        self.spec.setdefault("tolerations", []).append(t)
        return self

    def host_port(self, port: int, protocol: str = "TCP") -> "PodBuilder":
        self.spec["containers"][0].setdefault("ports", []).append(
            {"containerPort": port, "hostPort": port, "protocol": protocol})
        return self

    def _pod_term(self, kind: str, required: bool, topology_key: str, match: dict[str, str],
                  weight: int = 1, namespaces: list[str] | None = None,
                  namespace_selector: dict | None = None) -> "PodBuilder":
        term: dict[str, Any] = {"labelSelector": {"matchLabels": match}, "topologyKey": topology_key}
        if namespaces is not None:
            term["namespaces"] = namespaces
        if namespace_selector is not None:
            term["namespaceSelector"] = namespace_selector
        aff = self.spec.setdefault("affinity", {}).setdefault(kind, {})
        if required:
            aff.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(term)
        else:
            aff.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(
                {"weight": weight, "podAffinityTerm": term})
        return self

    def affinity(self, topology_key: str, **match: str) -> "PodBuilder":
        return self._pod_term("podAffinity", True, topology_key, match)

    def anti_affinity(self, topology_key: str, namespaces: list[str] | None = None, **match: str) -> "PodBuilder":
        return self._pod_term("podAntiAffinity", True, topology_key, match, namespaces=namespaces)

    def prefer_affinity(self, weight: int, topology_key: str, **match: str) -> "PodBuilder":
        return self._pod_term("podAffinity", False, topology_key, match, weight)

    def prefer_anti_affinity(self, weight: int, topology_key: str, **match: str) -> "PodBuilder":
        return self._pod_term("podAntiAffinity", False, topology_key, match, weight)

    def spread(self, max_skew: int, topology_key: str, hard: bool = True, min_domains: int | None = None,
               **match: str) -> "PodBuilder":
        c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": topology_key,
                             "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
                             "labelSelector": {"matchLabels": match}}
        if min_domains is not None:
            c["minDomains"] = min_domains
        self.spec.setdefault("topologySpreadConstraints", []).append(c)
        return self

    def controlled(self) -> "PodBuilder":
        self._obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}]
        return self

    def phase(self, phase: str) -> "PodBuilder":
        self._obj["status"]["phase"] = phase
        return self


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {
                "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": _ts()}],
            },
        }

    @property
    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)

    def capacity(self, **amounts: Any) -> "NodeBuilder":
        values = {k.replace("_", "-"): str(v) for k, v in amounts.items()}
        self._obj["status"]["capacity"] = dict(values)
        self._obj["status"]["allocatable"] = dict(values)
        return self

    def allocatable(self, **amounts: Any) -> "NodeBuilder":
        self._obj["status"]["allocatable"].update({k.replace("_", "-"): str(v) for k, v in amounts.items()})
        return self

    def labels(self, **labels: str) -> "NodeBuilder":
        self._obj["metadata"]["labels"].update(labels)
        return self

    def label(self, key: str, value: str) -> "NodeBuilder":
        self._obj["metadata"]["labels"][key] = value
        return self

    def zone(self, zone: str) -> "NodeBuilder":
        return self.label("topology.kubernetes.io/zone", zone)

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> "NodeBuilder":
        self._obj["spec"].setdefault("taints", []).append({"key": key, "value": value, "effect": effect})
        return self

    def unschedulable(self) -> "NodeBuilder":
        self._obj["spec"]["unschedulable"] = True
        return self

    def not_ready(self) -> "NodeBuilder":
        self._obj["status"]["conditions"][0]["status"] = "False"
        return self

    def heartbeat_at(self, timestamp: str) -> "NodeBuilder":
        self._obj["status"]["conditions"][0]["lastHeartbeatTime"] = timestamp
        return self

    def heartbeat_age(self, seconds: float) -> "NodeBuilder":
        self._obj["status"]["conditions"][0]["lastHeartbeatTime"] = _ts(seconds)
        return self

    def image(self, name: str, size_bytes: int) -> "NodeBuilder":
        self._obj["status"].setdefault("images", []).append({"names": [name], "sizeBytes": size_bytes})
        return self

    def download(self, throughput: str) -> "NodeBuilder":
        self._obj["status"]["network"] = {"throughput": {"download": throughput, "upload": throughput,
                                                          "lastTestTime": _ts()}}
        return self


def make_pod(name: str, namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)
