"""What the queue-driven controllers share: the watch cache as their informer, a rate-limited work
queue of keys, and workers calling one idempotent ``sync(key)``.

A subclass says which changes concern it (:meth:`QueuedController.keys_for`: a store event → the
keys to look at again, e.g. a pod's change → its owner's key) and what to do for one key
(:meth:`QueuedController.sync`). A sync that raises is retried with backoff (5 ms doubling to 60 s),
so no error path leaves a key unattended; one that returns a delay is looked at again after it
(e.g. when a pod will have been ready for ``minReadySeconds``). Each sync first waits until the
cache holds every write the store acknowledged, so a controller sees the pods it created a moment
ago and never creates them twice. Started and stopped with the leader.

A key whose sync held the event loop long (a Placement or DaemonSet over thousands of nodes reads
every copy; the time its writes took does not count, :class:`corral.aio.OnLoop`) is held back
after it: the changes that come meanwhile (each copy's bind, each status) are gathered into one
sync ``HOLD_FACTOR`` times that later (at most ``HOLD_MAX`` seconds), so one large owner cannot
keep the server busy with back-to-back syncs while agents and other clients wait. Syncs under
``HOLD_MIN`` seconds are never held.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Iterable

from corral.aio import OnLoop, cancel_and_wait
from corral.api.resources import ResourceType
from corral.client.workqueue import ShutDown, WorkQueue
from corral.controllers.events import ObjectEvents
from corral.controllers.workloads.pods import controller_of
from corral.server import errors
from corral.server.rest import ResourceAPI, WriteOptions
from corral.store import Event, EventType

__all__ = ["QueuedController", "OwnedIndex", "OwnerRoute"]

MAX_RETRY_DELAY = 60.0
HOLD_FACTOR, HOLD_MAX, HOLD_MIN = 3.0, 1.0, 0.005  # a key that took t waits min(3t, 1 s) (t >= 5 ms)


class QueuedController:
    name = "controller"
    component = ""  # the source of the events it records (``self.events``), if it records any
    workers = 2

    def __init__(self, api: ResourceAPI) -> None:
        self.api = api
        self.queue: WorkQueue[str] = WorkQueue(max_delay=MAX_RETRY_DELAY)
        self._tasks: list[asyncio.Task] = []
        self._log = logging.getLogger(type(self).__module__)
        self.events = ObjectEvents(api, self.component or self.name)
        self.opts = WriteOptions(warn=False)  # the options of every write it makes
        self._hold_until: dict[str, float] = {}  # key → when its last long sync's hold ends (monotonic)
        self._held: set[str] = set()  # held keys already queued for when their hold ends

    # --- what a controller says ------------------------------------------------------------------------

    index: "OwnedIndex | None" = None  # set by a controller whose keys are owners of what it watches

    def keys_for(self, event: Event) -> Iterable[str]:
        """The keys a change concerns (called for every change in the cluster: keep it cheap);
        by default, the owners ``index`` routes it to."""
        if self.index is None:
            raise NotImplementedError
        return self.index.keys_for(event)

    def watched(self) -> tuple[ResourceType, ...] | None:
        """The resources whose changes :meth:`keys_for` reads (None: every resource's); the others'
        are not handed to it. By default, the two ``index`` routes by."""
        return None if self.index is None else (self.index.owners, self.index.owned)

    def routed_by_owner(self) -> dict[str, str]:
        """Of the resources :meth:`watched` names, those (store prefix → an owner kind) whose changes
        concern it only for the objects a controller of that kind controls, or did before the change;
        the others' are not handed to it. By default, what ``index`` routes: its owners' objects."""
        return {} if self.index is None else {self.index.owned.store_prefix: self.index.owners.kind}

    def initial_keys(self) -> Iterable[str]:
        """Every key to look at when starting (and after the cache was reloaded); by default, every
        owner ``index`` holds."""
        if self.index is None:
            raise NotImplementedError
        return self.index.load()

    async def sync(self, key: str) -> float | None:
        """Make the world match ``key``'s object; idempotent. Returns a delay to look again after, or None."""
        raise NotImplementedError

    def reset(self) -> None:
        """Forget any index built from events (the cache is about to be replayed into ``initial_keys``)."""
        if self.index is not None:
            self.index.reset()

    async def delete_if_unchanged(self, resource: ResourceType, obj: dict[str, Any]) -> bool:
        """Delete ``obj`` if it is still the object read (its uid); True if this call deleted it.
        Gone or replaced meanwhile is not an error: the change that did it queues its key again."""
        meta = obj["metadata"]
        try:
            await self.api.delete(resource, meta.get("namespace"), meta["name"], None, None, meta["uid"])
        except errors.ApiError as exc:
            if exc.code not in (404, 409):
                raise
            return False
        return True

    # --- running ---------------------------------------------------------------------------------------

    def start(self) -> None:
        cache = self.api.cache
        watched = self.watched()
        if watched is None:
            cache.on_event.append(self._on_event)
        else:
            routed = self.routed_by_owner()
            for resource in watched:
                prefix = resource.store_prefix
                if prefix in routed:
                    OwnerRoute.of(cache, prefix).hooks.setdefault(routed[prefix], []).append(self._on_event)
                else:
                    cache.on_prefix_event.setdefault(prefix, []).append(self._on_event)
        cache.on_reload.append(self._on_reload)
        self._on_reload()
        self.events.start()
        self._tasks = [asyncio.create_task(self._work(), name=f"{self.name}-{i}") for i in range(self.workers)]

    async def stop(self) -> None:
        cache = self.api.cache
        for hooks in (cache.on_event, *cache.on_prefix_event.values()):
            if self._on_event in hooks:
                hooks.remove(self._on_event)
            for route in [h for h in hooks if isinstance(h, OwnerRoute)]:
                route.remove(self._on_event)
        if self._on_reload in cache.on_reload:
            cache.on_reload.remove(self._on_reload)
        self.queue.shutdown()
        await cancel_and_wait(*self._tasks)
        self._tasks = []
        await self.events.stop()

    def _on_event(self, event: Event) -> None:
        try:
            for key in self.keys_for(event):
                self._add(key)
        except Exception:  # one odd object must not stop the cache from following the store
            self._log.exception("%s: could not route the change of %s", self.name, event.key)

    def _hold_left(self, key: str) -> float:
        """Seconds until ``key``'s hold after its last long sync ends (0 or less: not held)."""
        until = self._hold_until.get(key)
        return until - time.monotonic() if until is not None else 0.0

    def _add(self, key: str) -> None:
        wait = self._hold_left(key)
        if wait <= 0:
            self._hold_until.pop(key, None)
            self.queue.add(key)
        elif key not in self._held:
            self._held.add(key)
            self.queue.add_after(key, wait)

    def _on_reload(self) -> None:
        self.reset()
        for key in self.initial_keys():
            self.queue.add(key)

    async def _work(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            self._held.discard(key)
            wait = self._hold_left(key)
            if wait > 0:  # changed again during its long sync: gathered until its hold ends
                self._held.add(key)
                self.queue.add_after(key, wait)
                self.queue.done(key)
                continue
            try:
                await self.api.cache.wait_fresh()
                timed = OnLoop(self.sync(key))  # made here: stopped while waiting above, none is left unawaited
                again = await timed
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = self.queue.add_rate_limited(key)
                # A write that lost a race (409) is expected now and then: tried again, quietly.
                conflict = isinstance(exc, errors.ApiError) and exc.code == 409
                level = logging.WARNING if self.queue.num_requeues(key) > (20 if conflict else 3) else logging.DEBUG
                self._log.log(level, "%s: sync of %s failed (%s); again in %.2fs", self.name, key, exc, delay,
                              exc_info=level == logging.WARNING)
            else:
                self.queue.forget(key)
                if again is not None:
                    self.queue.add_after(key, again)
                if timed.busy >= HOLD_MIN:
                    self._hold_until[key] = time.monotonic() + min(HOLD_FACTOR * timed.busy, HOLD_MAX)
                else:
                    self._hold_until.pop(key, None)
            finally:
                self.queue.done(key)


class OwnedIndex:
    """The objects of one resource each owner of one kind controls (its controller ownerReference),
    kept up to date from the watch cache's events, so a sync reads its owner's objects without
    scanning them all: what the Job, CronJob and DaemonSet controllers route changes by."""

    def __init__(self, cache, owners: ResourceType, owned: ResourceType) -> None:
        self._cache = cache
        self.owners, self.owned = owners, owned
        self._of: dict[str, set[str]] = {}  # owner uid → keys of what it controls
        self._owner: dict[str, str] = {}  # owned key → its owner's uid
        self._by_uid: dict[str, str] = {}  # owner uid → its key

    def reset(self) -> None:
        self._of.clear(), self._owner.clear(), self._by_uid.clear()

    def load(self) -> list[str]:
        """Index everything in the cache; every owner's key."""
        for record in self._cache.items(self.owners.store_prefix):
            self._by_uid[record.obj["metadata"]["uid"]] = record.key
        for record in self._cache.items(self.owned.store_prefix):
            self._index(record.key, record.obj)
        return list(self._by_uid.values())

    def keys_of(self, owner: dict[str, Any]) -> list[str]:
        return sorted(self._of.get(owner["metadata"]["uid"], ()))

    def objects_of(self, owner: dict[str, Any]) -> list[dict[str, Any]]:
        """What ``owner`` controls now, as the cache holds it."""
        return [r.obj for r in map(self._cache.get, self.keys_of(owner)) if r is not None]

    def _index(self, key: str, obj: dict[str, Any] | None) -> str:
        old = self._owner.pop(key, "")
        if old:
            keys = self._of.get(old)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._of[old]
        ref = controller_of(obj) if obj is not None else None
        if ref is None or ref.get("kind") != self.owners.kind:
            return old
        self._owner[key] = ref["uid"]
        self._of.setdefault(ref["uid"], set()).add(key)
        return ref["uid"]

    def keys_for(self, event: Event) -> set[str]:
        """The owners' keys a change concerns: an owner's own, or the owner (before and after) of
        an object it controls."""
        key = event.key
        if key.startswith(self.owners.store_prefix):
            uid = event.record.obj["metadata"]["uid"]
            if event.type is EventType.DELETED:
                self._by_uid.pop(uid, None)
            else:
                self._by_uid[uid] = key
            return {key}
        if not key.startswith(self.owned.store_prefix):
            return set()
        before = self._owner.get(key, "")
        after = self._index(key, None if event.type is EventType.DELETED else event.record.obj)
        return {self._by_uid[uid] for uid in (before, after) if uid in self._by_uid}

    def owner_keys(self) -> list[str]:
        return list(self._by_uid.values())


class OwnerRoute:
    """The one watch-cache hook of a resource (pods) for the controllers that care only about what
    their kind controls: each change is handed to the controllers of the kind whose controller
    ownerReference the object has, and to those of the kind it had before the change (released,
    deleted). A bare pod's change reaches none of the Job, DaemonSet, Placement and Deployment
    controllers, where each of them, as a hook of its own, spent ~1 µs on each of every pod's changes."""

    def __init__(self, cache, prefix: str) -> None:
        self._cache, self.prefix = cache, prefix
        self.hooks: dict[str, list] = {}  # owner kind → the controllers' hooks
        self._kind: dict[str, str] = {}  # key → the kind controlling it (the objects some kind does)
        self.reload()

    @classmethod
    def of(cls, cache, prefix: str) -> "OwnerRoute":
        """The cache's route for ``prefix``, made and hooked in when there is none yet."""
        hooks = cache.on_prefix_event.setdefault(prefix, [])
        route = next((h for h in hooks if isinstance(h, OwnerRoute)), None)
        if route is None:
            route = cls(cache, prefix)
            hooks.append(route)
            cache.on_reload.append(route.reload)
        return route

    def remove(self, hook) -> None:
        for hooks in self.hooks.values():
            if hook in hooks:
                hooks.remove(hook)
        if not any(self.hooks.values()):  # the last one gone: the route too
            if self in self._cache.on_prefix_event.get(self.prefix, ()):
                self._cache.on_prefix_event[self.prefix].remove(self)
            if self.reload in self._cache.on_reload:
                self._cache.on_reload.remove(self.reload)

    @staticmethod
    def _kind_of(obj: dict[str, Any] | None) -> str | None:
        ref = controller_of(obj) if obj is not None else None
        kind = ref.get("kind") if ref is not None else None
        return kind if isinstance(kind, str) else None

    def reload(self) -> None:
        self._kind = {r.key: kind for r in self._cache.items(self.prefix) if (kind := self._kind_of(r.obj))}

    def __call__(self, event: Event) -> None:
        key = event.key
        before = self._kind.get(key)
        after = None if event.type is EventType.DELETED else self._kind_of(event.record.obj)
        if before is not None:
            for hook in self.hooks.get(before, ()):
                hook(event)
        if after == before:
            return
        for hook in self.hooks.get(after, ()) if after is not None else ():
            hook(event)
        if after is None:
            del self._kind[key]
        else:
            self._kind[key] = after
