"""The node lifecycle controller: notices lost nodes and places their pods again.

Every ``interval`` seconds (longer past 10,000 nodes, by the factor the heartbeats slow by, so a
pass over every node costs no more a second than at 10,000), for every node:

1. its heartbeat is its Lease's ``renewTime`` in ``kube-node-lease`` (or, without a Lease, the
   Ready condition's ``lastHeartbeatTime``), but never earlier than the controller's start;
2. older than the grace period (default 40 s; longer past 10,000 nodes, as the heartbeats slow —
   :mod:`corral.api.kinds.coordination` — and never shorter than the duration written on its
   Lease): the node becomes NotReady — Ready condition ``Unknown``, taint
   ``node.kubernetes.io/unreachable:NoExecute`` (so nothing new lands there) — and each of its pods
   gets a ``NotReadyAt`` condition and an event;
3. NotReady for longer than the eviction timeout (default 300 s, counted from the taint's
   ``timeAdded``): its pods are evicted — a pod a controller owns (a ReplicaSet's) is deleted, for
   its controller to replace; a bare pod goes back to Pending, for the scheduler to place elsewhere;
4. heartbeating again: the taint goes (the agent itself sets Ready back to True).

Evictions are limited as kube-controller-manager limits them (:class:`EvictionLimits`, its flags'
defaults), per zone (a node's ``topology.kubernetes.io/region`` and ``zone`` labels; nodes without
them share one): a zone evicts at most 0.1 nodes a second (one at once, then one every 10 s, the
longest NotReady first). A zone where more than two nodes and at least 55 % are NotReady is
partially disrupted: it evicts 0.01 nodes a second if it has more than 50 nodes, none if fewer.
When every node of every zone is NotReady at once, nothing is evicted at all: the likely cause is
the control plane's own (its network, its machine, a restart after a long outage), not every machine
in the cluster, and its pods would have nowhere to go. Once a node is Ready again, the others'
eviction timeouts count from that moment.

The state it needs survives a server restart, because it lives in the objects (the taint's
``timeAdded``), not in memory. What the limits keep in memory (each zone's tokens, the end of a spell
with every node lost) starts afresh with the controller, which gives every node a fresh grace period
anyway. Every time it writes and every age it judges comes from its one ``clock``, so a test can
move time by hand.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from typing import Any

from corral.api.defaults import rfc3339
from corral.api.kinds.coordination import HeartbeatScale
from corral.api.resources import NODE_LEASE_NAMESPACE, by_kind
from corral.controllers.nodes.limits import FULL, EvictionLimits, zone_of
from corral.controllers.periodic import PeriodicController
from corral.controllers.tokens import TokenBucket
from corral.scheduler.cache.node_table import parse_timestamp
from corral.scheduler.plugins.taint_toleration import tolerates
from corral.server.rest import ResourceAPI, WriteOptions
from corral.server import errors

__all__ = ["NodeLifecycleController", "EvictionLimits", "UNREACHABLE_TAINT"]

log = logging.getLogger(__name__)
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"


def _stays(pod: dict[str, Any]) -> bool:
    """Whether the pod tolerates its node being unreachable without a time limit (Kubernetes'
    NoExecute semantics): DaemonSet pods do, and are never evicted from a lost node."""
    tolerations = [t for t in (pod.get("spec") or {}).get("tolerations") or () if t.get("tolerationSeconds") is None]
    return tolerates(tolerations, UNREACHABLE_TAINT, "", "NoExecute")
LEASE_PREFIX = f"/coordination.k8s.io/leases/{NODE_LEASE_NAMESPACE}/"


class NodeLifecycleController(PeriodicController):
    name = "node-lifecycle"
    what = "node lifecycle"

    def __init__(self, api: ResourceAPI, *, grace_seconds: float = 40.0, eviction_seconds: float = 300.0,
                 interval: float = 2.0, clock=time.time, heartbeats: HeartbeatScale = HeartbeatScale(),
                 limits: EvictionLimits = EvictionLimits()) -> None:
        self.api = api
        self.grace = grace_seconds
        self.heartbeats = heartbeats
        self.eviction = eviction_seconds
        self.limits = limits
        self.interval = interval
        self.clock = clock
        # A node is judged from when this controller began (its server started, or took the lead)
        # at the earliest, as kube-controller-manager judges from when it first saw the node: after
        # a server was down past the grace period, every lease is old, and the agents need a
        # heartbeat's time to reach it again; judged by the leases alone, every node went NotReady
        # at once on restart.
        self.started = clock()
        self._opts = WriteOptions(warn=False)
        self._nodes, self._pods, self._events = by_kind("Node"), by_kind("Pod"), by_kind("Event")
        self._by_node: dict[str, list[str]] | None = None  # this pass's pod keys by node (see _pods_on)
        self._buckets: dict[str, TokenBucket] = {}  # per zone
        self._evicted: dict[str, str] = {}  # node -> its taint's timeAdded: evicted under that taint already
        self._all_lost = False  # the last pass found every node NotReady
        self._calm_since = 0.0  # when the last such spell ended: eviction timeouts count from then at the earliest
        self.zones: dict[str, tuple[int, int, str]] = {}  # the last pass's: zone -> (nodes, NotReady, state)
        self.evictions: dict[str, int] = defaultdict(int)  # zone -> lost nodes evicted (for /metrics)

    def pause(self) -> float:
        return self.interval * self.heartbeats.factor(self.api.cache.count(self._nodes.store_prefix))

    def _heartbeat(self, node: dict[str, Any], grace: float) -> tuple[float, float]:
        """When the node last sent a heartbeat, and how long it may stay silent: ``grace``, or the
        duration written on its Lease when longer (the server wrote it while the cluster was larger:
        the agent renews at a quarter of it)."""
        name = node["metadata"]["name"]
        lease = self.api.cache.get(LEASE_PREFIX + name)
        if lease is not None:
            spec = lease.obj.get("spec") or {}
            renew = parse_timestamp(spec.get("renewTime"))
            if renew:
                duration = spec.get("leaseDurationSeconds")
                return renew, max(grace, duration) if isinstance(duration, int) else grace
        return self._ready_beat(node), grace

    @staticmethod
    def _ready_beat(node: dict[str, Any]) -> float:
        for cond in (node.get("status") or {}).get("conditions") or ():
            if cond.get("type") == "Ready":
                return parse_timestamp(cond.get("lastHeartbeatTime"))
        return parse_timestamp(node["metadata"].get("creationTimestamp"))

    async def reconcile(self) -> None:
        """One pass over every node (also what tests call, with a fake clock)."""
        await self.api.cache.wait_fresh()
        now = self.clock()
        records = list(self.api.cache.items(self._nodes.store_prefix))
        self._by_node = None  # read when this pass first needs a node's pods
        grace = self.grace * self.heartbeats.factor(len(records))
        zones: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # zone -> [Ready, NotReady]
        due: list[tuple[float, str, str, str]] = []  # (tainted at, node, its zone, timeAdded) past the timeout
        for record in records:
            node = record.obj
            taint = next((t for t in (node.get("spec") or {}).get("taints") or () if t.get("key") == UNREACHABLE_TAINT), None)
            beat, allowed = self._heartbeat(node, grace)
            silent_for = now - max(beat, self.started)
            zone = zone_of(node)
            zones[zone][silent_for > allowed] += 1
            if silent_for > allowed:
                if taint is None:
                    await self._mark_not_ready(node, silent_for)
                else:
                    added = parse_timestamp(taint.get("timeAdded"))
                    if now - max(added, self._calm_since) > self.eviction:
                        due.append((added, node["metadata"]["name"], zone, str(taint.get("timeAdded"))))
            elif taint is not None:
                await self._mark_reachable(node)
                self._evicted.pop(node["metadata"]["name"], None)
        if self._evicted and len(self._evicted) > len(due):  # forget the nodes deleted since
            names = {record.obj["metadata"]["name"] for record in records}
            self._evicted = {name: added for name, added in self._evicted.items() if name in names}
        await self._evict_due(now, zones, sorted(due))

    async def _evict_due(self, now: float, zones: dict[str, list[int]], due: list[tuple[float, str, str, str]]) -> None:
        """Evict the pods of the nodes past the eviction timeout, as each zone's limit allows (the
        longest NotReady first); a node evicted under its taint already is looked at again without
        a token (a pod being deleted there since)."""
        limits = self.limits
        states = {zone: limits.zone_state(*counts) for zone, counts in zones.items()}
        self.zones = {zone: (ready + not_ready, not_ready, states[zone]) for zone, (ready, not_ready) in zones.items()}
        if states and all(state == FULL for state in states.values()):
            if not self._all_lost:
                log.warning("every node is NotReady: no pod is evicted until a node is Ready again "
                            "(the control plane's connection is the likelier cause than every machine)")
                self._all_lost = True
            return
        if self._all_lost:
            log.warning("a node is Ready again: the NotReady nodes' pods are evicted %.0fs from now at the "
                        "earliest", self.eviction)
            self._all_lost, self._calm_since = False, now
            return
        for _, name, zone, added in due:
            if self._evicted.get(name) != added:
                rate = limits.zone_rate(states[zone], sum(zones[zone]))
                interval = 1.0 / rate if rate > 0 else math.inf
                bucket = self._buckets.get(zone)
                if bucket is None or bucket.interval != interval:
                    # A new rate gets a full bucket, as Kubernetes swaps one in: a second's worth, at least
                    # one (Kubernetes' holds one; a pass takes its tokens at one instant).
                    bucket = self._buckets[zone] = TokenBucket(interval, max(1.0, rate), now)
                if rate <= 0 or not bucket.take(now):
                    continue  # its zone's limit: a later pass
                self._evicted[name] = added
                self.evictions[zone] += 1
            await self._evict_pods(name)

    def _pods_on(self, node: str) -> list[dict[str, Any]]:
        """The pods bound to ``node``, as they are now.

        The pods are grouped by node once a pass, when the first lost node needs them, so a pass
        that finds thousands of nodes lost at once (a partition, a rack's switch) reads the pod list
        once: read for each node, 5,000 lost nodes with 51,000 pods kept a core busy for minutes.
        Each pod is looked up again when its node's turn comes (still on this node?); a pod bound
        to the node later in the pass is found by the next pass, as one bound just after the
        taint would be."""
        if self._by_node is None:
            self._by_node = defaultdict(list)
            for record in self.api.cache.items(self._pods.store_prefix):
                bound_to = (record.obj.get("spec") or {}).get("nodeName")
                if bound_to:
                    self._by_node[bound_to].append(record.key)
        pods = []
        for key in self._by_node.get(node, ()):
            record = self.api.cache.get(key)
            if record is not None and (record.obj.get("spec") or {}).get("nodeName") == node:
                pods.append(record.obj)
        return pods

    async def _mark_not_ready(self, node: dict[str, Any], silent_for: float) -> None:
        name, now = node["metadata"]["name"], rfc3339(self.clock())
        message = f"the agent stopped renewing its lease {silent_for:.0f}s ago"
        log.warning("node %s is NotReady: %s", name, message)
        # Called only when the node has no unreachable taint yet: the others stay as they are.
        taints = [*((node.get("spec") or {}).get("taints") or ()),
                  {"key": UNREACHABLE_TAINT, "effect": "NoExecute", "timeAdded": now}]
        await self._patch(self._nodes, None, name, {"spec": {"taints": taints}})
        # Strategic merge patches of the one condition (merged by type, its other fields kept: the
        # node's own lastHeartbeatTime stays): the agent may be writing the others at this moment, and
        # a whole list written back from what was read would undo that.
        ready = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": message,
                 "lastTransitionTime": now}
        await self._patch(self._nodes, None, name, {"status": {"conditions": [ready]}}, "status")
        for pod in self._pods_on(name):
            meta = pod["metadata"]
            condition = {"type": "NotReadyAt", "status": "True", "reason": "NodeNotReady",
                         "message": f"node {name} is not ready: {message}", "lastTransitionTime": now}
            await self._patch(self._pods, meta["namespace"], meta["name"], {"status": {"conditions": [condition]}},
                              "status")
            await self._event(pod, "Warning", "NodeNotReady", f"Node {name} is not ready: {message}")

    async def _evict_pods(self, node: str) -> None:
        for pod in self._pods_on(node):
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                # Its agent is gone and will not report Terminated: finish the deletion here.
                await self._delete_now(meta["namespace"], meta["name"])
                continue
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue  # finished: it stays as it ended, never run again
            if _stays(pod):
                continue  # it tolerates the node's loss for good (a DaemonSet's pod): it waits for it
            message = f"node {node} was unreachable for more than {self.eviction:.0f}s"
            owner = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
            if owner is not None:
                # Its controller replaces it on another node (Kubernetes' semantics); its agent, if
                # it comes back, finds it gone and stops it.
                await self._event(pod, "Warning", "NodeLost",
                                  f"Deleted: {message}; its {owner.get('kind')} {owner.get('name')} replaces it")
                await self._delete_now(meta["namespace"], meta["name"])
                log.warning("deleted %s/%s of %s %s from lost node %s", meta["namespace"], meta["name"],
                            owner.get("kind"), owner.get("name"), node)
                continue
            await self.api.evict(meta["namespace"], meta["name"], "NodeLost", message)
            await self._event(pod, "Warning", "NodeLost", f"Evicted: {message}; returned to Pending to be placed again")
            log.warning("evicted %s/%s from lost node %s", meta["namespace"], meta["name"], node)

    async def _mark_reachable(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        taints = [t for t in (node.get("spec") or {}).get("taints") or () if t.get("key") != UNREACHABLE_TAINT]
        await self._patch(self._nodes, None, name, {"spec": {"taints": taints or None}})
        log.info("node %s is reachable again", name)

    async def _patch(self, resource, namespace, name, patch, subresource=None) -> None:
        try:
            kind = "strategic" if subresource == "status" else "merge"
            await self.api.patch(resource, namespace, name, patch, kind, self._opts, subresource)
        except errors.ApiError as exc:
            log.debug("patch of %s %s skipped: %s", resource.plural, name, exc.message)

    async def _delete_now(self, namespace: str | None, name: str) -> None:
        try:
            await self.api.delete(self._pods, namespace, name, 0, None, None)
        except errors.ApiError:
            pass

    async def _event(self, pod: dict[str, Any], etype: str, reason: str, message: str) -> None:
        meta = pod["metadata"]
        now = rfc3339(self.clock())
        event = {"metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
                 "involvedObject": {"kind": "Pod", "name": meta["name"], "namespace": meta["namespace"],
                                    "uid": meta["uid"]},
                 "reason": reason, "message": message, "type": etype, "count": 1,
                 "firstTimestamp": now, "lastTimestamp": now, "source": {"component": "node-lifecycle-controller"}}
        try:
            await self.api.create(self._events, meta["namespace"], event, self._opts)
        except errors.ApiError as exc:
            log.debug("event not written: %s", exc.message)
