"""The watch cache: one store watch, held in memory, fanned out to every client watch and list.

The cache lists the whole store once, then follows one ``store.watch("/")``. It keeps
- the current objects by resource and key (their JSON bytes, ready to send, and the decoded dict for
  selector matching), and
- a window of recent events, so a client watch from a recent resourceVersion resumes without
  touching the store; older than the window answers 410 Gone, as Kubernetes does. The window holds
  at most ``window`` events and, in the versions they superseded, at most the larger of
  ``history_bytes`` and the live objects' size: a stream of large updates (300 of 1.4 MB to one
  object) otherwise kept every version, 1.35 MiB of memory each, and the store as many. Trimmed for
  bytes, it calls ``on_trim(revision)``, and the server compacts the store to the same revision.

Reads are consistent. A client's read first waits until the cache has caught up with the store's
current revision (:meth:`WatchCache.wait_consistent`): on SQLite that is what this process has
acknowledged, on etcd one round trip asks for it, so a read through any server replica sees every
write acknowledged before it, by whichever replica. Writes do not wait: a write from a stale view
fails its compare-and-swap, waits for the newer revision (:meth:`WatchCache.wait_fresh`) and is
retried.

Everything here runs on the event loop thread; methods that register a watcher do so without an
``await`` between reading history and subscribing, which is what makes a watch gap-free.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import msgspec

from corral.aio import cancel_and_wait
from corral.api.selectors import FieldSelector, LabelSelector
from corral.memory import release_free_memory
from corral.store.base import Compacted, Event, EventType, Record, Store

__all__ = ["WatchCache", "CacheWatcher", "TooOld", "editable"]

log = logging.getLogger(__name__)

# A watcher this far behind is closed; its client re-watches from the last revision it saw.
MAX_PENDING_LINES = 50_000
_ADDED = b'{"type":"ADDED","object":'
RELEASE_AFTER_WATCHES = 256  # this many watches gone (and half of the most open): memory given back
HISTORY_BYTES = 64 * 2**20  # superseded versions kept for watches, when the live objects take less


class TooOld(Exception):
    """The requested revision is older than the cache's event window."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested, self.oldest = requested, oldest


def resource_prefix(key: str) -> str:
    """``/core/pods/ns/name`` → ``/core/pods/``."""
    end = key.index("/", key.index("/", 1) + 1)
    return key[: end + 1]


class _CachedEvent(msgspec.Struct, gc=False):
    """One change in the window; untracked by the cyclic collector, as its records are."""

    revision: int
    prefix: str
    new: Record | None  # None for DELETED
    old: Record | None  # None for ADDED
    _lines: dict[str, bytes] = msgspec.field(default_factory=dict)

    @property
    def last(self) -> Record:
        return self.new if self.new is not None else self.old  # type: ignore[return-value]

    def line(self, etype: str, record: Record) -> bytes:
        cached = self._lines.get(etype)
        if cached is None:
            cached = self._lines[etype] = (
                b'{"type":"' + etype.encode() + b'","object":' + record.value + b"}\n"
            )
        return cached


@dataclass(slots=True, eq=False)
class CacheWatcher:
    """One client watch: a filter and a queue of encoded event lines."""

    prefix: str  # resource prefix, or resource prefix + namespace + "/"
    name: str | None
    labels: LabelSelector
    fields: FieldSelector
    lines: list[bytes] = field(default_factory=list)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    last_revision: int = 0
    # The objects a watch from "now" starts with, newest key first (sent before ``lines``, last
    # first): the cache's own records, encoded as they are sent, so that a thousand watches do not
    # each hold a copy of the list.
    backlog: list[Record] = field(default_factory=list)

    def pending(self) -> bool:
        return bool(self.lines or self.backlog)

    def matches(self, record: Record | None) -> bool:
        if record is None or not record.key.startswith(self.prefix):
            return False
        if self.name is not None and record.key.rsplit("/", 1)[-1] != self.name:
            return False
        if not self.labels.empty and not self.labels.matches_object(record.obj):
            return False
        return self.fields.empty or self.fields.matches(record.obj)

    def offer(self, event: _CachedEvent) -> None:
        if self.closed:
            return
        new_ok = self.matches(event.new)
        old_ok = self.matches(event.old)
        if new_ok and old_ok:
            self.lines.append(event.line("MODIFIED", event.new))  # type: ignore[arg-type]
        elif new_ok:
            self.lines.append(event.line("ADDED", event.new))  # type: ignore[arg-type]
        elif old_ok:
            # Left the selection (or was deleted): the client sees it go.
            self.lines.append(event.line("DELETED", event.new or event.old))  # type: ignore[arg-type]
        else:
            return
        self.last_revision = event.revision
        if len(self.lines) > MAX_PENDING_LINES:
            # A consumer this far behind is let go, with nothing kept for it: its client starts
            # again from the last resourceVersion it read, as client-go does when a watch ends.
            self.lines = []
            self.backlog = []
            self.close()
        self.wakeup.set()

    def close(self) -> None:
        self.closed = True
        self.wakeup.set()

    def take(self, max_bytes: int | None = None) -> list[bytes]:
        """The next lines to send, the initial objects first: all of them, or about ``max_bytes``
        (at least one line), so a watch holds one chunk of encoded text at a time."""
        out: list[bytes] = []
        size = 0
        backlog = self.backlog
        while backlog and (max_bytes is None or size < max_bytes):
            line = _ADDED + backlog.pop().value + b"}\n"
            out.append(line)
            size += len(line)
        if self.lines and (max_bytes is None or size < max_bytes):
            if max_bytes is None:
                out += self.lines
                self.lines = []
            else:
                n = 0
                while n < len(self.lines) and size < max_bytes:
                    size += len(self.lines[n])
                    n += 1
                out += self.lines[:n]
                del self.lines[:n]
        self.wakeup.clear()  # the watch loop asks pending() before it waits
        return out


def editable(cached: dict[str, Any]) -> dict[str, Any]:
    """A copy of a cached object whose top level and metadata, spec and status dicts may be edited.
    Values below them are shared with the cache: a change replaces them, never mutates them."""
    return {**cached, "metadata": dict(cached.get("metadata") or {}), "spec": dict(cached.get("spec") or {}),
            "status": dict(cached.get("status") or {})}


def _last_state(old: Record | None, deleted: Record) -> Record:
    """What a DELETED event carries: the object's last state, at the deletion's revision."""
    obj = dict(old.obj) if old is not None else {}
    obj["metadata"] = {**(obj.get("metadata") or {}), "resourceVersion": str(deleted.revision)}
    return Record(deleted.key, deleted.revision, msgspec.json.encode(obj), obj)


class WatchCache:
    def __init__(self, store: Store, *, window: int = 50_000, history_bytes: int = HISTORY_BYTES) -> None:
        self._store = store
        self._window = window
        self.history_bytes = history_bytes
        self._objects: dict[str, dict[str, Record]] = {}
        self._events: list[_CachedEvent] = []
        self._event_revs: list[int] = []
        # Bytes of the versions the events superseded, cumulative (one per event) from _bytes_base.
        self._event_bytes: list[int] = []
        self._bytes_base = 0
        self.live_bytes = 0  # the current objects' encoded size
        self.on_trim: list[Callable[[int], None]] = []  # history trimmed for bytes up to this revision
        self._oldest = 0  # watches from revisions >= this can be served
        self._watchers: dict[str, set[CacheWatcher]] = {}
        self._most_watchers = 0  # the most open at once since memory was last given back
        self._waiters: list[tuple[int, asyncio.Future]] = []
        self._task: asyncio.Task | None = None
        self.revision = 0
        self.ready = asyncio.Event()
        self.on_event: list[Callable[[Event], None]] = []  # every change, in order
        # The changes of one resource (its store prefix) only, after the hooks above: a follower that
        # reads a few resources is not called for every Event and Lease the cluster writes.
        self.on_prefix_event: dict[str, list[Callable[[Event], None]]] = {}
        self.on_reload: list[Callable[[], None]] = []  # the whole contents replaced (after compaction)

    # --- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        await self._load()
        self._task = asyncio.create_task(self._follow(), name="watch-cache")

    async def _load(self) -> None:
        listing = await self._store.list("/")
        self._objects = {}
        for record in listing.items:
            self._objects.setdefault(resource_prefix(record.key), {})[record.key] = record
        self.live_bytes = sum(len(record.value) for record in listing.items)
        self.revision = self._oldest = listing.revision
        self._events, self._event_revs, self._event_bytes, self._bytes_base = [], [], [], 0
        for hook in self.on_reload:
            hook()
        self.ready.set()

    async def _follow(self) -> None:
        while True:
            try:
                async for batch in self._store.watch("/", self.revision, progress=True, last_states=False):
                    self._apply(batch)
            except Compacted:
                log.warning("watch cache fell behind compaction; reloading")
                for watchers in self._watchers.values():
                    for w in watchers:
                        w.close()
                await self._load()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep serving; watch again from the last revision applied
                log.warning("watch cache lost its store watch (%s); resuming from revision %d", exc, self.revision)
                await asyncio.sleep(0.2)
            else:
                return  # the store closed

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        for watchers in self._watchers.values():
            for w in watchers:
                w.close()

    # --- following the store ---------------------------------------------------------------------------

    def _apply(self, batch: list[Event]) -> None:
        for event in batch:
            record = event.record
            if event.type is EventType.PROGRESS:
                continue
            prefix = resource_prefix(record.key)
            objects = self._objects.setdefault(prefix, {})
            old = objects.get(record.key)
            superseded = len(old.value) if old is not None else 0
            if event.type is EventType.DELETED:
                objects.pop(record.key, None)
                if not record.value:  # the store left the last state to us (last_states=False)
                    record = event.record = _last_state(old, record)
                cached = _CachedEvent(record.revision, prefix, None, record)
                superseded = len(record.value)
            else:
                objects[record.key] = record
                cached = _CachedEvent(record.revision, prefix, record, old)
                self.live_bytes += len(record.value)
            self.live_bytes -= superseded
            self._events.append(cached)
            self._event_revs.append(record.revision)
            self._event_bytes.append((self._event_bytes[-1] if self._event_bytes else self._bytes_base) + superseded)
            for w in self._watchers.get(prefix, ()):
                w.offer(cached)
            # Its encoded lines were shared by the watchers just fed; kept for the window they
            # would double its memory (measured in the soak: ~1.2 KB an event, 100,000 events), so
            # a watcher replaying history encodes them again.
            cached._lines = {}
            for hook in self.on_event:
                hook(event)
            for hook in self.on_prefix_event.get(prefix, ()):
                hook(event)
            if old is not None:
                # Superseded: only the event window still holds it. Keep its bytes, let its decoded
                # dict go (decoded again only if a watcher replaying history needs it).
                old._obj = None
            if event.type is EventType.DELETED:
                record._obj = None  # the same for the last state of what was deleted
        self.revision = batch[-1].revision
        if len(self._events) > 2 * self._window:
            self._cut(len(self._events) - self._window)
        if self._event_bytes:
            limit = max(self.history_bytes, self.live_bytes)
            if self._event_bytes[-1] - self._bytes_base > limit:
                # Keep half the limit (not trimming again at the next event): the events after the
                # first whose cumulative count reaches (total - limit / 2).
                cut = bisect.bisect_left(self._event_bytes, self._event_bytes[-1] - limit // 2) + 1
                self._cut(cut)
                for hook in self.on_trim:
                    hook(self._oldest)
        if self._waiters:
            ready = [w for w in self._waiters if w[0] <= self.revision]
            self._waiters = [w for w in self._waiters if w[0] > self.revision]
            for _, fut in ready:
                if not fut.done():
                    fut.set_result(None)

    def _cut(self, cut: int) -> None:
        """Drop the first ``cut`` events from the window."""
        self._oldest = max(self._oldest, self._event_revs[cut - 1])
        self._bytes_base = self._event_bytes[cut - 1]
        del self._events[:cut], self._event_revs[:cut], self._event_bytes[:cut]

    def history_size(self) -> int:
        """Bytes of the versions the window's events superseded (held only for watches)."""
        return self._event_bytes[-1] - self._bytes_base if self._event_bytes else 0

    def forget_before(self, revision: int) -> None:
        """Drop events at or before ``revision`` (after a store compaction)."""
        cut = bisect.bisect_right(self._event_revs, revision)
        if cut:
            self._cut(cut)
        self._oldest = max(self._oldest, revision)

    async def wait_fresh(self, revision: int | None = None, timeout: float = 10.0) -> None:
        """Return once the cache has seen ``revision`` (default: all the store acknowledged)."""
        target = self._store.revision if revision is None else revision
        if self.revision >= target:
            return
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._waiters.append((target, fut))
        # A timer on the future itself: cheaper than asyncio.wait_for, and this is on every write.
        timer = loop.call_later(timeout, lambda: fut.done() or fut.set_exception(asyncio.TimeoutError()))
        try:
            await fut
        finally:
            timer.cancel()

    async def wait_consistent(self, timeout: float = 10.0) -> None:
        """Return once the cache holds every write the store acknowledged before this call, from any
        process sharing the store."""
        target = await self._store.current_revision()
        await self.wait_fresh(target, timeout)

    # --- reads -------------------------------------------------------------------------------------------

    def get(self, key: str) -> Record | None:
        objects = self._objects.get(resource_prefix(key))
        return objects.get(key) if objects else None

    def items(self, resource_prefix_: str, key_prefix: str | None = None) -> Iterator[Record]:
        """Current objects of one resource, optionally under a namespace key prefix, unsorted."""
        objects = self._objects.get(resource_prefix_, {})
        if key_prefix is None or key_prefix == resource_prefix_:
            return iter(list(objects.values()))
        return (r for r in list(objects.values()) if r.key.startswith(key_prefix))

    def count(self, resource_prefix_: str) -> int:
        return len(self._objects.get(resource_prefix_, {}))

    # --- watches -----------------------------------------------------------------------------------------

    def watch(self, resource_prefix_: str, watcher: CacheWatcher, from_revision: int | None) -> None:
        """Register ``watcher``. ``None``: current objects as ADDED, then changes. Else: changes after."""
        if from_revision is None:
            watcher.backlog = sorted((r for r in self.items(resource_prefix_, watcher.prefix) if watcher.matches(r)),
                                     key=lambda r: r.key, reverse=True)
            watcher.last_revision = self.revision
        else:
            if from_revision < self._oldest:
                raise TooOld(from_revision, self._oldest)
            start = bisect.bisect_right(self._event_revs, from_revision)
            for event in self._events[start:]:
                if event.prefix == resource_prefix_:
                    watcher.offer(event)
            watcher.last_revision = max(watcher.last_revision, from_revision)
        if watcher.pending():
            watcher.wakeup.set()
        self._watchers.setdefault(resource_prefix_, set()).add(watcher)
        self._most_watchers = max(self._most_watchers, self.watcher_count())

    def unwatch(self, resource_prefix_: str, watcher: CacheWatcher) -> None:
        self._watchers.get(resource_prefix_, set()).discard(watcher)
        count = self.watcher_count()
        if self._most_watchers - count >= RELEASE_AFTER_WATCHES and count <= self._most_watchers // 2:
            # Most of a crowd of watches has gone: give their memory back (see corral.memory).
            self._most_watchers = count
            asyncio.get_running_loop().call_soon(release_free_memory)

    def watcher_count(self) -> int:
        return sum(len(ws) for ws in self._watchers.values())

    def event_count(self) -> int:
        """Changes kept for watches from a past revision (the window; trimmed by compaction)."""
        return len(self._events)
