"""Drive the real scheduler without a server: a recording writer and a loop that runs to quiescence.

Like Nomad's scheduler ``Harness``: the scheduler is the production code; only its writes are
captured (and, when asked, some bindings fail). Bindings it makes are fed back as the informer
would, so the cache confirms them.
"""

from __future__ import annotations

import asyncio
import copy
import random
import time
from typing import Any, Callable

from corral.scheduler.framework.podinfo import PodInfo
from corral.scheduler.framework.status import SUCCESS, Code, Status
from corral.scheduler.profiles import parse_config
from corral.scheduler.scheduler import Scheduler
from corral.testing.clock import FakeClock

__all__ = ["RecordingWriter", "Harness", "build_cache", "run_filter", "run_score"]


def _obj(x: Any) -> dict[str, Any]:
    return x.obj if hasattr(x, "obj") else copy.deepcopy(x)


class RecordingWriter:
    """Records bindings, conditions and events; ``fail(pod, node)`` makes a binding fail."""

    def __init__(self, fail: Callable[[PodInfo, str], bool] | None = None) -> None:
        self.fail = fail
        self.bindings: dict[str, str] = {}
        self.bind_attempts = 0
        self.failed_binds = 0
        self.double_binds = 0
        self.conditions: dict[str, dict[str, Any]] = {}
        self.status_patches: list[tuple[str, dict[str, Any]]] = []  # (pod key, patch), every one
        self.event_objects: list[dict[str, Any]] = []  # the events as created
        self.event_patches: list[tuple[str, str, dict[str, Any]]] = []  # (namespace, name, patch)
        self.group_statuses: dict[str, dict[str, Any]] = {}  # PodGroup key → last status written
        self.placement_statuses: dict[str, dict[str, Any]] = {}  # Placement key → last status written
        self.pinned_versions: dict[str, str] = {}  # object key → the resourceVersion its last status patch named
        self.status_failures = 0  # object status patches to refuse (a 409, say) before accepting again
        self.deleted: list[str] = []  # pod keys, in the order deleted (preemption's victims)
        self.undeletable: set[str] = set()  # pod keys whose delete fails (a 403, say)
        self.strategic: list[str] = []  # pod keys whose status was patched as a strategic merge
        self.on_delete: Callable[[str], None] | None = None  # the harness's view of the deletion

    @property
    def events(self) -> list[tuple[str, str, str]]:
        """(pod key, reason, message) of each event created."""
        return [(f"{e['involvedObject']['namespace']}/{e['involvedObject']['name']}", e["reason"], e["message"])
                for e in self.event_objects]

    async def bind(self, pod: PodInfo, node: str) -> Status:
        self.bind_attempts += 1
        await asyncio.sleep(0)
        if pod.key in self.bindings:
            self.double_binds += 1
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("already bound",))
        if self.fail is not None and self.fail(pod, node):
            self.failed_binds += 1
            return Status.error("injected bind failure")
        self.bindings[pod.key] = node
        return SUCCESS

    async def patch_status(self, pod: PodInfo, patch: dict[str, Any], *, strategic: bool = False) -> None:
        self.status_patches.append((pod.key, copy.deepcopy(patch)))
        if strategic:
            self.strategic.append(pod.key)
        for c in patch["status"].get("conditions") or ():
            if c["type"] == "PodScheduled":
                self.conditions[pod.key] = c

    async def delete_pod(self, pod: PodInfo) -> bool:
        await asyncio.sleep(0)
        if pod.key in self.undeletable:
            raise RuntimeError(f"403: {pod.key} may not be deleted")
        if pod.key in self.deleted:
            return True
        self.deleted.append(pod.key)
        if self.on_delete is not None:
            self.on_delete(pod.key)
        return False

    async def create_event(self, namespace: str, event: dict[str, Any]) -> None:
        self.event_objects.append(copy.deepcopy(event))

    async def patch_object_status(self, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> None:
        if self.status_failures:
            self.status_failures -= 1
            raise RuntimeError("409: the object was modified")
        book = {"PodGroup": self.group_statuses, "Placement": self.placement_statuses}[kind]
        book[f"{namespace}/{name}"] = copy.deepcopy(patch["status"])
        version = (patch.get("metadata") or {}).get("resourceVersion")
        if version is not None:
            self.pinned_versions[f"{namespace}/{name}"] = version

    async def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self.event_patches.append((namespace, name, copy.deepcopy(patch)))


class Harness:
    def __init__(self, config: dict[str, Any] | None = None, *, fail_rate: float = 0.0, seed: int = 0,
                 clock: Callable[[], float] = time.time, flush_interval: float = 1.0) -> None:
        rng = random.Random(seed)
        fail = (lambda pod, node: rng.random() < fail_rate) if fail_rate else None
        self.writer = RecordingWriter(fail)
        self.queue_clock = FakeClock()
        self.scheduler = Scheduler(parse_config(config or {}), self.writer, clock=clock,
                                   queue_clock=self.queue_clock, flush_interval=flush_interval)
        self.pods: dict[str, dict[str, Any]] = {}
        self.nodes: dict[str, dict[str, Any]] = {}
        # Pods the scheduler deleted (preemption): gone at once, or, with ``slow_termination``,
        # terminating (deletionTimestamp set) until :meth:`finish_terminating`.
        self.slow_termination = False
        self.terminating: list[str] = []
        self.writer.on_delete = self._deleted

    def _deleted(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None:
            return
        if not self.slow_termination:
            self.delete_pod(key)
            return
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        self.terminating.append(key)
        self.scheduler.pod_changed(key, copy.deepcopy(pod))

    def finish_terminating(self) -> None:
        """The terminating pods are gone."""
        for key in self.terminating:
            self.delete_pod(key)
        self.terminating.clear()

    def add_node(self, node: Any) -> None:
        obj = _obj(node)
        self.nodes[obj["metadata"]["name"]] = obj
        self.scheduler.node_changed(obj["metadata"]["name"], obj)

    def add_group(self, name: str, min_member: int, timeout: int = 300, namespace: str = "default") -> None:
        """A PodGroup: ``min_member`` pods labelled scheduling.corral.dev/pod-group: NAME bind together."""
        self.scheduler.group_changed(f"{namespace}/{name}", {
            "apiVersion": "scheduling.corral.dev/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": min_member, "scheduleTimeoutSeconds": timeout}})

    def add_budget(self, name: str, namespace: str = "default", *, allowed: int, **match: str) -> None:
        """A PodDisruptionBudget selecting pods labelled ``match`` that allows ``allowed`` disruptions now."""
        self.scheduler.budget_changed(f"{namespace}/{name}", {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": match}}, "status": {"disruptionsAllowed": allowed}})

    def add_pod(self, pod: Any) -> str:
        obj = _obj(pod)
        key = f"{obj['metadata'].get('namespace', 'default')}/{obj['metadata']['name']}"
        self.pods[key] = obj
        self.scheduler.pod_changed(key, obj)
        return key

    def delete_pod(self, key: str) -> None:
        self.pods.pop(key, None)
        self.writer.bindings.pop(key, None)
        self.scheduler.pod_changed(key, None)

    async def run(self, max_rounds: int = 1000) -> None:
        """Schedule until no pod is active or backing off; backoff time passes on the fake clock."""
        s = self.scheduler
        s.events.start()
        for _ in range(max_rounds):
            while (qp := s.queue.pop_nowait()) is not None:
                await s.attempt(qp)
            while s._inflight:
                await asyncio.gather(*list(s._inflight), return_exceptions=True)
            for key, node in list(self.writer.bindings.items()):
                pod = self.pods.get(key)
                if pod is not None and not pod["spec"].get("nodeName"):
                    pod["spec"]["nodeName"] = node
                    pod["status"]["phase"] = "Scheduled"
                    s.pod_changed(key, copy.deepcopy(pod))
            counts = s.queue.counts()
            if counts["active"] == 0 and counts["backoff"] == 0:
                await s.events.drain()
                await s.extenders.close()  # their sessions open again when next used
                return
            self.queue_clock.advance(s.queue.settings.backoff_max)
            s.queue.flush_backoff()
        raise AssertionError(f"scheduler did not settle: {s.queue.counts()}")

    def placements(self) -> dict[str, str]:
        return dict(self.writer.bindings)

    def pending(self) -> list[str]:
        return sorted(k for k in self.pods if k not in self.writer.bindings)


def build_cache(nodes: list[Any], pods: list[Any] = (), namespaces: dict[str, dict[str, str]] | None = None):
    """A scheduler cache holding ``nodes`` and the bound ``pods``."""
    from corral.scheduler.cache.cache import Cache

    return Cache.from_objects([_obj(n) for n in nodes], [_obj(p) for p in pods],
                              [{"metadata": {"name": ns, "labels": labels}} for ns, labels in (namespaces or {}).items()])


def _plugin(name: str, cache: Any, args: dict[str, Any] | None, clock: Callable[[], float]):
    from corral.scheduler.framework.interface import Handle
    from corral.scheduler.plugins import REGISTRY

    return REGISTRY[name](Handle(cache, clock, dict(args or {})))


def filter_result(name: str, nodes: list[Any], pod: Any, pods: list[Any] = (), *,
                  args: dict[str, Any] | None = None, clock: Callable[[], float] = time.time):
    """One Filter plugin's own FilterResult over a small cluster (its mask and Reasons, with their
    ``unresolvable`` flags, or ALL_PASS), without PreFilter."""
    from corral.scheduler.framework.interface import CycleState

    cache = build_cache(nodes, pods, None)
    plugin = _plugin(name, cache, args, clock)
    return plugin.filter(CycleState(), PodInfo.from_object(_obj(pod)), cache.table.valid[: cache.table.size].copy())


def run_filter(name: str, nodes: list[Any], pod: Any, pods: list[Any] = (), *, args: dict[str, Any] | None = None,
               namespaces: dict[str, dict[str, str]] | None = None,
               clock: Callable[[], float] = time.time) -> dict[str, list[str]]:
    """One Filter plugin over a small cluster: node name → reasons it was rejected ([] = passes)."""

    from corral.scheduler.framework.interface import CycleState
    from corral.scheduler.framework.status import Code

    cache = build_cache(nodes, pods, namespaces)
    plugin = _plugin(name, cache, args, clock)
    info = PodInfo.from_object(_obj(pod))
    table = cache.table
    state = CycleState()
    if hasattr(plugin, "pre_filter"):
        status = plugin.pre_filter(state, info)
        if status.code is Code.SKIP:
            return {table.names[r]: [] for r in table.valid_rows()}
        if not status.ok:
            return {table.names[r]: list(status.reasons) for r in table.valid_rows()}
    result = plugin.filter(state, info, table.valid[: table.size].copy())
    out = {}
    for row in table.valid_rows():
        passed = True if result.passed is None else bool(result.passed[row])
        out[table.names[row]] = [] if passed else [r.message for r in result.reasons if r.rows[row]]
    return out


def run_score(name: str, nodes: list[Any], pod: Any, pods: list[Any] = (), *, args: dict[str, Any] | None = None,
              namespaces: dict[str, dict[str, str]] | None = None,
              clock: Callable[[], float] = time.time, raw: bool = False) -> dict[str, float]:
    """One Score plugin over every node: node name → score, or {} if skipped. Normalised, unless
    ``raw`` asks for what the Score extension point returned (NaN: a node the plugin left unscored)."""
    from corral.scheduler.framework.interface import CycleState
    from corral.scheduler.framework.status import Code

    cache = build_cache(nodes, pods, namespaces)
    plugin = _plugin(name, cache, args, clock)
    info = PodInfo.from_object(_obj(pod))
    table = cache.table
    rows = table.valid_rows()
    state = CycleState()
    if hasattr(plugin, "pre_score") and plugin.pre_score(state, info, rows).code is Code.SKIP:
        return {}
    scores = plugin.score(state, info, rows)
    if hasattr(plugin, "normalize") and not raw:
        scores = plugin.normalize(state, info, scores)
    return {table.names[r]: float(s) for r, s in zip(rows, scores)}
