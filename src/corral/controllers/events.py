"""Events about the objects a controller acts on (``kubectl describe`` shows them), written in the
background so a controller never waits for one: ``SuccessfulCreate``, ``ScalingReplicaSet``, ...

Best effort, as Kubernetes' recorder: a bounded queue, written one at a time through the server's
REST layer. Past it, events are dropped, counted and logged as a warning at most once a minute; the
server's ``/metrics`` shows both figures by controller (``corral_controller_events_waiting``,
``corral_controller_events_dropped_total``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from corral.aio import Backlog, cancel_and_wait
from corral.api.defaults import now_rfc3339
from corral.api.resources import by_kind
from corral.server import errors
from corral.server.rest import ResourceAPI, WriteOptions

__all__ = ["ObjectEvents"]

log = logging.getLogger(__name__)


class ObjectEvents:
    def __init__(self, api: ResourceAPI, component: str, *, max_pending: int = 10_000, warn_interval: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.api, self.component = api, component
        self._queue = Backlog(max_pending, log, who=f"{component}: ", warn_interval=warn_interval, clock=clock,
                              counted_in="; corral_controller_events_dropped_total counts them")
        self._task: asyncio.Task | None = None
        self._events = by_kind("Event")
        self._opts = WriteOptions(warn=False)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"{self.component}-events")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    def record(self, obj: dict[str, Any], etype: str, reason: str, message: str) -> None:
        """Queue an event about ``obj`` (an API object as a dict); never blocks."""
        meta = obj["metadata"]
        now = now_rfc3339()
        event = {"metadata": {"generateName": f"{meta['name']}.", "namespace": meta.get("namespace") or "default"},
                 "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": meta["name"],
                                    "namespace": meta.get("namespace"), "uid": meta.get("uid")},
                 "reason": reason, "message": message, "type": etype, "count": 1, "firstTimestamp": now,
                 "lastTimestamp": now, "source": {"component": self.component}, "reportingComponent": self.component}
        self._queue.offer(event)

    @property
    def waiting(self) -> int:
        """Events recorded and not yet written."""
        return self._queue.qsize()

    @property
    def dropped(self) -> int:
        """Events not written: recorded while the most were waiting to be."""
        return self._queue.dropped

    async def drain(self) -> None:
        """Wait until every recorded event has been written (or given up on)."""
        await self._queue.join()

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self.api.create(self._events, event["metadata"]["namespace"], event, self._opts)
            except errors.ApiError as exc:  # best effort: a namespace being deleted, a full store
                log.debug("event %s not written: %s", event["reason"], exc.message)
            finally:
                self._queue.task_done()
