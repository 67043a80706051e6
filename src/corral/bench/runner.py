"""Runs one workload against a target and measures it, as scheduler_perf does.

Ops, in order: ``createNodes``, ``createNamespaces``, ``createPriorityClass``, ``createPodGroups``
(groups of ``minMember`` for ``pods`` pods; pods join them with ``groupSize``), ``createPods`` (init
pods: wait until bound, unless ``expectPending``; measured pods: ``measure: true``), ``churn``
(delete and create pods in the background while measuring; ``mode: create`` only creates). While the measured pods schedule, the number bound is sampled every
second; the report has throughput (average and percentiles of those samples), scheduling attempt
latency, create→bound latency, peak RSS, and the placement's quality and invariants.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import msgspec

from corral.api.defaults import now_rfc3339
from corral.api.quantity import to_milli, to_units
from corral.api.kinds.scheduling import POD_GROUP_LABEL
from corral.bench import CREATORS, MAX_CREATORS
from corral.bench.workloads import ZONE, Workload, node_object, pod_template

__all__ = ["run_workload", "BenchResult", "Progress"]

DEFAULT_CAPACITY = {"cpu": "4", "memory": "32Gi", "pods": "110"}


class Progress:
    """Where the runner reports progress (the CLI shows a bar; tests pass a silent one)."""

    def phase(self, text: str, total: int) -> None: ...

    def advance(self, done: int) -> None: ...

    def done(self) -> None: ...


@dataclass(slots=True)
class _Tracker:
    created: dict[str, float] = field(default_factory=dict)  # pod key → create acknowledged
    bound: dict[str, float] = field(default_factory=dict)
    measured: set[str] = field(default_factory=set)
    churned: set[str] = field(default_factory=set)  # deleted by the churn op, not by the scheduler
    victims: dict[str, int] = field(default_factory=dict)  # pods deleted by preemption → priority
    requested: dict[str, float] = field(default_factory=dict)  # pod key → create sent
    gang_of: dict[str, str] = field(default_factory=dict)  # pod key → its PodGroup
    measured_bound: int = 0  # measured pods bound so far, counted as they bind (sampled every second)

    def on_bound(self, key: str, node: str, t: float) -> None:
        if key not in self.bound:
            self.bound[key] = t
            if key in self.measured:
                self.measured_bound += 1

    def on_deleted(self, key: str, priority: int) -> None:
        if key not in self.churned:
            self.victims[key] = priority


def held_by(d: dict[str, Any]) -> str:
    """What held a run's throughput, from its result: its creators, when the measured pods were still
    being created for 90 % of the measurement or more (the scheduler bound them as they came), else
    the cluster (pods waited to be scheduled after the last was created)."""
    seconds, creating = d["measureSeconds"], d.get("createSeconds")
    if creating is None or seconds <= 0:  # (a result saved before it was measured)
        return ""
    share = f"the measured pods were created over {creating:g} s of the {seconds:g} s measured"
    if creating >= 0.9 * seconds:
        n = d.get("creators", CREATORS)
        return (f"{share}: the run was held by its {n} creator{'s' if n != 1 else ''} (each create took "
                f"{d['createLatencyMs']['p50']:.1f} ms p50), and the scheduler kept up (create→bound "
                f"{d['e2eLatencyMs']['p50']:.1f} ms p50); --creators {min(4 * n, MAX_CREATORS)} loads the "
                "cluster further")
    return f"{share}: the run was held by the cluster, which bound the last pods after the creates ended"


def _percentiles(values: list[float], scale: float = 1.0) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p90": 0.0, "p99": 0.0}
    ordered = sorted(values)

    def q(f: float) -> float:
        return round(ordered[min(len(ordered) - 1, max(0, math.ceil(f * len(ordered)) - 1))] * scale, 3)

    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99)}


def _histogram_quantiles(buckets: dict[float, float]) -> dict[str, float]:
    """Prometheus-style quantiles (linear within a bucket) from cumulative bucket counts, in ms."""
    items = sorted(buckets.items())
    total = items[-1][1] if items else 0
    out = {}
    for name, f in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        if total <= 0:
            out[name] = 0.0
            continue
        rank, prev_le, prev_count = f * total, 0.0, 0.0
        for le, count in items:
            if count >= rank:
                upper = le if le != math.inf else prev_le
                width = count - prev_count
                out[name] = round((prev_le + (upper - prev_le) * ((rank - prev_count) / width if width else 0)) * 1000, 3)
                break
            prev_le, prev_count = le, count
    return out


@dataclass(slots=True)
class BenchResult:
    data: dict[str, Any]


async def _bounded(job: Callable[[int], Awaitable[None]], count: int, limit: int,
                   on_done: Callable[[int], None] | None = None) -> None:
    """``job(0) … job(count - 1)``, at most ``limit`` at once: ``limit`` workers taking the next index,
    so a run of 50,000 creates holds ``limit`` coroutines, not 50,000 tasks queued on a semaphore."""
    next_index = 0
    done = 0

    async def worker() -> None:
        nonlocal next_index, done
        while next_index < count:
            i = next_index
            next_index += 1
            await job(i)
            done += 1
            if on_done is not None and done % 100 == 0:
                on_done(done)

    await asyncio.gather(*(worker() for _ in range(min(limit, count))))


async def _create_pods(target, tracker: _Tracker, op: dict[str, Any], progress: Progress, start_index: int = 0,
                       creators: int = CREATORS) -> list[str]:
    # Decoding the encoded template is several times cheaper than a deep copy per pod.
    template = msgspec.json.encode(pod_template(op.get("template", "basic")))
    namespace = op.get("namespace", "default")
    prefix = op.get("prefix") or ("measured" if op.get("measure") else "init")
    keys = []

    group_size = int(op.get("groupSize") or 0)  # members per PodGroup (createPodGroups made them)
    measured, priority_class = bool(op.get("measure")), op.get("priorityClass")
    clock = time.perf_counter

    async def create(i: int) -> None:
        pod = msgspec.json.decode(template)
        pod["metadata"]["name"] = name = f"{prefix}-{i}"
        key = f"{namespace}/{name}"
        if measured:
            tracker.measured.add(key)
        if priority_class:  # as the priority templates: no grace period, since no agent stops it
            pod["spec"]["priorityClassName"] = priority_class
            pod["spec"]["terminationGracePeriodSeconds"] = 0
        if group_size:
            group = f"gang-{i // group_size}"
            pod["metadata"]["labels"][POD_GROUP_LABEL] = group
            tracker.gang_of[key] = group
        keys.append(key)
        tracker.requested[key] = clock()
        await target.create("Pod", pod, namespace)
        tracker.created[key] = clock()

    count = int(op.get("count", 0))
    progress.phase(f"creating {count} {prefix} pods" + (" (measured)" if op.get("measure") else ""), count)
    await _bounded(lambda i: create(start_index + i), count, creators, on_done=progress.advance)
    return keys


async def _wait_bound(tracker: _Tracker, keys: list[str], timeout: float, progress: Progress, what: str) -> None:
    deadline = time.monotonic() + timeout
    progress.phase(f"waiting for {what} to be bound", len(keys))
    # Only the keys not bound at the last look are looked at again: in-process, this loop shares the
    # scheduler's thread, and counting every key every 50 ms took 1.2 million steps, ~3 % of the
    # profile of a 5,000-node / 10,000-pod run.
    pending = keys
    while True:
        pending = [k for k in pending if k not in tracker.bound]
        done = len(keys) - len(pending)
        progress.advance(done)
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(pending)} of the {what} were not bound within {timeout:g} s")
        await asyncio.sleep(0.05)


async def _churn(target, tracker: _Tracker, op: dict[str, Any], stop: asyncio.Event) -> int:
    """Every 100 ms delete some of the churn pods and create as many new ones."""
    prefix, per_second = op.get("prefix", "churn"), int(op.get("perSecond", 100))
    batch = max(per_second // 10, 1)
    live = sorted((k for k in tracker.created if k.split("/", 1)[1].startswith(f"{prefix}-")),
                  key=lambda k: int(k.rsplit("-", 1)[1]))
    next_index = len(live) + 1_000_000
    changed = 0
    create_only = op.get("mode") == "create"
    while not stop.is_set():
        victims, live = ([] if create_only else live[:batch]), (live if create_only else live[batch:])
        tracker.churned.update(victims)
        await asyncio.gather(*(target.delete_pod(*k.split("/", 1)) for k in victims))
        new_op = {**op, "count": batch, "prefix": prefix}
        live += await _create_pods(target, tracker, new_op, Progress(), start_index=next_index)
        next_index += batch
        changed += len(victims) + batch
        try:
            await asyncio.wait_for(stop.wait(), 0.1)
        except asyncio.TimeoutError:
            pass
    return changed


def _gangs_bound_early(tracker: _Tracker) -> int:
    """Gangs a member of which was bound before the gang's last member was even sent: a gang bound
    part by part. (0 when all-or-nothing held.)"""
    members: defaultdict = defaultdict(list)
    for key, group in tracker.gang_of.items():
        members[group].append(key)
    early = 0
    for keys in members.values():
        bound = [tracker.bound[k] for k in keys if k in tracker.bound]
        if bound and min(bound) < max(tracker.requested[k] for k in keys):
            early += 1
    return early


def _requests(spec: dict[str, Any]) -> tuple[int, int]:
    cpu = mem = 0
    for c in spec.get("containers") or ():
        req = (c.get("resources") or {}).get("requests") or {}
        cpu += to_milli(req.get("cpu", "0"))
        mem += to_units(req.get("memory", "0"))
    return cpu, mem


def _placement_report(placements: list, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    per_node: Counter = Counter()
    cpu: defaultdict = defaultdict(int)
    mem: defaultdict = defaultdict(int)
    green: Counter = Counter()
    blue_zone: Counter = Counter()
    zone_of = {n["metadata"]["name"]: n["metadata"].get("labels", {}).get(ZONE) for n in nodes}
    for ns, name, node, labels, spec in placements:
        if not node:
            continue
        per_node[node] += 1
        c, m = _requests(spec)
        cpu[node] += c
        mem[node] += m
        if labels.get("color") == "green":
            green[node] += 1
        if labels.get("color") == "blue" and zone_of.get(node):
            blue_zone[zone_of[node]] += 1
    over = 0
    for n in nodes:
        name, alloc = n["metadata"]["name"], (n.get("status") or {}).get("allocatable") or {}
        if cpu[name] > to_milli(alloc.get("cpu", "0")) or mem[name] > to_units(alloc.get("memory", "0")) \
                or per_node[name] > int(alloc.get("pods", "0")):
            over += 1
    counts = [per_node[n["metadata"]["name"]] for n in nodes]
    zones = sorted({z for z in zone_of.values() if z})
    spread_skew = (max(blue_zone[z] for z in zones) - min(blue_zone[z] for z in zones)) if zones and blue_zone else 0
    return {
        "overcommittedNodes": over,
        "placement": {"nodesUsed": sum(1 for c in counts if c), "podsPerNodeMin": min(counts, default=0),
                      "podsPerNodeMax": max(counts, default=0),
                      "podsPerNodeStdev": round(statistics.pstdev(counts), 3) if counts else 0.0},
        "checks": {"antiAffinityNodesWithTwoGreenPods": sum(1 for v in green.values() if v > 1),
                   "spreadMaxZoneSkew": spread_skew},
    }


async def run_workload(workload: Workload, size: str, target, *, small: bool = False, progress: Progress | None = None,
                       timeout: float = 600.0, creators: int = CREATORS) -> BenchResult:
    """``workload``'s ops at ``size`` against ``target``; nodes and pods are created by ``creators``
    requests at once (each creator sends its next when its last is answered)."""
    if not 1 <= creators <= MAX_CREATORS:
        raise ValueError(f"creators must be 1 to {MAX_CREATORS}, got {creators}")
    progress = progress or Progress()
    ops = workload.expand(size, small=small)
    tracker = _Tracker()
    target.on_bound = tracker.on_bound
    target.on_deleted = tracker.on_deleted
    preemptor_priority: int | None = None  # the value of the class marked ``preemptor: true``
    try:
        await target.start()
    except BaseException:
        await target.stop()  # its connections too, not only the run's
        raise
    churn_stop, churn_task = asyncio.Event(), None
    samples: list[float] = []
    measure_start = measure_end = created_end = 0.0
    cpu_per_pod: dict[str, int] = {}  # each process's CPU time over the measured pods, per pod
    node_count = 0
    try:
        for op in ops:
            kind = op.get("op")
            if kind == "createNodes":
                node_count = int(op["count"])
                heartbeat = now_rfc3339()
                capacity = {**DEFAULT_CAPACITY, **(op.get("capacity") or {})}
                progress.phase(f"creating {node_count} nodes", node_count)
                labels, zones = op.get("labels") or {}, op.get("zones")
                await _bounded(lambda i: target.create("Node", node_object(i, labels=labels, zones=zones, capacity=capacity,
                                                                           heartbeat=heartbeat)),
                               node_count, creators, on_done=progress.advance)
            elif kind == "createNamespaces":
                for name in op.get("names") or ():
                    await target.create("Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            elif kind == "createPodGroups":
                for g in range(-(-int(op["pods"]) // int(op["minMember"]))):  # enough for the pods
                    await target.create("PodGroup", {
                        "apiVersion": "scheduling.corral.dev/v1alpha1", "kind": "PodGroup",
                        "metadata": {"name": f"gang-{g}"},
                        "spec": {"minMember": int(op["minMember"]),
                                 "scheduleTimeoutSeconds": int(op.get("timeoutSeconds", 300))}}, "default")
            elif kind == "createPriorityClass":
                await target.create("PriorityClass", {
                    "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": op["name"]}, "value": int(op["value"])})
                if op.get("preemptor"):
                    preemptor_priority = int(op["value"])
            elif kind == "churn":
                churn_task = asyncio.create_task(_churn(target, tracker, op, churn_stop))
            elif kind == "createPods" and not op.get("measure"):
                keys = await _create_pods(target, tracker, op, progress, creators=creators)
                if not op.get("expectPending"):
                    await _wait_bound(tracker, keys, timeout, progress, f"{len(keys)} init pods")
            elif kind == "createPods":
                # The cluster is built: tune the collector as `corral server` does after start-up.
                from corral.server.app import tune_gc_for_server

                collector = tune_gc_for_server()  # noqa: F841 (runs until the benchmark's loop ends)
                measure_start = time.perf_counter()
                sampler_stop = asyncio.Event()

                async def sample() -> None:
                    last = 0
                    while not sampler_stop.is_set():
                        await asyncio.sleep(1.0)
                        now = tracker.measured_bound
                        samples.append(float(now - last))
                        last = now

                sampler = asyncio.create_task(sample())
                cpu_before = await target.cpu_seconds()
                keys = await _create_pods(target, tracker, op, progress, creators=creators)
                created_end = max((tracker.created[k] for k in keys), default=measure_start)
                await _wait_bound(tracker, keys, timeout, progress, f"{len(keys)} measured pods")
                measure_end = max(tracker.bound[k] for k in keys)
                cpu_after = await target.cpu_seconds()
                cpu_per_pod = {who: round(1e6 * (cpu_after[who] - cpu_before[who]) / max(len(keys), 1))
                               for who in cpu_after if who in cpu_before}
                sampler_stop.set()
                await sampler
            else:
                raise ValueError(f"unknown op {kind!r}")
        churned = 0
        churn_unbound = None
        if churn_task is not None:
            churn_stop.set()
            churned = await churn_task
            churn_op = next(op for op in ops if op.get("op") == "churn")
            if churn_op.get("mode") == "create":  # they must all find a place (by preempting, if so made)
                prefix = churn_op.get("prefix", "churn")
                created = [k for k in tracker.created if k.split("/", 1)[1].startswith(f"{prefix}-")]
                try:
                    await _wait_bound(tracker, created, timeout, progress, f"{len(created)} churn pods")
                except TimeoutError:
                    pass
                churn_unbound = sum(1 for k in created if k not in tracker.bound)
        progress.phase("collecting the placement", 1)
        placements = await target.placements()
        nodes = await target.nodes()
        measured = sorted(tracker.measured)
        e2e = [tracker.bound[k] - tracker.created[k] for k in measured if k in tracker.created and k in tracker.bound]
        # Sent → answered: what each creator waits per pod.
        creates = [tracker.created[k] - tracker.requested[k] for k in measured if k in tracker.created]
        latencies = target.attempt_latencies() if hasattr(target, "attempt_latencies") else None
        if latencies is not None:
            attempt_ms = _percentiles(latencies, 1000)
        else:
            attempt_ms = _histogram_quantiles(await target.attempt_histogram())
        duration = max(measure_end - measure_start, 1e-9)
        # Samples: the full seconds of the measurement (a partial last second would read low).
        full = samples[: max(int(duration), 1)]
        data = {
            "workload": f"{workload.name}/{size}", "mode": target.mode, "small": small, "nodes": node_count,
            "creators": creators,
            "measuredPods": len(measured), "boundPods": sum(1 for k in measured if k in tracker.bound),
            "measureSeconds": round(duration, 3),
            # the part of it that the measured pods took to be created: most of it, the creators held the run
            "createSeconds": round(min(created_end - measure_start, duration), 3),
            "throughput": {"average": round(len(measured) / duration, 1), **_percentiles(full)},
            "throughputSamples": samples,
            "attemptLatencyMs": attempt_ms,
            "e2eLatencyMs": _percentiles(e2e, 1000),
            "createLatencyMs": _percentiles(creates, 1000),
            "peakRssBytes": target.peak_rss(),
            "cpuPerPodMicros": cpu_per_pod,
            "churnedPods": churned,
            **_placement_report(placements, nodes),
        }
        if tracker.gang_of:
            data["checks"]["gangsBoundBeforeComplete"] = _gangs_bound_early(tracker)
        if churn_unbound is not None:
            data["checks"]["churnPodsNotBound"] = churn_unbound
        if tracker.victims or preemptor_priority is not None:
            by_priority = Counter(tracker.victims.values())
            data["preemption"] = {"victims": len(tracker.victims),
                                  "victimsByPriority": {str(p): n for p, n in sorted(by_priority.items())}}
            if preemptor_priority is not None:  # a victim must have a lower priority than its preemptor
                data["checks"]["victimsNotLowerThanPreemptors"] = sum(
                    n for p, n in by_priority.items() if p >= preemptor_priority)
        return BenchResult(data)
    finally:
        progress.done()
        churn_stop.set()
        if churn_task is not None and not churn_task.done():
            churn_task.cancel()
        await target.stop()
