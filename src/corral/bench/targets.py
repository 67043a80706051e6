"""Where a benchmark runs: in this process, or against a running server over HTTP.

Both answer the same questions for the runner: create nodes, namespaces and pods; delete pods; tell
when a pod was bound (``on_bound``) or deleted (``on_deleted``, with its priority); report scheduling attempt latencies, the server's peak memory,
and the final placement of every pod.
"""

from __future__ import annotations

import asyncio
import re
import resource
import tempfile
import time
from typing import TYPE_CHECKING, Any, Callable

from corral.bench import CREATORS
from corral.store.base import EventType

if TYPE_CHECKING:
    from corral.pki.kubeconfig import Credentials

__all__ = ["InProcessTarget", "HttpTarget", "PodPlacement"]

PodPlacement = tuple[str, str, str | None, dict[str, str], dict[str, Any]]  # ns, name, node, labels, spec


def _placement(pod: dict[str, Any]) -> PodPlacement:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    return (meta.get("namespace", "default"), meta.get("name", ""), spec.get("nodeName"),
            meta.get("labels") or {}, spec)


def _scheduled_buckets(metrics: str) -> dict[float, float]:
    """The cumulative buckets of the scheduler's attempts that scheduled a pod, from Prometheus text."""
    out: dict[float, float] = {}
    for m in re.finditer(r'^corral_scheduler_scheduling_attempt_duration_seconds_bucket\{le="([^"]+)",result="scheduled"\} (\S+)$',
                         metrics, re.M):
        out[float(m.group(1))] = float(m.group(2))
    return out


_CPU_METRICS = {"server": "process_cpu_seconds_total", "scheduler": "scheduler_process_cpu_seconds_total"}


def _cpu_from_metrics(metrics: str, which: set[str]) -> dict[str, float]:
    """The CPU seconds of the processes in ``which`` ("server", "scheduler") that Prometheus text
    ``metrics`` reports (a process it does not report, e.g. off Linux, is left out)."""
    out = {}
    for name in which:
        m = re.search(rf"^{_CPU_METRICS[name]} (\S+)$", metrics, re.M)
        if m:
            out[name] = float(m.group(1))
    return out


class InProcessTarget:
    """Server, store and scheduler in this process; pods are created through the REST layer, with
    no HTTP hop, as scheduler_perf drives kube-scheduler with an in-process API server."""

    mode = "in-process"

    def __init__(self, on_bound: Callable[[str, str, float], None], *, store_url: str = "",
                 scheduler_process: bool = False) -> None:
        self.on_bound = on_bound
        self.on_deleted: Callable[[str, int], None] = lambda key, priority: None
        self.store_url = store_url  # default: SQLite in a temporary directory
        self.scheduler_process = scheduler_process  # the scheduler in a child process (its attempts in its metrics)
        if store_url.startswith("etcd://"):
            self.mode = "in-process, etcd"
        if scheduler_process:
            self.mode += ", scheduler process"
        self._tmp = tempfile.TemporaryDirectory(prefix="corral-bench-")
        self.server = None
        self.attempts: list[float] = []

    async def start(self) -> None:
        from corral.server.app import Server, ServerConfig
        from corral.server.rest import WriteOptions

        # One server, so no leader election: the scheduler starts at once.
        self.server = Server(ServerConfig(data_dir=self._tmp.name, store_url=self.store_url, address="127.0.0.1:0",
                                          user_kubeconfig=False, scheduler_process=self.scheduler_process,
                                          controllers=False, leader_elect=False))
        await self.server.start()
        self._opts = WriteOptions(warn=False)
        if self.scheduler_process:  # its attempts are counted in the child, read from its metrics
            self._hist_before = await self._histogram()
        else:
            self.server.scheduler.attempt_observer = lambda seconds, result: self.attempts.append(seconds)
        self.server.cache.on_event.append(self._on_event)

    def _on_event(self, event) -> None:
        """Every change in the store passes here, in the scheduler's thread: the pods' only are read."""
        key = event.record.key
        if not key.startswith("/core/pods/"):
            return
        kind = event.type
        if kind is EventType.DELETED:
            self.on_deleted(key[len("/core/pods/"):], int((event.record.obj.get("spec") or {}).get("priority") or 0))
        elif kind is EventType.MODIFIED:
            obj = event.record.obj
            node = (obj.get("spec") or {}).get("nodeName")
            if node and (obj.get("status") or {}).get("phase") == "Scheduled":
                self.on_bound(key[len("/core/pods/"):], node, time.perf_counter())

    async def create(self, kind: str, obj: dict[str, Any], namespace: str | None = None) -> None:
        from corral.api.resources import by_kind

        await self.server.api.create(by_kind(kind), namespace, obj, self._opts)

    async def delete_pod(self, namespace: str, name: str) -> None:
        from corral.api.resources import by_kind
        from corral.server.errors import ApiError

        try:
            await self.server.api.delete(by_kind("Pod"), namespace, name, 0, None, None)
        except ApiError:
            pass

    def attempt_latencies(self) -> list[float] | None:
        """Each attempt's seconds (None: a scheduler process counts them, see attempt_histogram)."""
        return None if self.scheduler_process else self.attempts

    async def _histogram(self) -> dict[float, float]:
        return _scheduled_buckets((await self.server.scheduler.metrics_text()).decode())

    async def attempt_histogram(self) -> dict[float, float]:
        """Attempts per latency bucket during the run (from the scheduler process's metrics)."""
        after = await self._histogram()
        return {le: after[le] - self._hist_before.get(le, 0.0) for le in after}

    async def cpu_seconds(self) -> dict[str, float]:
        """CPU time so far: ``server`` (this process: the server, and the benchmark's creators with
        it), and ``scheduler`` for a scheduler process (from its metrics)."""
        cpu = {"server": time.process_time()}
        if self.scheduler_process:
            cpu.update(_cpu_from_metrics((await self.server.scheduler.metrics_text()).decode(), {"scheduler"}))
        return cpu

    def peak_rss(self) -> int:
        """This process's peak; with a scheduler process, the child's peak too (their sum)."""
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        pid = self.server.scheduler.pid if self.scheduler_process and self.server.scheduler is not None else None
        if pid is not None:
            with open(f"/proc/{pid}/status", encoding="ascii") as f:
                peak += next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
        return peak

    async def placements(self) -> list[PodPlacement]:
        return [_placement(r.obj) for r in self.server.cache.items("/core/pods/")]

    async def nodes(self) -> list[dict[str, Any]]:
        return [r.obj for r in self.server.cache.items("/core/nodes/")]

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
        self._tmp.cleanup()


class HttpTarget:
    """A running server (its scheduler in-process or separate), driven through its HTTP API."""

    mode = "http"

    def __init__(self, credentials: Credentials, on_bound: Callable[[str, str, float], None], *,
                 connections: int = CREATORS) -> None:
        from corral.client.rest import Client

        self.url = credentials.server
        self.on_bound = on_bound
        self.on_deleted: Callable[[str, int], None] = lambda key, priority: None
        # one connection per creator (the run's --creators), so none waits for another's
        self.client = Client(credentials=credentials, user_agent="corral-bench", connections=connections)
        self._tasks: list[asyncio.Task] = []
        self._peak_rss = 0
        self._hist_before: dict[float, float] = {}

    async def start(self) -> None:
        rv = (await self.client.list("pods", None, limit=1)).resource_version
        self._hist_before = await self._histogram()
        ready = asyncio.Event()
        self._tasks = [asyncio.create_task(self._watch(rv, ready)), asyncio.create_task(self._sample_rss())]
        await asyncio.wait_for(ready.wait(), 10)

    async def _watch(self, rv: str, ready: asyncio.Event) -> None:
        from corral.client.rest import Gone

        while True:
            try:
                stream = self.client.watch("pods", None, resource_version=rv, raw=True)
                ready.set()
                async for ev in stream:
                    rv = ev.resource_version or rv
                    obj = ev.object
                    if ev.type == "DELETED":
                        meta = obj["metadata"]
                        self.on_deleted(f"{meta['namespace']}/{meta['name']}",
                                        int((obj.get("spec") or {}).get("priority") or 0))
                    elif ev.type == "MODIFIED" and (obj.get("spec") or {}).get("nodeName") and \
                            (obj.get("status") or {}).get("phase") == "Scheduled":
                        meta = obj["metadata"]
                        self.on_bound(f"{meta['namespace']}/{meta['name']}", obj["spec"]["nodeName"], time.perf_counter())
            except Gone:
                rv = (await self.client.list("pods", None, limit=1)).resource_version

    async def _metrics(self) -> str:
        return (await self.client.request("GET", "/metrics")).decode()

    async def _sample_rss(self) -> None:
        while True:
            m = re.search(r"^process_resident_memory_bytes (\S+)$", await self._metrics(), re.M)
            if m:
                self._peak_rss = max(self._peak_rss, int(float(m.group(1))))
            await asyncio.sleep(1.0)

    async def _histogram(self) -> dict[float, float]:
        return _scheduled_buckets(await self._metrics())

    async def create(self, kind: str, obj: dict[str, Any], namespace: str | None = None) -> None:
        await self.client.create(obj, namespace)

    async def delete_pod(self, namespace: str, name: str) -> None:
        from corral.client.rest import NotFound

        try:
            await self.client.delete("pods", name, namespace, grace_period_seconds=0)
        except NotFound:
            pass

    async def attempt_histogram(self) -> dict[float, float]:
        """Attempts per latency bucket during the run (from the server's /metrics)."""
        after = await self._histogram()
        return {le: after[le] - self._hist_before.get(le, 0.0) for le in after}

    async def cpu_seconds(self) -> dict[str, float]:
        """CPU time so far: ``benchmark`` (this process, the client), and from the server's metrics
        ``server`` and ``scheduler`` (its scheduler process, when it has one)."""
        return {"benchmark": time.process_time(), **_cpu_from_metrics(await self._metrics(), {"server", "scheduler"})}

    def peak_rss(self) -> int:
        return self._peak_rss

    async def placements(self) -> list[PodPlacement]:
        return [_placement(p) for p in (await self.client.list("pods", None, raw=True)).items]

    async def nodes(self) -> list[dict[str, Any]]:
        return (await self.client.list("nodes", raw=True)).items

    async def stop(self) -> None:
        from corral.aio import cancel_and_wait

        await cancel_and_wait(*self._tasks)
        await self.client.close()
