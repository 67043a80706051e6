"""A plan: the real scheduler's decisions for a set of pods, taken on a copy of its cache.

The copy (:func:`snapshot`) holds what the live scheduler counts at one instant — nodes, bound and
assumed pods, nominations, disruption budgets — and frameworks built from the same configuration
(or another one, to try it), whose tie-break generators continue from the live ones', so a plan of
pods applied to an unchanged cluster lands where the scheduler then puts them. Nothing the live
scheduler holds is touched: the what-ifs (a node gone, nodes added) and every pod placed change the
copy only.

Each pod is decided as a scheduling cycle would decide it (same node sample, same nomination
rules), highest priority first, then in manifest order. A pod no node takes gets the profile's
preemption: the victims it would remove leave the copy and the pod is decided again. A pod that
still fits nowhere is reported with Kubernetes' summary and the nearest misses: the nodes that lack
the least of what it requests.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from corral.scheduler.batch import decide
from corral.scheduler.cache.cache import Cache
from corral.scheduler.extenders import ExtenderError
from corral.scheduler.extenders.decide import ask_extenders, decide_among, preempt_with_extenders
from corral.scheduler.framework.interface import CycleState
from corral.scheduler.framework.podinfo import PodInfo
from corral.scheduler.profiles import SchedulerConfig, build_frameworks
from corral.scheduler.schedule_one import (ZONE_LABELS, FitError, nearest_misses, post_filter, schedule_pod,
                                            zone_interleaved_order)

from corral.plan.expand import PlannedPod, on_node

__all__ = ["Snapshot", "snapshot", "fingerprint", "run", "NodeSpec", "copy_cache", "apply_what_ifs", "zone_usage"]

Obj = dict[str, Any]
YIELD_EVERY = 50  # pods decided between two turns of the event loop (~25 ms at 5,000 nodes)


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """``count`` nodes of one shape to add to the copy (``--add-nodes 4x{cpu:8,memory:32Gi}``)."""

    count: int
    cpu: str
    memory: str
    pods: int = 110
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True)
class Snapshot:
    cache: Cache
    frameworks: dict[str, Any]
    revision: int  # the store revision the live cache reflected when copied


def fingerprint(cache: Cache, node_signature: Any) -> str:
    """What placement depends on — every node's labels, taints, allocatable, readiness and cordon,
    where every counted pod is, every nomination — as a short hash, the same on every server that
    holds the same cluster (``corral apply --if-plan-version`` compares it)."""
    table = cache.table
    digest = hashlib.blake2b(digest_size=8)
    for name, row in sorted(table.row_of.items()):
        obj = table.objects[row]
        if obj is not None:
            digest.update(f"N{name}={node_signature(obj)!r}\n".encode())
    for key in sorted(cache.pods):
        digest.update(f"P{key}@{table.names[cache.pods[key].row]}\n".encode())
    for key in sorted(cache.nominator.pods):
        digest.update(f"C{key}@{cache.nominator.pods[key].node}\n".encode())
    return digest.hexdigest()


def copy_cache(live: Cache) -> Cache:
    """A cache counting what ``live`` counts, sharing only its immutable parts (pods' PodInfo)."""
    copy = Cache()
    table = live.table
    for row in table.valid_rows():  # in row order: the copy's rows keep the live ones' order
        copy.set_node(table.objects[int(row)])
    for name, labels in live.namespace_labels.items():
        copy.namespace_labels[name] = dict(labels)
    for cached in live.pods.values():  # as the live cache counts it (its object is not read: it may be JSON)
        copy._add(cached.info, copy.table.row_for_pods(table.names[cached.row]), assumed=cached.assumed,
                  start=live.columns.start.item(cached.slot), terminating=cached.terminating)
    for nomination in live.nominator.pods.values():
        copy.nominator.nominate(nomination.info, nomination.node)
    copy.budgets = dict(live.budgets)
    return copy


def snapshot(live_cache: Cache, live_frameworks: dict[str, Any], config: SchedulerConfig, revision: int, *,
             ignored_resources: frozenset[str] = frozenset(), same_config: bool = True) -> Snapshot:
    """A copy of the live scheduler's state with frameworks of ``config`` over it. With the live
    configuration (``same_config``), each profile's tie-break generator continues from the live one."""
    cache = copy_cache(live_cache)
    frameworks = build_frameworks(config, cache=cache, clock=time.time)
    for name, fwk in frameworks.items():
        for plugin in fwk.all_plugins:
            if hasattr(plugin, "ignored_resources"):
                plugin.ignored_resources = ignored_resources
        live = live_frameworks.get(name)
        if same_config and live is not None:
            fwk.rng.setstate(live.rng.getstate())
            fwk.next_start = live.next_start
    return Snapshot(cache, frameworks, revision)


def _node_object(name: str, spec: NodeSpec) -> Obj:
    resources = {"cpu": spec.cpu, "memory": spec.memory, "pods": str(spec.pods)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **dict(spec.labels)}},
            "spec": {}, "status": {"capacity": resources, "allocatable": resources,
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def apply_what_ifs(snap: Snapshot, *, without: Iterable[str] = (), add: Iterable[NodeSpec] = (),
                   now: float | None = None) -> list[Obj]:
    """Take nodes out (drained or lost: their pods go back to be placed, returned as the pods'
    objects) and add new ones (named ``plan-node-1`` …, Ready, heartbeat now) to the copy."""
    cache, table = snap.cache, snap.cache.table
    displaced: list[Obj] = []
    for name in without:
        row = table.row_of.get(name)
        if row is None:
            raise KeyError(name)
        for cached in list(cache.pods_on(row)):
            displaced.append(cached.info.obj)
            cache.remove_pod(cached.info.key)
        for key, nomination in list(cache.nominator.pods.items()):
            if nomination.node == name:
                cache.nominator.clear(key)
        cache.remove_node(name)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))
    n = 0
    for spec in add:
        for _ in range(spec.count):
            n += 1
            while f"plan-node-{n}" in table.row_of:
                n += 1
            node = _node_object(f"plan-node-{n}", spec)
            node["status"]["conditions"][0]["lastHeartbeatTime"] = stamp
            cache.set_node(node)
    return displaced


def _zone_of(table: Any, rows: np.ndarray) -> list[str]:
    for key in ZONE_LABELS:
        col = table.labels.column(key)[rows]
        if col.any():
            return [table.labels.value(key, int(code)) or "" for code in col]
    return [""] * len(rows)


def zone_usage(cache: Cache) -> dict[str, dict[str, int]]:
    """Per zone ("" for nodes without one): nodes, allocatable and requested cpu (m) and memory."""
    table = cache.table
    rows = table.valid_rows()
    out: dict[str, dict[str, int]] = {}
    for zone, row in zip(_zone_of(table, rows), rows):
        z = out.setdefault(zone, {"nodes": 0, "cpuAllocatable": 0, "cpuRequested": 0,
                                  "memoryAllocatable": 0, "memoryRequested": 0})
        z["nodes"] += 1
        z["cpuAllocatable"] += int(table.allocatable["cpu"][row])
        z["cpuRequested"] += int(table.requested["cpu"][row])
        z["memoryAllocatable"] += int(table.allocatable["memory"][row])
        z["memoryRequested"] += int(table.requested["memory"][row])
    return out


def _decision(fwk: Any, cache: Cache, info: PodInfo, order: Any) -> tuple[Any, FitError | None, Any]:
    """One cycle on the copy: (result, None, None), or (None, fit error, PostFilter result)."""
    state = CycleState()
    with cache.nominator.hidden_from(info):
        try:
            return schedule_pod(fwk, cache, info, order, state, scores=True), None, None
        except FitError as fit:
            return None, fit, post_filter(fwk, state, info, fit)


async def _extended_decision(fwk: Any, cache: Cache, info: PodInfo, extenders: Any) -> tuple[Any, FitError | None, Any]:
    """:func:`_decision` with the extenders asked about the nodes the filters passed, as the
    scheduler asks them (every feasible node scored; their rejections in the summary), and about
    preemption's candidates when one has a ``preemptVerb``."""
    verdict, extra = await ask_extenders(fwk, cache, info, extenders)
    preempters = extenders.interested(info, "preempt_verb")
    result, fit, post = decide_among(fwk, cache, info, verdict, extra, candidates=bool(preempters))
    if fit is not None and post is not None and post.candidates and preempters:
        post = await preempt_with_extenders(fwk, cache, info, fit, post, extenders)
    return result, fit, post


def _placed(result: Any, table: Any) -> Obj:
    entry: Obj = {"node": result.node, "evaluated": result.evaluated, "feasible": result.feasible}
    scores = result.scores
    if scores is None:
        entry["why"] = "the only node that fits"
        return entry
    i = int(np.flatnonzero(scores.rows == result.row)[0])
    entry["score"] = round(float(scores.total[i]), 2)
    entry["scores"] = {name: round(float(v[i]), 2) for name, v in scores.by_plugin.items()}
    others = [j for j in np.argsort(-scores.total, kind="stable") if j != i]
    if others:
        j = int(others[0])
        entry["runnerUp"] = {"node": table.names[scores.rows[j]], "score": round(float(scores.total[j]), 2),
                             "by": round(float(scores.total[i] - scores.total[j]), 2)}
    return entry


def _unbound(pod: Obj) -> Obj:
    """A displaced pod as it is placed again: without its node (its controller makes it anew)."""
    return {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": ""}}


def _order(pods: list[PlannedPod]) -> list[tuple[PlannedPod, PodInfo]]:
    infos = [(p, PodInfo.from_object(p.pod)) for p in pods]
    return sorted(infos, key=lambda t: -t[1].priority)  # stable: manifest order within a priority


def _placement_copies(snap: Snapshot, planned: PlannedPod, info: PodInfo) -> tuple[list, str]:
    """A Placement decided on the copy as the scheduler decides a new one: its copy for each
    selected node (each then placed like any pod, so the node's room is checked again)."""
    placement = planned.placement or {}
    fwk = snap.frameworks.get(info.scheduler_name)
    if fwk is None:
        return [], f"{planned.source}: no profile for schedulerName {info.scheduler_name!r}"
    result = decide(fwk, snap.cache, placement)
    name = placement["metadata"]["name"]
    copies = [PlannedPod(on_node(planned.pod, node, f"{name}-{node}"), planned.source) for node in result.selected]
    return [(c, PodInfo.from_object(c.pod)) for c in copies], f"{planned.source}: {result.summary}"


class _Run:
    """One plan's pass over its pods, on the snapshot: what it placed, preempted and left Pending."""

    def __init__(self, snap: Snapshot, extenders: Any) -> None:
        self.snap, self.cache, self.extenders = snap, snap.cache, extenders
        self.entries: list[Obj] = []
        self.preempted: list[Obj] = []
        self.notes: list[str] = []
        self.placed = self.pending = 0
        self.orders: dict[str, Any] = {}  # per profile: the zone-interleaved node order its sample walks

    async def decide(self, fwk: Any, info: PodInfo) -> tuple[Any, FitError | None, Any]:
        if self.extenders is not None and bool(self.extenders) and self.extenders.wants(info):
            return await _extended_decision(fwk, self.cache, info, self.extenders)
        if fwk.percentage < 100 and fwk.scheduler_name not in self.orders:
            self.orders[fwk.scheduler_name] = zone_interleaved_order(self.cache.table)
        return _decision(fwk, self.cache, info, self.orders.get(fwk.scheduler_name))

    async def pod(self, planned: PlannedPod, info: PodInfo) -> None:
        """Decide one pod on the copy, as a scheduling cycle would, and record what happened."""
        table = self.cache.table
        entry: Obj = {"pod": info.key, "from": planned.source, "node": None}
        self.entries.append(entry)
        fwk = self.snap.frameworks.get(info.scheduler_name)
        if fwk is None:
            entry["message"] = f"no profile for schedulerName {info.scheduler_name!r}: another scheduler places it"
            return
        if info.key in self.cache.pods:
            entry.update(node=table.names[self.cache.pods[info.key].row], exists=True,
                         message="exists already, bound there: applying it moves nothing")
            return
        try:
            result, fit, post = await self.decide(fwk, info)
            if result is None and post is not None and post.status.ok:  # preemption: the victims go, then again
                entry["preempts"] = [v.key for v in post.victims]
                for key in entry["preempts"]:
                    self.preempted.append({"pod": key, "node": post.nominated_node, "by": info.key})
                    self.cache.remove_pod(key)
                result, fit, _ = await self.decide(fwk, info)
        except ExtenderError as exc:  # as the scheduler: the attempt fails, the pod stays Pending
            self.pending += 1
            entry["message"] = f"an extender failed: {exc}"
            return
        if result is None:
            assert fit is not None
            self.pending += 1
            entry["message"] = fit.diagnosis.message() + (f" {post.message}" if post is not None and post.message else "")
            entry["nearestMisses"] = nearest_misses(self.cache, info, fit.diagnosis)
            return
        entry.update(_placed(result, table))
        self.cache.assume(info, result.node)
        self.placed += 1


def _zones(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> list[Obj]:
    """Each zone's nodes, allocatable and requested cpu and memory, before and after the plan."""
    none = {"nodes": 0, "cpuAllocatable": 0, "cpuRequested": 0, "memoryAllocatable": 0, "memoryRequested": 0}
    out = []
    for z in sorted(set(before) | set(after)):
        b, a = before.get(z, none), after.get(z, none)
        out.append({"zone": z, "nodes": a["nodes"], "cpuAllocatable": a["cpuAllocatable"],
                    "memoryAllocatable": a["memoryAllocatable"], "nodesBefore": b["nodes"],
                    "cpuRequestedBefore": b["cpuRequested"], "cpuRequestedAfter": a["cpuRequested"],
                    "memoryRequestedBefore": b["memoryRequested"], "memoryRequestedAfter": a["memoryRequested"]})
    return out


async def run(snap: Snapshot, pods: list[PlannedPod], *, displaced: Iterable[Obj] = (), extenders: Any = None,
              before: dict[str, dict[str, int]] | None = None) -> Obj:
    """Place ``pods`` on the snapshot (changing only the copy); the plan as a JSON-ready dict.
    ``displaced``: the pods the what-ifs took off their nodes, placed again first within their
    priority. ``extenders``: the scheduler's, asked about the pods they
    are interested in (their answers are the only awaits: the copy is this plan's alone).
    ``before``: :func:`zone_usage` of the cluster before the what-ifs (default: as the copy is now)."""
    before = zone_usage(snap.cache) if before is None else before
    requeued = [PlannedPod(_unbound(obj), "displaced from a node taken out") for obj in displaced]
    this = _Run(snap, extenders)
    queue = deque(_order([*requeued, *pods]))
    done = 0
    while queue:
        planned, info = queue.popleft()
        done += 1
        if done % YIELD_EVERY == 0:
            await asyncio.sleep(0)  # the server's other requests go on meanwhile (the copy is ours alone)
        if planned.placement is not None:  # decided now; its copies are placed next
            copies, note = _placement_copies(snap, planned, info)
            this.notes.append(note)
            queue.extendleft(reversed(copies))
            continue
        await this.pod(planned, info)
    return {"pods": this.entries, "preempted": this.preempted, "placed": this.placed, "pending": this.pending,
            "zones": _zones(before, zone_usage(snap.cache)), "notes": this.notes}
