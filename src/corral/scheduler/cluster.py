"""The scheduler's writes to the cluster: bindings, pod conditions, events, and the status of the
PodGroups and Placements it decides for.

Two implementations of one small interface: :class:`InProcessWriter` when the scheduler runs inside
``corral server`` (it calls the server's REST layer directly; the store group-commits concurrent
bindings into one transaction), and :class:`HttpWriter` when it runs as ``corral scheduler``
(through the API's binding subresource). Bind answers a :class:`Status`: success, an error worth a
retry, or "unresolvable" when the pod is gone or already bound elsewhere.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
from typing import Any, Protocol

from corral.aio import Backlog, cancel_and_wait
from corral.api.defaults import apply_create_defaults, now_rfc3339
from corral.scheduler.framework.podinfo import PodInfo
from corral.scheduler.framework.status import SUCCESS, Code, Status

__all__ = ["ClusterWriter", "InProcessWriter", "HttpWriter", "EventRecorder", "COMPONENT"]

log = logging.getLogger(__name__)
COMPONENT = "default-scheduler"
MAX_PENDING_EVENTS = 100_000  # events waiting to be written (~20 MB at most): a burst's pods all get theirs
_GONE = "the pod was deleted or bound elsewhere"


class ClusterWriter(Protocol):
    async def bind(self, pod: PodInfo, node: str) -> Status: ...

    async def patch_status(self, pod: PodInfo, patch: dict[str, Any], *, strategic: bool = False) -> None:
        """Merge ``patch`` into the pod's status (``strategic``: lists such as conditions merge by
        their key instead of being replaced)."""

    async def delete_pod(self, pod: PodInfo) -> bool:
        """Delete gracefully (the pod's own grace period), only the pod with ``pod.uid``; True if it
        was already gone. Other failures raise."""

    async def create_event(self, namespace: str, event: dict[str, Any]) -> int:
        """Create ``event``; if an event of its name exists already (its earlier occurrences, which the
        recorder no longer remembers), add this occurrence to it instead (its ``count`` raised by one,
        this ``lastTimestamp``). The count the stored event now holds."""

    async def patch_object_status(self, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """Merge ``patch`` into the status of an object the scheduler reports on (a PodGroup, a Placement)."""

    async def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> None: ...


async def _create_or_count(writer: Any, namespace: str, event: dict[str, Any]) -> int:
    """:meth:`ClusterWriter.create_event` for a writer with ``_create_new`` (False: the name exists),
    ``_stored_count`` (None: no such event) and ``patch_event``."""
    name = event["metadata"]["name"]
    for _ in range(2):  # (an event that expired between the create and the read: created again)
        if await writer._create_new(namespace, event):
            return 1
        count = await writer._stored_count(namespace, name)
        if count is not None:
            await writer.patch_event(namespace, name, {"count": count + 1,
                                                       "lastTimestamp": event.get("lastTimestamp")})
            return count + 1
    return 1


class InProcessWriter:
    """``fence``: the leader's :class:`~corral.server.control.leader.Fence` in a multi-server deployment; each
    binding is then written only while this server's Lease is still current."""

    def __init__(self, api: Any, fence: Any = None) -> None:
        from corral.api.resources import by_kind
        from corral.server.errors import ApiError
        from corral.server.control.leader import NotLeader
        from corral.server.rest import WriteOptions
        from corral.store import Fenced, KeyExists, StoreError

        self.api = api
        self.fence = fence
        self._opts = WriteOptions(warn=False)
        self._pods, self._events = by_kind("Pod"), by_kind("Event")
        # What a binding may fail with, looked up here once rather than imported at every binding.
        self._errors = (ApiError, NotLeader, Fenced, StoreError)
        self._exists = KeyExists

    async def bind(self, pod: PodInfo, node: str) -> Status:
        try:
            if self.fence is None:
                await self.api.assign_node(pod.namespace, pod.name, node)
            else:
                async with self.fence.hold() as lease:
                    await self.api.assign_node(pod.namespace, pod.name, node, fence=lease)
        except self._errors as exc:
            return self._failed(exc)
        return SUCCESS

    async def bind_many(self, binds: list[tuple[Any, str]]) -> list[Status]:
        """:meth:`bind` for each ``(pod, node)``, written together (:func:`~corral.server.rest.binding.assign_nodes`)."""
        from corral.server.rest.binding import assign_nodes

        items = [(pod.namespace, pod.name, node) for pod, node in binds]
        try:
            if self.fence is None:
                outcomes = await assign_nodes(self.api, items)
            else:
                async with self.fence.hold() as lease:
                    outcomes = await assign_nodes(self.api, items, fence=lease)
        except self._errors as exc:
            return [self._failed(exc)] * len(binds)
        return [SUCCESS if outcome is None else self._failed(outcome) for outcome in outcomes]

    def _failed(self, exc: BaseException) -> Status:
        """What a binding that failed with ``exc`` answers."""
        ApiError, NotLeader, Fenced = self._errors[:3]  # noqa: N806 (classes, as imported)
        if isinstance(exc, ApiError):
            if exc.code in (404, 409):
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (_GONE,), "DefaultBinder")
            return Status.error(exc.message, "DefaultBinder")
        if isinstance(exc, (NotLeader, Fenced)):
            return Status.error(f"not bound: this server is no longer the leader ({exc})", "DefaultBinder")
        return Status.error(str(exc), "DefaultBinder")

    async def patch_status(self, pod: PodInfo, patch: dict[str, Any], *, strategic: bool = False) -> None:
        await self.api.patch(self._pods, pod.namespace, pod.name, patch, "strategic" if strategic else "merge",
                             self._opts, "status")

    async def delete_pod(self, pod: PodInfo) -> bool:
        from corral.server.errors import ApiError

        try:
            await self.api.delete(self._pods, pod.namespace, pod.name, None, None, pod.uid or None)
        except ApiError as exc:
            if exc.code in (404, 409):  # gone, or another pod under its name now
                return True
            raise
        return False

    async def create_event(self, namespace: str, event: dict[str, Any]) -> int:
        # An event the scheduler built itself: stored as is, without the API's validation of
        # what users send (it is one write per scheduled pod, on the hot path).
        apply_create_defaults(self._events, event, namespace)
        return await _create_or_count(self, namespace, event)

    async def _create_new(self, namespace: str, event: dict[str, Any]) -> bool:
        try:
            await self.api.store.create(self._events.key(namespace, event["metadata"]["name"]), event)
            return True
        except self._exists:
            return False

    async def _stored_count(self, namespace: str, name: str) -> int | None:
        key = self._events.key(namespace, name)
        stored = self.api.cache.get(key)
        if stored is None:  # written a moment ago through another server
            await self.api.cache.wait_consistent()
            stored = self.api.cache.get(key)
        return None if stored is None else int(stored.obj.get("count") or 1)

    async def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        await self.api.patch(self._events, namespace, name, patch, "merge", self._opts)

    async def patch_object_status(self, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> None:
        from corral.api.resources import by_kind

        await self.api.patch(by_kind(kind), namespace, name, patch, "merge", self._opts, "status")


class HttpWriter:
    def __init__(self, client: Any) -> None:
        self.client = client

    async def bind(self, pod: PodInfo, node: str) -> Status:
        from corral.client.rest import Conflict, ConnectionFailed, NotFound

        try:
            await self.client.bind(pod.namespace, pod.name, node)
        except (Conflict, NotFound):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (_GONE,), "DefaultBinder")
        except ConnectionFailed as exc:
            return Status.error(str(exc), "DefaultBinder")
        return SUCCESS

    async def patch_status(self, pod: PodInfo, patch: dict[str, Any], *, strategic: bool = False) -> None:
        await self.client.patch("pods", pod.name, patch, pod.namespace, subresource="status", raw=True,
                                patch_type="strategic" if strategic else "merge")

    async def delete_pod(self, pod: PodInfo) -> bool:
        from corral.client.rest import Conflict, NotFound

        try:
            await self.client.delete("pods", pod.name, pod.namespace, uid=pod.uid or None, raw=True)
        except (Conflict, NotFound):
            return True
        return False

    async def create_event(self, namespace: str, event: dict[str, Any]) -> int:
        return await _create_or_count(self, namespace, event)

    async def _create_new(self, namespace: str, event: dict[str, Any]) -> bool:
        from corral.client.rest import AlreadyExists

        try:
            await self.client.create(event, namespace, raw=True)
            return True
        except AlreadyExists:
            return False

    async def _stored_count(self, namespace: str, name: str) -> int | None:
        from corral.client.rest import NotFound

        try:
            return int((await self.client.get("events", name, namespace, raw=True)).get("count") or 1)
        except NotFound:
            return None

    async def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        await self.client.patch("events", name, patch, namespace, raw=True)

    async def patch_object_status(self, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> None:
        from corral.api.resources import by_kind

        await self.client.patch(by_kind(kind).plural, name, patch, namespace, subresource="status", raw=True)


class EventRecorder:
    """Writes events in the background, Kubernetes-style: a repeat of the same event (same object,
    reason and message) raises the first one's ``count`` instead of adding another, and is written
    at most once per ``repeat_interval`` (a pod retried every 30 s does not write every 30 s).

    Writes never block scheduling: up to ``writers`` are on their way at once (a store that batches
    writes sends them together), and the rest wait their turn. In a burst the scheduler binds pods
    faster than that, so their events trail the bindings and are written once it is over: binding
    SchedulingBasic/5000Nodes_50000Pods' 51,000 pods in-process, 7,584 Scheduled events were written
    meanwhile and ~43,000 waited (a queue of 10,000 lost 36,152 of them). A waiting event costs ~200
    bytes; past ``max_pending`` new ones are dropped, counted in ``dropped`` (the metric
    ``corral_scheduler_events_dropped_total``) and logged as a warning at most once per
    ``warn_interval`` seconds.

    The names of the last ``remember`` events seen are kept with their counts (Scheduled events,
    one a pod, would otherwise fill it without bound); one forgotten and seen again, such as a pending
    pod's FailedScheduling after a burst of other events, is created again, and the writer adds it to
    the stored event, whose count it goes on from."""

    def __init__(self, writer: ClusterWriter, *, max_pending: int = MAX_PENDING_EVENTS,
                 repeat_interval: float = 300.0, clock=None, component: str = COMPONENT, host: str = "",
                 writers: int = 16, warn_interval: float = 60.0, remember: int = 50_000) -> None:
        import time

        self.writer = writer
        self.component, self.host = component, host
        self._clock = clock or time.monotonic
        self._queue = Backlog(max_pending, log, counted_in="; corral_scheduler_events_dropped_total counts them",
                              warn_interval=warn_interval, clock=self._clock)
        # The events written, by name, least recently seen first: [count, when last written]. One
        # forgotten and seen again is created again, which finds it stored and counts on from there.
        self._seen: collections.OrderedDict[str, list] = collections.OrderedDict()
        self._remember = remember
        self._repeat_interval = repeat_interval  # a repeat is written at most this often per event
        self._writers = writers
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._run(), name="event-recorder") for _ in range(self._writers)]

    async def stop(self) -> None:
        await cancel_and_wait(*self._tasks)
        self._tasks = []

    def record(self, pod: Any, etype: str, reason: str, message: str) -> None:
        """Queue an event about ``pod`` (anything with ``namespace``, ``name`` and ``uid``)."""
        self._queue.offer((pod.namespace, pod.name, pod.uid, etype, reason, message))

    @property
    def dropped(self) -> int:
        """Events not written: recorded while the most were waiting to be."""
        return self._queue.dropped

    @property
    def waiting(self) -> int:
        """Events recorded and not yet written."""
        return self._queue.qsize()

    async def drain(self) -> None:
        """Wait until every recorded event has been written (or given up on)."""
        await self._queue.join()

    async def _run(self) -> None:
        while True:
            ns, name, uid, etype, reason, message = await self._queue.get()
            try:
                await self._write(ns, name, uid, etype, reason, message)
            finally:
                self._queue.task_done()

    async def _write(self, ns: str, name: str, uid: str, etype: str, reason: str, message: str) -> None:
        digest = hashlib.sha1(f"{uid}/{reason}/{message}".encode()).hexdigest()[:12]
        event_name = f"{name}.{digest}"
        now = now_rfc3339()
        try:
            seen = self._seen.get(event_name)
            if seen is None:
                # [count, when last written]; a repeat taken by another writer meanwhile only counts
                seen = self._seen[event_name] = [1, self._clock()]
                if len(self._seen) > self._remember:  # the longest unseen is forgotten
                    self._seen.popitem(last=False)
                try:
                    stored = await self.writer.create_event(ns, {
                        "apiVersion": "v1", "kind": "Event",
                        "metadata": {"name": event_name, "namespace": ns},
                        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": ns,
                                           "uid": uid},
                        "reason": reason, "message": message, "type": etype, "count": 1,
                        "firstTimestamp": now, "lastTimestamp": now,
                        "source": {"component": self.component, **({"host": self.host} if self.host else {})},
                        "reportingComponent": self.component,
                    })
                except Exception:
                    if self._seen.get(event_name) is seen:
                        del self._seen[event_name]  # not written: the next one creates it again
                    raise
                seen[0] += (stored or 1) - 1  # it existed (forgotten here): counted on from its count
            else:
                self._seen.move_to_end(event_name)
                seen[0] += 1
                if self._clock() - seen[1] >= self._repeat_interval:
                    seen[1] = self._clock()
                    await self.writer.patch_event(ns, event_name, {"count": seen[0], "lastTimestamp": now})
        except Exception as exc:  # events are best effort
            log.debug("event %s/%s not written: %s", ns, event_name, exc)
