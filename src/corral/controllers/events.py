"""Events about the objects a controller acts on (``kubectl describe`` shows them), written in the
background so a controller never waits for one: ``SuccessfulCreate``, ``ScalingReplicaSet``, ...

Correlated as Kubernetes' event recorder correlates them (client-go's ``EventCorrelator``), so that a
controller acting on one object thousands of times does not write thousands of events:

- the same event again (source, object, type, reason and message) raises the first one's ``count``
  and ``lastTimestamp`` instead of adding another;
- past ``AGGREGATE_AFTER`` different messages of one reason about one object within
  ``AGGREGATE_WINDOW`` seconds, the rest are counted in one event, ``(combined from similar events):``
  and the newest message;
- each source may write ``SPAM_BURST`` events about one object at once, then one every
  ``SPAM_REFILL`` seconds; the rest are not written (``suppressed``). The newest of each kind left
  unwritten is written once the budget allows, looked at every ``settle_interval`` seconds
  (Kubernetes' recorder drops it, and a combined event's count stays at its last write): after a
  burst, its count is exact within about five and a half minutes.

A ReplicaSet scaled to 5,000 replicas leaves nine ``Created pod`` events and one combined, not 5,000.

Best effort, as Kubernetes' recorder: a bounded queue, written one at a time through the server's
REST layer. Past it, events are dropped, counted and logged as a warning at most once a minute; the
server's ``/metrics`` shows both figures by controller (``corral_controller_events_waiting``,
``corral_controller_events_dropped_total``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Any, Callable

import msgspec

from corral.aio import Backlog, cancel_and_wait
from corral.api.defaults import now_rfc3339
from corral.api.resources import by_kind
from corral.controllers.tokens import TokenBucket
from corral.server import errors
from corral.server.rest import ResourceAPI, WriteOptions

__all__ = ["ObjectEvents", "EventCorrelator"]

log = logging.getLogger(__name__)

AGGREGATE_AFTER, AGGREGATE_WINDOW = 10, 600.0  # client-go's defaultAggregateMaxEvents, ...IntervalInSeconds
SPAM_BURST, SPAM_REFILL = 25, 300.0  # client-go's defaultSpamBurst, and 1 / defaultSpamQPS
REMEMBERED = 4096  # entries each of the correlator's tables keeps, the least recently used dropped first
COMBINED = "(combined from similar events): "


class Series:
    """One event as stored: its name once written, how often it happened, and since when."""

    __slots__ = ("name", "count", "first")

    def __init__(self, first: str) -> None:
        self.name: str | None = None
        self.count = 0
        self.first = first


class EventCorrelator:
    """Which events to write, and as what: a new event, or a repeat counted on an existing one (a
    :class:`Series` whose ``count`` is above 1), or nothing (``None``: over its object's budget)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._similar: OrderedDict[tuple, tuple[float, set[str]]] = OrderedDict()  # messages of one reason
        self._series: OrderedDict[tuple, Series] = OrderedDict()
        self._budget: OrderedDict[tuple, TokenBucket] = OrderedDict()  # per source
        self._owed: OrderedDict[tuple, tuple[tuple, dict[str, Any], Series]] = OrderedDict()  # newest unwritten
        self.suppressed = 0

    def correlate(self, event: dict[str, Any]) -> Series | None:
        """Fill in ``event``'s message, count and first time as it is to be written, and return its
        series; ``None`` if it is not to be written."""
        now = self._clock()
        about = event["involvedObject"]
        source = (event["source"]["component"], about["kind"], about.get("namespace"), about["name"],
                  about.get("uid"), about.get("apiVersion"))
        similar = source + (event["type"], event["reason"])
        key = similar + (event["message"],)
        seen_at, messages = self._similar.get(similar) or (now, set())
        if now - seen_at > AGGREGATE_WINDOW:
            messages = set()
        messages.add(event["message"])
        if len(messages) >= AGGREGATE_AFTER:
            messages.pop()  # kept below the threshold: every later new message is combined as well
            event["message"] = COMBINED + event["message"]
            key = similar
        _remember(self._similar, similar, (now, messages))
        series = self._series.get(key) or Series(event["firstTimestamp"])
        series.count += 1
        _remember(self._series, key, series)
        event["count"], event["firstTimestamp"] = series.count, series.first
        if not self._spend(source, now):
            self.suppressed += 1
            _remember(self._owed, key, (source, event, series))
            return None
        self._owed.pop(key, None)
        return series

    def due(self) -> list[tuple[dict[str, Any], Series]]:
        """The newest unwritten event of each kind whose object's budget allows a write now (spent)."""
        now, out = self._clock(), []
        for key, (source, event, series) in list(self._owed.items()):
            if self._spend(source, now):
                del self._owed[key]
                out.append((event, series))
        return out

    def _spend(self, source: tuple, now: float) -> bool:
        budget = self._budget.get(source) or TokenBucket(SPAM_REFILL, float(SPAM_BURST), now)
        _remember(self._budget, source, budget)
        return budget.take(now)


def _remember(table: OrderedDict, key: tuple, value: Any) -> None:
    table[key] = value
    table.move_to_end(key)
    if len(table) > REMEMBERED:
        table.popitem(last=False)


class _Named(msgspec.Struct):
    metadata: dict[str, Any]


class ObjectEvents:
    def __init__(self, api: ResourceAPI, component: str, *, max_pending: int = 10_000, warn_interval: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, settle_interval: float = 30.0) -> None:
        self.api, self.component = api, component
        self._queue = Backlog(max_pending, log, who=f"{component}: ", warn_interval=warn_interval, clock=clock,
                              counted_in="; corral_controller_events_dropped_total counts them")
        self.correlator = EventCorrelator(clock)
        self._tasks: list[asyncio.Task] = []
        self._settle_interval = settle_interval  # how often unwritten events are looked at again
        self._events = by_kind("Event")
        self._opts = WriteOptions(warn=False)

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._run(), name=f"{self.component}-events"),
                       asyncio.create_task(self._settle(), name=f"{self.component}-events-owed")]

    async def stop(self) -> None:
        await cancel_and_wait(*self._tasks)
        self._tasks = []

    def record(self, obj: dict[str, Any], etype: str, reason: str, message: str) -> None:
        """Queue an event about ``obj`` (an API object as a dict); never blocks."""
        meta = obj["metadata"]
        now = now_rfc3339()
        event = {"metadata": {"generateName": f"{meta['name']}.", "namespace": meta.get("namespace") or "default"},
                 "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": meta["name"],
                                    "namespace": meta.get("namespace"), "uid": meta.get("uid")},
                 "reason": reason, "message": message, "type": etype, "count": 1, "firstTimestamp": now,
                 "lastTimestamp": now, "source": {"component": self.component}, "reportingComponent": self.component}
        series = self.correlator.correlate(event)
        if series is not None:
            self._queue.offer((event, series))

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
            event, series = await self._queue.get()
            try:
                await self._write(event, series)
            except errors.ApiError as exc:  # best effort: a namespace being deleted, a full store
                log.debug("event %s not written: %s", event["reason"], exc.message)
            finally:
                self._queue.task_done()

    async def _settle(self) -> None:
        while True:
            await asyncio.sleep(self._settle_interval)
            for owed in self.correlator.due():
                self._queue.offer(owed)

    async def _write(self, event: dict[str, Any], series: Series) -> None:
        """A repeat updates its series' event; a new one, or a repeat of one that is gone (expired,
        deleted, never written), is created."""
        namespace = event["metadata"]["namespace"]
        if event["count"] > 1 and series.name is not None:
            try:
                await self.api.patch(self._events, namespace, series.name,
                                     {"count": event["count"], "message": event["message"],
                                      "lastTimestamp": event["lastTimestamp"]}, "merge", self._opts)
                return
            except errors.ApiError as exc:
                if exc.code != 404:
                    raise
        reply = await self.api.create(self._events, namespace, event, self._opts)
        series.name = msgspec.json.decode(reply.body, type=_Named).metadata["name"]
