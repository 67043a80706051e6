"""The default plugins, one module each, and the registry that profiles name them from."""

from __future__ import annotations

from corral.scheduler.gang import Coscheduling
from corral.scheduler.plugins.balanced_allocation import BalancedAllocation
from corral.scheduler.plugins.default_binder import DefaultBinder
from corral.scheduler.plugins.default_preemption import DefaultPreemption
from corral.scheduler.plugins.image_locality import ImageLocality
from corral.scheduler.plugins.inter_pod_affinity import InterPodAffinity
from corral.scheduler.plugins.network_throughput import NetworkThroughput
from corral.scheduler.plugins.node_affinity import NodeAffinity
from corral.scheduler.plugins.node_name import NodeName
from corral.scheduler.plugins.node_ports import NodePorts
from corral.scheduler.plugins.node_ready import NodeReady
from corral.scheduler.plugins.node_resources_fit import NodeResourcesFit
from corral.scheduler.plugins.node_unschedulable import NodeUnschedulable
from corral.scheduler.plugins.pod_topology_spread import PodTopologySpread
from corral.scheduler.plugins.priority_sort import PrioritySort
from corral.scheduler.plugins.taint_toleration import TaintToleration

__all__ = ["REGISTRY", "DEFAULT_PLUGINS", "register"]

REGISTRY = {cls.NAME: cls for cls in (
    BalancedAllocation, Coscheduling, DefaultBinder, DefaultPreemption, ImageLocality, InterPodAffinity, NetworkThroughput, NodeAffinity,
    NodeName, NodePorts, NodeReady, NodeResourcesFit, NodeUnschedulable, PodTopologySpread,
    PrioritySort, TaintToleration,
)}

# The default profile, per extension point, in order; score entries carry their weights
# (Kubernetes' defaults, plus NetworkThroughput).
DEFAULT_PLUGINS: dict[str, list] = {
    "queueSort": ["PrioritySort"],
    "preEnqueue": ["Coscheduling"],
    "preFilter": ["Coscheduling", "NodeAffinity", "NodePorts", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity",
                  "TaintToleration"],
    "filter": ["NodeReady", "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts",
               "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity"],
    "postFilter": ["DefaultPreemption"],
    "preScore": ["TaintToleration", "NodeAffinity", "PodTopologySpread", "InterPodAffinity",
                 "NodeResourcesBalancedAllocation", "ImageLocality", "NetworkThroughput"],
    "score": [("NodeResourcesFit", 1), ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1),
              ("InterPodAffinity", 2), ("NodeAffinity", 2), ("PodTopologySpread", 2), ("TaintToleration", 3),
              ("NetworkThroughput", 1)],
    "reserve": ["Coscheduling"],
    "permit": ["Coscheduling"],
    "bind": ["DefaultBinder"],
}


def register(cls: type) -> type:
    """Make a custom plugin class available to profiles under its ``NAME`` (usable as a decorator)."""
    if not getattr(cls, "NAME", ""):
        raise ValueError(f"{cls.__name__} has no NAME")
    REGISTRY[cls.NAME] = cls
    return cls
