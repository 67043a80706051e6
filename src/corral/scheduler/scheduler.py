"""The scheduler service: keeps the cache and the queue current, runs cycles, binds, reports.

Data in: node, pod, namespace and PodDisruptionBudget changes, from the server's watch cache
(in-process) or from informers (``corral scheduler --server``), through
:meth:`Scheduler.node_changed`, :meth:`pod_changed`, :meth:`namespace_changed` and
:meth:`budget_changed`. Data out: bindings, PodScheduled conditions and
events, through a :class:`~corral.scheduler.cluster.ClusterWriter`.

The loop: pop a pod, run its profile's cycle synchronously (:func:`schedule_pod`), assume the pod
on the chosen node in the cache, and start its binding as a task, so the next cycle begins at once.
While ``max_binds_in_flight`` bindings are being written (past their Permit plugins), the loop waits
for one to come back before it pops the next pod: a store slower than the cycles holds the cycles
back, and the pods wait in the queue, not assumed behind a crowd of waiting bindings. (A semaphore
in each binding did that before: 8% of the scheduling process's samples on
SchedulingBasic/5000Nodes_50000Pods, and a create→bound p50 of 0.6–2.4 s there, now 17–520 ms.)
A pod held in Permit (a gang member) is not counted, so it cannot stop the members it waits for
from being scheduled.
When no node fits, the PostFilter plugins (DefaultPreemption) may nominate a node; the
:class:`~corral.scheduler.preemptor.Preemptor` removes the victims in the background.
A failed binding un-assumes the pod and sends it back through backoff. A pod no node can take gets
``PodScheduled=False`` with Kubernetes' message and a FailedScheduling event, and waits in the
unschedulable set until a cluster event (or the periodic flush) gives it another try.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from corral.aio import cancel_and_wait
from corral.api.defaults import now_rfc3339
from corral.scheduler.cache.cache import Cache
from corral.scheduler.cluster import ClusterWriter, EventRecorder
from corral.scheduler.framework.interface import CycleState, PostFilterResult
from corral.scheduler.framework.podinfo import PodInfo
from corral.scheduler.framework.status import SUCCESS, Code, Status
from corral.scheduler.gang import group_of
from corral.scheduler.batch.placements import PlacementDecisions
from corral.scheduler.extenders import Extenders, ExtenderError
from corral.scheduler.extenders.decide import apply_to_report, ask_extenders, decide_among, preempt_with_extenders
from corral.scheduler.preemptor import Preemptor
from corral.scheduler.profiles import SchedulerConfig, build_frameworks
from corral.scheduler.queue.scheduling_queue import ClusterEvent, QueuedPod, SchedulingQueue
from corral.scheduler.schedule_one import (FitError, ScheduleResult, explain, post_filter, schedule_pod,
                                            zone_interleaved_order)

__all__ = ["Scheduler", "node_signature"]

log = logging.getLogger(__name__)
PLACEMENT_PAUSE = 0.02  # seconds from a Placement's change to its decision: a burst of changes decided once



class _Metrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        registry = registry or CollectorRegistry()
        self.registry = registry
        self.attempts = Counter("corral_scheduler_schedule_attempts", "Scheduling attempts by result",
                                ["result", "profile"], registry=registry)
        self.duration = Histogram("corral_scheduler_scheduling_attempt_duration_seconds",
                                  "Duration of one scheduling attempt (filter, score, select)", ["result"],
                                  registry=registry,
                                  buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1))
        self.pending = Gauge("corral_scheduler_pending_pods", "Pending pods by queue", ["queue"], registry=registry)
        self.preemption_attempts = Counter("corral_scheduler_preemption_attempts",
                                           "Preemption attempts (pods no node fits that PostFilter ran for)",
                                           registry=registry)
        self.extender_errors = Counter("corral_scheduler_extender_errors", "Extender calls that failed",
                                       ["extender", "ignorable"], registry=registry)
        self.preemption_victims = Histogram("corral_scheduler_preemption_victims",
                                            "Pods removed by one successful preemption", registry=registry,
                                            buckets=(1, 2, 4, 8, 16, 32, 64))
        self.events_dropped = Counter("corral_scheduler_events_dropped",
                                      "Events not written: recorded while the most were waiting to be", registry=registry)
        self.events_waiting = Gauge("corral_scheduler_events_waiting", "Events recorded and not yet written",
                                    registry=registry)
        self._dropped_counted = 0
        # Children looked up once, not per attempt (``labels()`` takes a lock and builds a key each call).
        self._children: dict[tuple, Any] = {}

    def attempt(self, result: str, profile: str, elapsed: float) -> None:
        """One scheduling attempt: its duration by result, and the attempts by result and profile."""
        children = self._children.get((result, profile))
        if children is None:
            children = self._children[(result, profile)] = (self.duration.labels(result),
                                                             self.attempts.labels(result, profile))
        children[0].observe(elapsed)
        children[1].inc()

    def recorded_events(self, waiting: int, dropped: int) -> None:
        """The event recorder's figures, ``dropped`` its running count (the counter follows it)."""
        self.events_waiting.set(waiting)
        if dropped > self._dropped_counted:
            self.events_dropped.inc(dropped - self._dropped_counted)
            self._dropped_counted = dropped

    def unregister(self) -> None:
        """Take these metrics off the registry (a server that stops leading; the next term's scheduler
        registers its own)."""
        for collector in (self.attempts, self.duration, self.pending, self.preemption_attempts,
                          self.preemption_victims, self.extender_errors, self.events_dropped, self.events_waiting):
            self.registry.unregister(collector)


def node_signature(node: dict[str, Any]) -> tuple:
    """What of a node placement depends on: labels, taints, allocatable, cordon, readiness."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    ready = [c.get("status") for c in status.get("conditions") or () if c.get("type") == "Ready"]
    return (tuple(sorted((meta.get("labels") or {}).items())), repr(spec.get("taints")),
            repr(status.get("allocatable") or status.get("capacity")), bool(spec.get("unschedulable")), ready)


class Scheduler:
    def __init__(self, config: SchedulerConfig, writer: ClusterWriter, *, clock: Callable[[], float] = time.time,
                 queue_clock: Callable[[], float] = time.monotonic, registry: CollectorRegistry | None = None,
                 max_binds_in_flight: int = 512, flush_interval: float = 1.0) -> None:
        self.cache = Cache()
        self.config = config
        self.writer = writer
        self.frameworks = build_frameworks(config, cache=self.cache, clock=clock, binder=writer)
        first = next(iter(self.frameworks.values()))
        self.queue = SchedulingQueue(first.queue_sort.sort_key, queue_clock)
        self.events = EventRecorder(writer)
        self.metrics = _Metrics(registry)
        self.preemptor = Preemptor(self.cache, writer, self.events, self._spawn)
        self.extenders = Extenders(config.extenders, self.metrics.extender_errors)
        ignored = self.extenders.ignored_resources()
        for fwk in self.frameworks.values():  # resources an extender manages are its to check
            for plugin in fwk.all_plugins:
                if hasattr(plugin, "ignored_resources"):
                    plugin.ignored_resources = ignored
        self.max_binds_in_flight = max_binds_in_flight
        self.binding = 0  # bindings being written now (past Permit)
        self._bind_room = asyncio.Event()  # set when ``binding`` falls below the limit again
        self._inflight: set[asyncio.Task] = set()  # bindings and condition writes
        self._condition_written: dict[str, str] = {}  # pod key → PodScheduled=False message written
        self._tasks: list[asyncio.Task] = []
        self._flush_interval = flush_interval
        self._node_signatures: dict[str, tuple] = {}
        self._gang_status_written: dict[str, dict[str, Any]] = {}  # PodGroup key → status last written
        self._placements_due = asyncio.Event()
        self.placements = PlacementDecisions(self.frameworks, self.cache, clock=queue_clock,
                                             urgent=self._placements_due.set)
        self._order_version = -1
        self._order = None
        self.scheduled = 0
        self.bind_failures = 0
        self.attempt_observer: Callable[[float, str], None] | None = None  # (seconds, result), for benchmarks

    # --- what the cluster tells us --------------------------------------------------------------------

    def node_changed(self, name: str, node: dict[str, Any] | None) -> None:
        if node is None:
            self.cache.remove_node(name)
            self._node_signatures.pop(name, None)
            self.placements.nodes_changed()
            return
        signature = node_signature(node)
        previous = self._node_signatures.get(name)
        self._node_signatures[name] = signature
        self.cache.set_node(node)
        if previous is None:
            self.queue.on_event(ClusterEvent.NODE_ADD)
        elif previous != signature:
            self.queue.on_event(ClusterEvent.NODE_UPDATE)
        if previous != signature:
            self.placements.nodes_changed()

    def placement_changed(self, key: str, placement: dict[str, Any] | None) -> None:
        """A Placement added, changed or deleted (None): decided at the next flush if its spec changed."""
        self.placements.placement_changed(key, placement)

    def namespace_changed(self, name: str, ns: dict[str, Any] | None) -> None:
        if ns is None:
            self.cache.remove_namespace(name)
        else:
            self.cache.set_namespace(ns)
        self.queue.on_event(ClusterEvent.NAMESPACE_CHANGE)

    def budget_changed(self, key: str, budget: dict[str, Any] | None) -> None:
        """A PodDisruptionBudget added, changed or deleted (None): preemption prefers victims whose
        removal keeps every budget."""
        self.cache.set_budget(key, budget)

    def group_changed(self, key: str, group: dict[str, Any] | None) -> None:
        """A PodGroup added, changed or deleted (None): its members may now be offered to the queue."""
        for pod in self.cache.gangs.group_changed(key, group):
            meta = pod["metadata"]
            self.pod_changed(f"{meta['namespace']}/{meta['name']}", pod)

    def _gang_member(self, key: str, pod: dict[str, Any] | None) -> None:
        if pod is None:
            self.cache.gangs.member_changed(key, None, False)
            return
        meta = pod.get("metadata") or {}
        group = group_of(meta.get("namespace") or "default", meta.get("labels") or {})
        if group is None and key not in self.cache.gangs.member_of:
            return
        alive = not meta.get("deletionTimestamp") and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        for other in self.cache.gangs.member_changed(key, group, alive):  # the gang is complete: offer the rest
            other_meta = other["metadata"]
            other_key = f"{other_meta['namespace']}/{other_meta['name']}"
            if other_key != key:
                self.pod_changed(other_key, other)

    def pod_changed(self, key: str, pod: dict[str, Any] | None, raw: bytes | None = None) -> None:
        """A pod was added, changed (``pod``, decoded from the JSON ``raw`` when given) or deleted
        (``None``)."""
        self._gang_member(key, pod)
        self.placements.pod_changed(key, pod)
        if pod is None:
            self.queue.delete(key)
            self._condition_written.pop(key, None)
            self.cache.nominator.clear(key)
            was_counted = key in self.cache.pods
            self.cache.remove_pod(key)
            if was_counted:
                self.queue.on_event(ClusterEvent.POD_DELETE)
            return
        spec = pod.get("spec") or {}
        bound = bool(spec.get("nodeName"))
        if bound:
            self.queue.delete(key)
            was_counted = key in self.cache.pods
            self.cache.set_pod(pod, raw)
            if not was_counted and (spec.get("affinity") or {}):
                self.queue.on_event(ClusterEvent.POD_ADD)
            elif was_counted and key not in self.cache.pods:  # finished: its room is free
                self.queue.on_event(ClusterEvent.POD_DELETE)
            return
        if self.cache.is_assumed(key):
            return  # our binding is on its way
        if key in self.cache.pods:  # it was bound and is not any more (evicted back to Pending)
            self.cache.remove_pod(key)
            self.queue.on_event(ClusterEvent.POD_DELETE)
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            self.queue.delete(key)
            self.cache.nominator.clear(key)
            return
        if (spec.get("schedulerName") or "default-scheduler") not in self.frameworks:
            return  # another scheduler's pod
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        info = PodInfo.from_object(pod)
        nominated = (pod.get("status") or {}).get("nominatedNodeName")
        if nominated and not self.cache.nominator.node_of(key):  # claimed before a restart
            self.cache.nominator.nominate(info, nominated)
        for plugin in self.frameworks[info.scheduler_name].pre_enqueue:
            if not plugin.pre_enqueue(info).ok:
                self.queue.delete(key)  # gated: it comes back with its next update
                return
        self.queue.add(info)

    # --- the loop ------------------------------------------------------------------------------------

    def start(self) -> None:
        self.events.start()
        self._tasks = [asyncio.create_task(self.run(), name="scheduler"),
                       asyncio.create_task(self._flush_loop(), name="scheduler-flush"),
                       asyncio.create_task(self._placement_loop(), name="scheduler-placements")]

    async def stop(self) -> None:
        self.queue.close()
        await cancel_and_wait(*self._tasks, *self._inflight)
        self.binding = 0  # (a binding cancelled before its task began never uncounted itself)
        await self.events.stop()
        await self.extenders.close()

    async def run(self) -> None:
        budget_start = time.perf_counter()
        while True:
            while self.binding >= self.max_binds_in_flight:  # (a binding in Permit leaves for a moment)
                self._bind_room.clear()
                await self._bind_room.wait()
            qp = await self.queue.pop()
            try:
                if self.extenders:
                    await self.attempt(qp)
                else:
                    self.schedule_one(qp)
            except Exception:  # never let one pod stop the scheduler
                log.exception("scheduling %s failed", qp.key)
                self.queue.requeue_backoff(qp)
            # Let informer events and bindings run between bursts of cycles.
            if time.perf_counter() - budget_start > 0.005:
                await asyncio.sleep(0)
                budget_start = time.perf_counter()

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(self._flush_interval)
            self.queue.flush_backoff()
            self.queue.flush_unschedulable()
            await self.write_gang_statuses()

    async def _placement_loop(self) -> None:
        """Placements decided at once when one is new or its spec changed (after a short pause that
        gathers a burst of such changes into one decision), and at each flush interval otherwise
        (nodes changing, copies bound or gone: a rollout's thousands of them decided once a flush)."""
        while True:
            try:
                await asyncio.wait_for(self._placements_due.wait(), self._flush_interval)
            except TimeoutError:
                pass
            self._placements_due.clear()
            await asyncio.sleep(PLACEMENT_PAUSE)
            await self.placements.write(self.writer)

    async def write_gang_statuses(self) -> None:
        """Each PodGroup whose members, places or phase changed gets its status written (once per
        change, not per member)."""
        book, written = self.cache.gangs, self._gang_status_written
        changed, book.changed = book.changed, set()
        for group in sorted(changed):  # in name order, whatever the set's
            gang = book.gangs.get(group)
            if gang is None or not gang.min_member:
                continue
            status = book.status(group)
            if written.get(group) == status:
                continue
            namespace, _, name = group.partition("/")
            try:
                await self.writer.patch_object_status("PodGroup", namespace, name, {"status": status})
                written[group] = status
            except Exception as exc:  # the group may be gone; the status is informative only
                log.debug("status of PodGroup %s not written: %s", group, exc)

    def _node_order(self, fwk) -> Any:
        if fwk.percentage >= 100:
            return None
        table = self.cache.table
        if self._order_version != table.version:
            self._order = zone_interleaved_order(table)
            self._order_version = table.version
        return self._order

    def schedule_one(self, qp: QueuedPod) -> ScheduleResult | None:
        """One attempt for one pod: decide synchronously, then bind in the background. The result,
        or None when the pod was not placed (none fits, or a Reserve plugin refused)."""
        fwk = self.frameworks[qp.info.scheduler_name]  # only its profiles' pods are queued (pod_changed)
        start = time.perf_counter()
        state = CycleState()
        fit: FitError | None = None
        post: PostFilterResult | None = None
        # The decision, with the claims this pod must not see hidden; nothing in it may change
        # nominations (they are applied below, once the claims count again).
        with self.cache.nominator.hidden_from(qp.info):
            try:
                result = schedule_pod(fwk, self.cache, qp.info, self._node_order(fwk), state)
            except FitError as exc:
                fit = exc
                elapsed = time.perf_counter() - start
                post = self._post_filter(fwk, state, qp, fit)
        if fit is not None:
            self._record_failure(qp, fwk, fit, post, elapsed)
            return None
        return result if self._place(qp, fwk, state, result.node, time.perf_counter() - start) else None

    async def attempt(self, qp: QueuedPod) -> None:
        """One attempt, through the extenders when any is interested in the pod."""
        if self.extenders and self.extenders.wants(qp.info):
            await self.schedule_one_extended(qp)
        else:
            self.schedule_one(qp)

    async def schedule_one_extended(self, qp: QueuedPod) -> None:
        """As :meth:`schedule_one`, with the extenders asked about the nodes the filters passed.
        The cache may change while they answer: the decision is taken afterwards, on the cache as
        it is then, among the nodes every extender passed."""
        fwk = self.frameworks[qp.info.scheduler_name]
        start = time.perf_counter()
        info = qp.info
        try:
            verdict, extra = await ask_extenders(fwk, self.cache, info, self.extenders)
        except ExtenderError as exc:
            self._extender_failed(qp, str(exc))
            return
        if self.queue.get(qp.key) is not qp:
            return  # deleted while the extenders answered
        preempters = self.extenders.interested(info, "preempt_verb")
        state = CycleState()
        result, fit, post = decide_among(fwk, self.cache, info, verdict, extra, candidates=bool(preempters),
                                         state=state)
        if fit is not None and post is not None and post.candidates and preempters:
            post = await self._preempt_with_extenders(fwk, qp, fit, post)
            if post is None:
                return
        elapsed = time.perf_counter() - start
        if fit is not None:
            self._record_failure(qp, fwk, fit, post, elapsed)
        else:
            assert result is not None
            self._place(qp, fwk, state, result.node, elapsed)

    async def _preempt_with_extenders(self, fwk, qp: QueuedPod, fit: FitError,
                                      post: PostFilterResult) -> PostFilterResult | None:
        """Preemption's candidates through the extenders with a ``preemptVerb``, then the best of
        what they kept, checked on the cache as it is once they answered. None: the attempt is
        over (an extender failed, as for a failed filter, or the pod was deleted meanwhile)."""
        try:
            return await preempt_with_extenders(fwk, self.cache, qp.info, fit, post, self.extenders,
                                                still_wanted=lambda: self.queue.get(qp.key) is qp)
        except ExtenderError as exc:
            self._extender_failed(qp, str(exc))
            return None

    def _post_filter(self, fwk, state: CycleState, qp: QueuedPod, fit: FitError) -> PostFilterResult | None:
        """Run inside the cycle's hidden nominations: PostFilter plugins (preemption: may nominate a
        node and name victims) until one succeeds."""
        return post_filter(fwk, state, qp.info, fit)

    def _record_failure(self, qp: QueuedPod, fwk, fit: FitError, post: PostFilterResult | None,
                        elapsed: float) -> None:
        self.metrics.attempt("unschedulable", fwk.scheduler_name, elapsed)
        if self.attempt_observer is not None:
            self.attempt_observer(elapsed, "unschedulable")
        if post is not None and post.status.ok:
            self.preemptor.nominate(qp.info, post.nominated_node, post.victims, fwk.scheduler_name)
            self.metrics.preemption_victims.observe(len(post.victims))
        elif post is not None and post.clear_nomination and self.cache.nominator.clear(qp.key):
            self._spawn(self._write_status(qp.info, {"status": {"nominatedNodeName": None}}))
        if post is not None:
            self.metrics.preemption_attempts.inc()
        self._unschedulable(qp, fit, post)

    def _place(self, qp: QueuedPod, fwk, state: CycleState, node: str, elapsed: float) -> bool:
        """Assume the pod on ``node``, reserve, and start its binding; False if a Reserve refused."""
        self.metrics.attempt("scheduled", fwk.scheduler_name, elapsed)
        if self.attempt_observer is not None:
            self.attempt_observer(elapsed, "scheduled")
        self.cache.assume(qp.info, node)
        for i, plugin in enumerate(fwk.reservers):
            status = plugin.reserve(state, qp.info, node)
            if not status.ok:
                self._unreserve(fwk, state, qp.info, node, upto=i + 1)
                self.cache.forget(qp.key)
                self.queue.requeue_backoff(qp)
                return False
        self.queue.done(qp.key)
        self._condition_written.pop(qp.key, None)
        self.binding += 1  # from now: its task may not have started when the loop looks
        self._spawn(self._bind(fwk, state, qp, node))
        return True

    def _extender_failed(self, qp: QueuedPod, message: str) -> None:
        """A non-ignorable extender failed: not the pod's fault; it is retried after backoff, and
        its event and condition name the extender."""
        self.metrics.attempts.labels("error", qp.info.scheduler_name).inc()
        self.queue.requeue_backoff(qp)
        self._write_scheduled_false(qp, "SchedulerError", message)
        self.events.record(qp.info, "Warning", "FailedScheduling", message)

    @staticmethod
    def _unreserve(fwk, state: CycleState, pod: PodInfo, node: str, upto: int | None = None) -> None:
        for plugin in reversed(fwk.reservers[:upto]):
            if hasattr(plugin, "unreserve"):
                plugin.unreserve(state, pod, node)

    def _spawn(self, coro) -> None:
        task = asyncio.create_task(coro)
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    def _bound(self) -> None:
        """A binding counted in ``binding`` is no longer written (or waits in Permit)."""
        self.binding -= 1
        if self.binding < self.max_binds_in_flight:
            self._bind_room.set()

    async def _bind(self, fwk, state: CycleState, qp: QueuedPod, node: str) -> None:
        status = SUCCESS
        self._bound()  # not counted while a Permit plugin holds it (a gang member waiting for the rest)
        try:
            # Permit first, uncounted: a gang member may wait here a long time.
            for plugin in fwk.permits:  # a Permit plugin may hold (await) or refuse the binding
                status = await plugin.permit(state, qp.info, node)
                if not status.ok:
                    break
        except Exception as exc:  # a plugin that raises refuses, it does not stop the scheduler
            status = Status.error(str(exc), "Permit")
        if status.ok:
            self.binding += 1
            try:
                binder = self.extenders.binder_for(qp.info) if self.extenders else None
                if binder is not None:  # an extender with bindVerb binds its pods
                    try:
                        await binder.bind(qp.info.namespace, qp.info.name, qp.info.uid, node)
                    except ExtenderError as exc:
                        status = Status.error(str(exc), binder.config.name)
                else:
                    status = await fwk.binders[0].bind(state, qp.info, node)
            except Exception as exc:  # a plugin that raises is a failed binding, not a dead scheduler
                status = Status.error(str(exc), "DefaultBinder")
            finally:
                self._bound()
        if status.ok:
            self.scheduled += 1
            self.events.record(qp.info, "Normal", "Scheduled",
                               f"Successfully assigned {qp.key} to {node}")
            return
        self.bind_failures += 1
        self._unreserve(fwk, state, qp.info, node)
        self.cache.forget(qp.key)
        self.queue.on_event(ClusterEvent.POD_DELETE)  # its room is free again
        if status.code is Code.UNSCHEDULABLE:  # a Permit plugin refused (a gang that did not complete)
            self._write_scheduled_false(qp, "Unschedulable", status.message())
            self.events.record(qp.info, "Warning", "FailedScheduling", status.message())
            self.queue.requeue_backoff(qp)
            return
        if status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            log.info("binding %s to %s: %s", qp.key, node, status.message())
            return
        log.warning("binding %s to %s failed: %s; retrying after backoff", qp.key, node, status.message())
        self.metrics.attempts.labels("error", fwk.scheduler_name).inc()
        self.queue.requeue_backoff(qp)

    def _unschedulable(self, qp: QueuedPod, fit: FitError, post: PostFilterResult | None = None) -> None:
        message = fit.diagnosis.message()
        if post is not None and post.message:  # both stories: why no node fits, and what preemption did
            message = f"{message} {post.message}"
        self.queue.requeue_unschedulable(qp, fit.rejecting_plugins)
        self._write_scheduled_false(qp, "Unschedulable", message)
        self.events.record(qp.info, "Warning", "FailedScheduling", message)

    def _write_scheduled_false(self, qp: QueuedPod, reason: str, message: str) -> None:
        """PodScheduled=False with ``message``, written once per message (the pod may carry it
        already, from a scheduler before this one)."""
        written = self._condition_written.get(qp.key)
        if written is None:  # not written by us yet: what does the pod say?
            for c in (qp.info.obj.get("status") or {}).get("conditions") or ():
                if c.get("type") == "PodScheduled" and c.get("status") == "False":
                    written = c.get("message")
        if written != message:
            self._condition_written[qp.key] = message
            conditions = [c for c in (qp.info.obj.get("status") or {}).get("conditions") or ()
                          if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "False", "reason": reason,
                               "message": message, "lastTransitionTime": now_rfc3339()})
            self._spawn(self._write_status(qp.info, {"status": {"conditions": conditions}}))

    async def _write_status(self, pod: PodInfo, patch: dict[str, Any]) -> None:
        try:
            await self.writer.patch_status(pod, patch)
        except Exception as exc:  # the pod may be gone; the condition is informative only
            log.debug("status of %s not written: %s", pod.key, exc)

    # --- introspection --------------------------------------------------------------------------------

    def explain(self, pod: dict[str, Any]) -> dict[str, Any]:
        info = PodInfo.from_object(pod)
        fwk = self.frameworks.get(info.scheduler_name)
        if fwk is None:
            raise LookupError(f"no profile for schedulerName {info.scheduler_name!r}")
        if info.key not in self.cache.pods:  # neither bound nor assumed (an assumed pod is in pods too)
            with self.cache.nominator.hidden_from(info):
                return explain(fwk, self.cache, info)
        # A bound pod, explained as if it were pending: without itself on its node, or it would be
        # the one whose ports and resources its own node lacks. Taken out and put back within this
        # call (no await between), so no scheduling cycle sees it missing; a binding still in flight
        # (assumed) stays as it is.
        info = PodInfo.from_object({**pod, "spec": {**(pod.get("spec") or {}), "nodeName": ""}})
        if self.cache.is_assumed(info.key):
            return explain(fwk, self.cache, info)
        with self.cache.lifted([self.cache.pods[info.key]]):
            return explain(fwk, self.cache, info)

    async def explain_with_extenders(self, pod: dict[str, Any]) -> dict[str, Any]:
        """:meth:`explain`, with the extenders asked about the nodes the filters passed (their
        rejections and weighted scores in the report; an extender's error in ``extenderError``)."""
        report = self.explain(pod)
        info = PodInfo.from_object(pod)
        if not (self.extenders and self.extenders.wants(info)):
            return report
        table = self.cache.table
        asked = [(e["node"], table.objects[table.row_of[e["node"]]]) for e in report["nodes"]
                 if e["feasible"] and e["node"] in table.row_of]
        try:
            verdict = await self.extenders.filter(info, asked)
            extra = await self.extenders.prioritize(info, [(n, o) for n, o in asked if n in verdict.passed])
        except ExtenderError as exc:
            report["extenderError"] = str(exc)
            return report
        apply_to_report(report, verdict, extra)
        return report

    def update_gauges(self) -> None:
        for name, n in self.queue.counts().items():
            self.metrics.pending.labels(name).set(n)
        self.metrics.recorded_events(self.events.waiting, self.events.dropped)

    async def idle(self, timeout: float = 30.0) -> None:
        """Wait until nothing is queued as active or backing off and no binding is in flight."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            counts = self.queue.counts()
            if counts["active"] == 0 and counts["backoff"] == 0 and not self._inflight:
                return
            await asyncio.sleep(0.01)
        raise TimeoutError(f"scheduler not idle after {timeout}s: {self.queue.counts()}")
