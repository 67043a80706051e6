"""coordination.k8s.io Leases as node heartbeats: how often nodes heartbeat as a cluster grows
(Nomad's idea: the heartbeat interval scales with the node count, so the control plane's heartbeat
load stays bounded).

Up to ``interval × max_per_second`` nodes (10,000 with the defaults) nothing changes: agents renew
their Leases every ``interval`` seconds. Past it, every period that follows from the heartbeat
grows by ``factor(nodes)`` = nodes / (interval × max_per_second), so renewals stay at about
``max_per_second``: the Lease duration the server writes on each node Lease (the duration the agent
asked for, at most the grace period, times the factor; an agent renews that many times less
often), the grace period before a silent node becomes NotReady, and the scheduler's heartbeat
freshness. A lost node is noticed that much later: 50,000 nodes, factor 5, grace 200 s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["HeartbeatScale", "DEFAULT_INTERVAL", "DEFAULT_MAX_PER_SECOND"]

DEFAULT_INTERVAL = 10.0  # seconds between an agent's Lease renewals, in a cluster below the threshold
DEFAULT_MAX_PER_SECOND = 1000.0  # Lease renewals per second the control plane takes before it slows them


@dataclass(frozen=True, slots=True)
class HeartbeatScale:
    interval: float = DEFAULT_INTERVAL
    max_per_second: float = DEFAULT_MAX_PER_SECOND

    def __post_init__(self) -> None:
        if not (self.interval > 0 and self.max_per_second > 0):
            raise ValueError(f"heartbeat interval and rate must be positive, got {self.interval} s and "
                             f"{self.max_per_second}/s")

    def factor(self, nodes: int) -> float:
        """How much longer every heartbeat period is with ``nodes`` nodes (1 up to the threshold)."""
        return max(1.0, nodes / (self.interval * self.max_per_second))

    def lease_seconds(self, asked: object, grace: float, nodes: int) -> int:
        """The leaseDurationSeconds the server writes on a node's Lease: what the agent ``asked``
        for, at most ``grace`` (the whole grace period when it asked for nothing valid), scaled."""
        base = min(asked, grace) if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0 else grace
        return math.ceil(base * self.factor(nodes))
