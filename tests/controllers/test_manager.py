"""The controller manager hands the server's settings to the controllers that act on them: a
`--node-grace-seconds`, `--eviction-seconds` or an eviction rate given to the server must reach the node lifecycle
controller and the pod garbage collector, not stay at their defaults."""

from __future__ import annotations

from corral.api.kinds.coordination import HeartbeatScale
from corral.controllers.manager import ControllerManager
from corral.controllers.nodes.limits import EvictionLimits
from corral.controllers.nodes.node_lifecycle import NodeLifecycleController
from corral.controllers.nodes.pod_gc import PodGarbageCollector


async def test_the_servers_settings_reach_the_controllers_that_act_on_them(server):
    scale = HeartbeatScale(interval=3.0, max_per_second=7.0)
    limits = EvictionLimits(rate=0.5, secondary_rate=0.05, unhealthy_threshold=0.7, large_cluster=9)
    manager = ControllerManager(server.api, node_grace_seconds=12.0, eviction_seconds=34.0, heartbeats=scale,
                                eviction_limits=limits)
    by_type = {type(c): c for c in manager.controllers}
    assert len(by_type) == len(manager.controllers) == 10  # each controller once
    lifecycle = by_type[NodeLifecycleController]
    assert (lifecycle.grace, lifecycle.eviction, lifecycle.heartbeats, lifecycle.limits) == (12.0, 34.0, scale, limits)
    assert by_type[PodGarbageCollector].quarantine == 12.0  # a pod on a vanished node waits one grace period
    assert all(c.api is server.api for c in manager.controllers)
