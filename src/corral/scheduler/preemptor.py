"""Carries out a preemption decision: nominate the preemptor, then remove its victims in the
background.

In the scheduling cycle (synchronous, no I/O), :meth:`Preemptor.nominate` updates the cache at
once: the preemptor's claim counts on its node, each victim is marked terminating, and pods of
lower priority nominated on that node lose their claim. The API calls then run as a task while the
scheduler goes on with other pods (Kubernetes' asynchronous preemption, KEP-4832):

1. the preemptor's ``status.nominatedNodeName``;
2. for each victim, concurrently: a ``DisruptionTarget`` condition (reason
   ``PreemptionByScheduler``), a graceful delete (its own grace period; only that pod, by uid), and
   a ``Preempted`` event naming the preemptor;
3. the claims' owners that lost their room get ``nominatedNodeName`` cleared.

A victim whose delete fails (other than already gone) is no longer marked terminating and the
preemptor's claim is dropped, so its next attempt may preempt again instead of waiting for a pod
that is not leaving.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from corral.api.defaults import now_rfc3339
from corral.scheduler.cache.cache import Cache
from corral.scheduler.cluster import ClusterWriter, EventRecorder
from corral.scheduler.framework.podinfo import PodInfo

__all__ = ["Preemptor", "DISRUPTION_REASON"]

log = logging.getLogger(__name__)
DISRUPTION_REASON = "PreemptionByScheduler"


class Preemptor:
    def __init__(self, cache: Cache, writer: ClusterWriter, events: EventRecorder,
                 spawn: Callable[[Any], None]) -> None:
        self.cache, self.writer, self.events, self._spawn = cache, writer, events, spawn
        self.victims = 0  # pods removed so far
        self.failures = 0

    def nominate(self, pod: PodInfo, node: str, victims: tuple[PodInfo, ...], scheduler_name: str) -> None:
        """Record the decision in the cache now and start its API calls."""
        displaced = self.cache.nominator.lower_on(node, pod.priority)
        for key in displaced:
            self.cache.nominator.clear(key)
        self.cache.nominator.nominate(pod, node)
        fresh = []
        for victim in victims:
            cached = self.cache.pods.get(victim.key)
            if cached is not None and not cached.terminating:
                self.cache.mark_terminating(victim.key)
                fresh.append(cached.info)
        self._spawn(self._carry_out(pod, node, fresh, displaced, scheduler_name))

    async def _carry_out(self, pod: PodInfo, node: str, victims: list[PodInfo], displaced: list[str],
                         scheduler_name: str) -> None:
        try:
            await self.writer.patch_status(pod, {"status": {"nominatedNodeName": node}})
        except Exception as exc:  # the pod may be gone; its claim goes with it
            log.debug("nominatedNodeName of %s not written: %s", pod.key, exc)
        results = await asyncio.gather(*(self._remove(pod, node, v, scheduler_name) for v in victims))
        if not all(results):
            self.failures += 1
            self.cache.nominator.clear(pod.key)
        for key in displaced:
            namespace, _, name = key.partition("/")
            ref = PodInfo(namespace=namespace, name=name, uid="", labels={}, priority=0,
                          scheduler_name=scheduler_name, requests=pod.requests)
            try:
                await self.writer.patch_status(ref, {"status": {"nominatedNodeName": None}})
            except Exception as exc:
                log.debug("nominatedNodeName of %s not cleared: %s", key, exc)

    async def _remove(self, pod: PodInfo, node: str, victim: PodInfo, scheduler_name: str) -> bool:
        condition = {"type": "DisruptionTarget", "status": "True", "reason": DISRUPTION_REASON,
                     "message": f"{scheduler_name}: preempting to accommodate a higher priority pod",
                     "lastTransitionTime": now_rfc3339()}
        try:
            await self.writer.patch_status(victim, {"status": {"conditions": [condition]}}, strategic=True)
        except Exception as exc:  # gone already, or only the condition is lost: the delete decides
            log.debug("DisruptionTarget of %s not written: %s", victim.key, exc)
        try:
            gone = await self.writer.delete_pod(victim)
        except Exception as exc:
            log.warning("preempting %s for %s failed: %s", victim.key, pod.key, exc)
            self.cache.mark_terminating(victim.key, False)
            return False
        self.victims += 1
        if not gone:
            self.events.record(victim, "Normal", "Preempted", f"Preempted by {pod.key} on node {node}")
        return True
