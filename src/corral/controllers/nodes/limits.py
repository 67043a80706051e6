"""How fast the node lifecycle controller may evict lost nodes' pods: kube-controller-manager's
zones, disruption states and rates (see :mod:`corral.controllers.nodes.node_lifecycle`). Apart, so
the server's settings can name them without importing the controller."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["EvictionLimits", "zone_of", "NORMAL", "PARTIAL", "FULL"]

# A node's zone: its region and zone, the GA labels first, as Kubernetes reads them.
REGION, ZONE = "topology.kubernetes.io/region", "topology.kubernetes.io/zone"
BETA_REGION, BETA_ZONE = "failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone"
NORMAL, PARTIAL, FULL = "Normal", "PartialDisruption", "FullDisruption"


@dataclass(frozen=True)
class EvictionLimits:
    """How fast lost nodes' pods are evicted, per zone: kube-controller-manager's flags and defaults."""

    rate: float = 0.1  # --node-eviction-rate: nodes a second, in a zone not partially disrupted
    secondary_rate: float = 0.01  # --secondary-node-eviction-rate: in a partially disrupted large zone
    unhealthy_threshold: float = 0.55  # --unhealthy-zone-threshold: NotReady share making a zone partially disrupted
    large_cluster: int = 50  # --large-cluster-size-threshold: a zone of more nodes is large

    def zone_state(self, ready: int, not_ready: int) -> str:
        if ready == 0 and not_ready > 0:
            return FULL
        if not_ready > 2 and not_ready / (ready + not_ready) >= self.unhealthy_threshold:
            return PARTIAL
        return NORMAL

    def zone_rate(self, state: str, size: int) -> float:
        """Nodes a second a zone in ``state`` of ``size`` nodes may evict (a fully disrupted zone
        among healthy ones evicts at the normal rate: its pods have somewhere to go)."""
        if state == PARTIAL:
            return self.secondary_rate if size > self.large_cluster else 0.0
        return self.rate


def zone_of(node: dict[str, Any]) -> str:
    """``region/zone``, or the zone alone without a region ("" for a node without either)."""
    labels = node["metadata"].get("labels")
    if not labels:
        return ""
    zone = labels.get(ZONE) or labels.get(BETA_ZONE) or ""
    region = labels.get(REGION) or labels.get(BETA_REGION)
    return f"{region}/{zone}" if region else zone
