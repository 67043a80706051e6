"""Workload files: named sizes, ops with ``$parameters``, pod templates in scheduler_perf's shapes."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any

import yaml

from corral.sim.taint import HOLLOW_TOLERATION

__all__ = ["Workload", "load_workloads", "resolve", "pod_template", "node_object", "TEMPLATES", "WorkloadError"]

HERE = os.path.join(os.path.dirname(__file__), "workloads")
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


class WorkloadError(ValueError):
    """An unknown workload or size, or a malformed workload file."""


def _basic() -> dict[str, Any]:
    # Tolerating the taint `corral sim` gives its hollow nodes: against a real cluster with hollow
    # nodes joined, the benchmark's pods go to them and real pods do not.
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {}},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                                     "resources": {"requests": {"cpu": "100m", "memory": "500Mi"},
                                                   "limits": {"cpu": "100m", "memory": "500Mi"}}}],
                     "tolerations": [dict(HOLLOW_TOLERATION)]}}


def _node_affinity() -> dict[str, Any]:
    pod = _basic()
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone1", "zone2"]}]}]}}}
    return pod


def _anti_affinity() -> dict[str, Any]:
    pod = _basic()
    pod["metadata"]["labels"] = {"color": "green"}
    pod["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": HOST,
        "namespaces": ["sched-0", "sched-1"]}]}}
    return pod


def _spread() -> dict[str, Any]:
    pod = _basic()
    pod["metadata"]["labels"] = {"color": "blue"}
    pod["spec"]["topologySpreadConstraints"] = [{"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                                 "labelSelector": {"matchLabels": {"color": "blue"}}}]
    return pod


def _huge() -> dict[str, Any]:
    pod = _basic()
    res = pod["spec"]["containers"][0]["resources"]
    res["requests"], res["limits"] = {"cpu": "1000", "memory": "500Mi"}, {"cpu": "1000", "memory": "500Mi"}
    return pod


def _priority(class_name: str, cpu: str) -> dict[str, Any]:
    # scheduler_perf's pod-low-priority / pod-high-priority: a priority class, and no grace period, so
    # a preempted pod is gone at once (the benchmark's nodes have no agent to stop it).
    pod = _basic()
    pod["spec"]["priorityClassName"] = class_name
    pod["spec"]["terminationGracePeriodSeconds"] = 0
    res = pod["spec"]["containers"][0]["resources"]
    res["requests"], res["limits"] = {"cpu": cpu, "memory": "500Mi"}, {"cpu": cpu, "memory": "500Mi"}
    return pod


TEMPLATES = {"basic": _basic, "lowPriority": lambda: _priority("bench-low", "900m"),
             "highPriority": lambda: _priority("bench-high", "3"), "nodeAffinity": _node_affinity, "antiAffinity": _anti_affinity, "spread": _spread,
             "huge": _huge}


def pod_template(name: str) -> dict[str, Any]:
    try:
        return TEMPLATES[name]()
    except KeyError:
        raise WorkloadError(f"unknown pod template {name!r} (known: {', '.join(TEMPLATES)})") from None


def node_object(i: int, *, labels: dict[str, str], zones: list[str] | None, capacity: dict[str, str],
                 heartbeat: str) -> dict[str, Any]:
    name = f"node-{i}"
    node_labels = {HOST: name, **labels}
    if zones:
        node_labels[ZONE] = zones[i % len(zones)]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels},
            "status": {"capacity": dict(capacity), "allocatable": dict(capacity),
                       "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}]}}


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    description: str
    sizes: dict[str, dict[str, Any]]
    ops: list[dict[str, Any]]

    def expand(self, size: str, *, small: bool = False) -> list[dict[str, Any]]:
        """The ops with ``$parameters`` replaced; ``small`` divides pod counts by 10 (nodes stay)."""
        if size not in self.sizes:
            raise WorkloadError(f"{self.name} has no size {size!r} (sizes: {', '.join(self.sizes)})")
        params = dict(self.sizes[size])
        if small:
            params = {k: (max(v // 10, 1) if k != "nodes" and isinstance(v, int) else v) for k, v in params.items()}
        out = []
        for op in self.ops:
            op = copy.deepcopy(op)
            for key, value in list(op.items()):
                if isinstance(value, str) and value.startswith("$"):
                    if value[1:] not in params:
                        raise WorkloadError(f"{self.name}: op {op.get('op')}: unknown parameter {value}")
                    op[key] = params[value[1:]]
            out.append(op)
        return out


def load_workloads(directory: str = HERE) -> dict[str, Workload]:
    found = {}
    for file in sorted(os.listdir(directory)):
        if not file.endswith((".yaml", ".yml")):
            continue
        path = os.path.join(directory, file)
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        if not isinstance(doc, dict) or not doc.get("name") or not isinstance(doc.get("sizes"), dict):
            raise WorkloadError(f"{path}: a workload needs name, sizes and ops")
        found[doc["name"]] = Workload(doc["name"], doc.get("description", ""), doc["sizes"], doc.get("ops") or [])
    return found


def resolve(name: str, directory: str = HERE) -> tuple[Workload, str]:
    """``Workload/Size`` → the workload and the size; a clear error naming what exists."""
    workloads = load_workloads(directory)
    wl, _, size = name.partition("/")
    if wl not in workloads:
        raise WorkloadError(f"unknown workload {wl!r}; `corral bench --list` shows them")
    workload = workloads[wl]
    size = size or next(iter(workload.sizes))
    if size not in workload.sizes:
        raise WorkloadError(f"{wl} has no size {size!r} (sizes: {', '.join(workload.sizes)})")
    return workload, size
