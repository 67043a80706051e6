"""The garbage collector: what an owner's deletion means for the objects it owns.

An object lists its owners in ``metadata.ownerReferences`` (kind, name, uid). Deleting an owner:

- **Background** (the default): the owner goes at once; each dependent whose owners are all gone
  is then deleted here. A dependent with some owners left only loses the references to the gone ones.
- **Orphan** (``propagationPolicy=Orphan``, ``kubectl delete --cascade=orphan``): the API server
  keeps the owner with the ``orphan`` finalizer; here every dependent loses its reference to it,
  then the finalizer is removed and the owner goes. Its pods keep running, owned by nobody.
- **Foreground** (``--cascade=foreground``): the owner stays, with the ``foregroundDeletion``
  finalizer, while its dependents are deleted here; once none is left the finalizer is removed.

An owner is judged gone when no object of its kind and name exists in the dependent's namespace
(or cluster-wide for a cluster-scoped kind) with its uid; a reference to a kind corral does not
serve is left alone. The work queue holds store keys of dependents and of owners being deleted.
"""

from __future__ import annotations

from typing import Any, Iterable

from corral.api.resources import (FOREGROUND_FINALIZER, ORPHAN_FINALIZER, RESOURCES, ResourceType, UnknownResource,
                                  by_kind)
from corral.controllers.queued import QueuedController
from corral.server import errors
from corral.server.rest import ResourceAPI
from corral.server.watch.cache import resource_prefix
from corral.store import Event, EventType

__all__ = ["GarbageCollector"]

_OURS = (ORPHAN_FINALIZER, FOREGROUND_FINALIZER)

Obj = dict[str, Any]


class GarbageCollector(QueuedController):
    name = "garbage-collector"

    def __init__(self, api: ResourceAPI) -> None:
        super().__init__(api)
        self._by_prefix: dict[str, ResourceType] = {r.store_prefix: r for r in RESOURCES}
        self._dependents: dict[str, set[str]] = {}  # owner uid → keys of the objects that name it
        self._owners_of: dict[str, tuple[str, ...]] = {}  # dependent key → the owner uids it names
        self._finalizing: dict[str, str] = {}  # uid → key of an owner held by our finalizer

    # --- indexes ---------------------------------------------------------------------------------------

    def reset(self) -> None:
        self._dependents.clear(), self._owners_of.clear(), self._finalizing.clear()

    def initial_keys(self) -> Iterable[str]:
        keys = []
        for prefix in self._by_prefix:
            for record in self.api.cache.items(prefix):
                if self._index(record.key, record.obj):
                    keys.append(record.key)
        return keys

    def _index(self, key: str, obj: Obj | None) -> bool:
        """Record ``key``'s owners; True if it is a dependent or an owner being deleted by us."""
        for uid in self._owners_of.pop(key, ()):
            group = self._dependents.get(uid)
            if group is not None:
                group.discard(key)
                if not group:
                    del self._dependents[uid]
        if obj is None:
            return False
        meta = obj.get("metadata") or {}
        uids = tuple(ref.get("uid", "") for ref in meta.get("ownerReferences") or ())
        if uids:
            self._owners_of[key] = uids
            for uid in uids:
                self._dependents.setdefault(uid, set()).add(key)
        finalizing = bool(meta.get("deletionTimestamp")) and any(f in _OURS for f in meta.get("finalizers") or ())
        if finalizing:
            self._finalizing[meta["uid"]] = key
        else:
            self._finalizing.pop(meta.get("uid"), None)
        return bool(uids) or finalizing

    def keys_for(self, event: Event) -> Iterable[str]:
        key = event.key
        before = self._owners_of.get(key, ())
        if event.type is EventType.DELETED:
            uid = (event.record.obj.get("metadata") or {}).get("uid")
            self._index(key, None)
            self._finalizing.pop(uid, None)
            # Its dependents (gone owner), and the owner it was holding up (one dependent fewer).
            return [*self._dependents.get(uid, ()), *(self._finalizing[u] for u in before if u in self._finalizing)]
        meta = event.record.obj.get("metadata") or {}
        if not (before or meta.get("ownerReferences") or meta.get("deletionTimestamp")) and \
                meta.get("uid") not in self._finalizing:
            return ()  # owned by nothing, owning nothing being deleted: most changes end here
        concerned = self._index(key, event.record.obj)
        after = self._owners_of.get(key, ())
        keys = [self._finalizing[u] for u in {*before, *after} if u in self._finalizing and before != after]
        if concerned and (event.type is EventType.ADDED or after != before or meta.get("deletionTimestamp")):
            keys.append(key)
        return keys

    # --- one object ------------------------------------------------------------------------------------

    def _resource(self, key: str) -> ResourceType | None:
        return self._by_prefix.get(resource_prefix(key))

    async def sync(self, key: str) -> float | None:
        record = self.api.cache.get(key)
        resource = self._resource(key)
        if record is None or resource is None:
            return None
        obj = record.obj
        meta = obj["metadata"]
        if meta.get("deletionTimestamp") and any(f in _OURS for f in meta.get("finalizers") or ()):
            await self._finish_owner(resource, obj)
        refs = meta.get("ownerReferences") or ()
        if refs and not meta.get("deletionTimestamp"):
            await self._check_owners(resource, obj, refs)
        return None

    def _owner(self, ref: Obj, namespace: str | None) -> tuple[bool, Obj | None]:
        """(known, owner): ``known`` False for a kind corral does not serve (never judged gone)."""
        try:
            resource = by_kind(ref.get("kind") or "")
        except UnknownResource:
            return False, None
        owner = self.api.cache.get(resource.key(namespace, ref.get("name") or ""))  # cluster-scoped: by name alone
        if owner is None or owner.obj["metadata"].get("uid") != ref.get("uid"):
            return True, None
        return True, owner.obj

    async def _check_owners(self, resource: ResourceType, obj: Obj, refs) -> None:
        meta = obj["metadata"]
        namespace = meta.get("namespace")
        kept, dangling, released, doomed = [], [], [], False
        for ref in refs:
            known, owner = self._owner(ref, namespace)
            if known and owner is None:
                dangling.append(ref)
                continue
            owner_meta = (owner or {}).get("metadata") or {}
            finalizers = owner_meta.get("finalizers") or ()
            if owner_meta.get("deletionTimestamp") and ORPHAN_FINALIZER in finalizers:
                released.append(ref)  # orphaned: this reference goes, the object stays
                continue
            kept.append(ref)
            if owner_meta.get("deletionTimestamp") and FOREGROUND_FINALIZER in finalizers:
                doomed = True
        if doomed or (dangling and not kept and not released):
            await self.delete_if_unchanged(resource, obj)
            return
        if dangling or released:
            patch = {"metadata": {"ownerReferences": kept or None, "resourceVersion": meta["resourceVersion"]}}
            await self._patch(resource, obj, patch)

    async def _finish_owner(self, resource: ResourceType, owner: Obj) -> None:
        """An owner being deleted with one of our finalizers: remove it once its dependents are dealt with."""
        meta = owner["metadata"]
        waiting = [k for k in self._dependents.get(meta["uid"], ()) if self.api.cache.get(k) is not None]
        if waiting:
            for key in waiting:
                self.queue.add(key)  # they act on the owner's finalizer; their changes queue the owner again
            return
        finalizers = [f for f in meta.get("finalizers") or () if f not in _OURS]
        await self._patch(resource, owner, {"metadata": {"finalizers": finalizers or None,
                                                         "resourceVersion": meta["resourceVersion"]}})

    async def _patch(self, resource: ResourceType, obj: Obj, patch: Obj) -> None:
        meta = obj["metadata"]
        try:
            await self.api.patch(resource, meta.get("namespace"), meta["name"], patch, "merge", self.opts)
        except errors.ApiError as exc:
            if exc.code not in (404, 409):
                raise
