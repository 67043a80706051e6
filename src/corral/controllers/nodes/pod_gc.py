"""The pod garbage collector: removes the pods nothing else will ever finish.

Every ``interval`` seconds:

1. **Orphans**: a pod bound to a node that does not exist (the Node was deleted, or the pod was
   created for a node that never came) is deleted once it has been an orphan for ``quarantine``
   seconds (default 40, as Kubernetes' pod GC; a node re-registering within it keeps its pods).
2. **Terminating on a silent node**: a pod being deleted whose grace period is over, on a node that
   is NotReady (its agent, which would stop it and report it gone, is not there), is deleted at
   once — not only when the node lifecycle controller gives up on the node minutes later. So a pod
   on a node without an agent can always be deleted.

How long a pod has been an orphan is kept in memory: after a restart of the leader the quarantine
starts again, which only ever delays a deletion.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from corral.api.resources import by_kind
from corral.controllers.nodes.node_lifecycle import UNREACHABLE_TAINT
from corral.controllers.periodic import PeriodicController
from corral.scheduler.cache.node_table import parse_timestamp
from corral.server import errors
from corral.server.rest import ResourceAPI

__all__ = ["PodGarbageCollector"]

log = logging.getLogger(__name__)


class PodGarbageCollector(PeriodicController):
    name = "pod-gc"
    what = "pod garbage collection"

    def __init__(self, api: ResourceAPI, *, quarantine_seconds: float = 40.0, interval: float = 5.0,
                 clock=time.time) -> None:
        self.api = api
        self.quarantine = quarantine_seconds
        self.interval = interval
        self.clock = clock
        self._orphaned_since: dict[str, float] = {}
        self._nodes, self._pods = by_kind("Node"), by_kind("Pod")

    async def reconcile(self) -> None:
        """One pass over every bound pod (also what tests call, with a fake clock)."""
        await self.api.cache.wait_fresh()
        now = self.clock()
        silent = set()
        nodes = set()
        for record in self.api.cache.items(self._nodes.store_prefix):
            name = record.obj["metadata"]["name"]
            nodes.add(name)
            if any(t.get("key") == UNREACHABLE_TAINT for t in (record.obj.get("spec") or {}).get("taints") or ()):
                silent.add(name)
        orphans: dict[str, float] = {}
        for record in list(self.api.cache.items(self._pods.store_prefix)):
            pod = record.obj
            node = (pod.get("spec") or {}).get("nodeName")
            if not node:
                continue
            meta = pod["metadata"]
            if node not in nodes:
                since = orphans[record.key] = self._orphaned_since.get(record.key, now)
                if now - since >= self.quarantine:
                    await self._delete(meta, f"its node {node} does not exist")
                    orphans.pop(record.key)
            elif node in silent and meta.get("deletionTimestamp") and now >= parse_timestamp(meta["deletionTimestamp"]):
                await self._delete(meta, f"it is terminating on node {node}, which is not ready")
        self._orphaned_since = orphans

    async def _delete(self, meta: dict[str, Any], why: str) -> None:
        try:
            await self.api.delete(self._pods, meta["namespace"], meta["name"], 0, None, None)
        except errors.ApiError:
            return
        log.warning("deleted pod %s/%s: %s", meta["namespace"], meta["name"], why)
