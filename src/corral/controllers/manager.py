"""The controller manager: every controller the leader runs, started and stopped together.

Periodic ones (node lifecycle, pod garbage collection, disruption budgets' status) and queue-driven
ones (the garbage collector, ReplicaSets, Deployments, DaemonSets, Jobs, CronJobs, Placements), all on the server's watch cache and writing through its
REST layer.
"""

from __future__ import annotations

from corral.api.kinds.coordination import HeartbeatScale
from corral.controllers.workloads.cronjob import CronJobController
from corral.controllers.workloads.daemonset import DaemonSetController
from corral.controllers.workloads.deployment import DeploymentController
from corral.controllers.workloads.disruption import DisruptionController
from corral.controllers.garbage_collector import GarbageCollector
from corral.controllers.workloads.job import JobController
from corral.controllers.nodes.limits import EvictionLimits
from corral.controllers.nodes.node_lifecycle import NodeLifecycleController
from corral.controllers.placement import PlacementController
from corral.controllers.nodes.pod_gc import PodGarbageCollector
from corral.controllers.workloads.replicaset import ReplicaSetController
from corral.controllers.events import ObjectEvents
from corral.controllers.queued import QueuedController
from corral.server.rest import ResourceAPI

__all__ = ["ControllerManager"]


class ControllerManager:
    def __init__(self, api: ResourceAPI, *, node_grace_seconds: float, eviction_seconds: float,
                 heartbeats: HeartbeatScale = HeartbeatScale(), eviction_limits: EvictionLimits = EvictionLimits()) -> None:
        self.controllers = [
            NodeLifecycleController(api, grace_seconds=node_grace_seconds, eviction_seconds=eviction_seconds,
                                    heartbeats=heartbeats, limits=eviction_limits),
            PodGarbageCollector(api, quarantine_seconds=node_grace_seconds),
            DisruptionController(api),
            GarbageCollector(api),
            ReplicaSetController(api),
            DeploymentController(api),
            JobController(api),
            CronJobController(api),
            DaemonSetController(api),
            PlacementController(api),
        ]

    def node_lifecycle(self) -> NodeLifecycleController:
        return next(c for c in self.controllers if isinstance(c, NodeLifecycleController))

    def event_recorders(self) -> list[ObjectEvents]:
        """The event recorder of each controller that records events."""
        return [c.events for c in self.controllers if isinstance(c, QueuedController)]

    def start(self) -> None:
        for controller in self.controllers:
            controller.start()

    async def stop(self) -> None:
        for controller in self.controllers:
            await controller.stop()
