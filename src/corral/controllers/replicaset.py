"""The ReplicaSet controller: keeps ``spec.replicas`` pods of a template running.

For each ReplicaSet (a key in its work queue, queued when it or one of its pods changes):

1. **Ownership.** The pods it controls are those whose controller ownerReference names it. A pod
   without a controller whose labels the selector matches is adopted (the reference added); a
   controlled pod the selector no longer matches is released (the reference removed), as
   Kubernetes' controller does. Both are compare-and-swap writes: a pod changed meanwhile is left
   to the next sync.
2. **Count.** Active pods (not finished, not being deleted) against ``spec.replicas``: missing ones
   are created from the template in slow-start batches (1, 2, 4, … at most 500 a sync, a failed
   create stops the rest of the sync), surplus ones deleted in Kubernetes' order
   (:func:`~corral.controllers.pods.deletion_order`: unplaced first, not ready first, newest first).
3. **Status.** ``replicas``, ``fullyLabeledReplicas``, ``readyReplicas``, ``availableReplicas``
   (ready for ``minReadySeconds``) and ``observedGeneration``, written when they changed; with pods
   about to become available, the ReplicaSet is looked at again when they are.

A ReplicaSet being deleted creates and deletes nothing (the garbage collector takes its pods).
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any, Iterable

import msgspec

from corral.api.resources import by_kind
from corral.api.selectors import LabelSelector, SelectorError, label_selector_from_struct
from corral.controllers.pods import (controller_of, deletion_order, is_active, is_available, is_ready,
                                     owner_reference, pod_from_template, ready_since)
from corral.controllers.queued import QueuedController
from corral.server import errors
from corral.server.rest import ResourceAPI, WriteOptions
from corral.store import Event, EventType

__all__ = ["ReplicaSetController", "MAX_BURST"]

MAX_BURST = 500  # pods created or deleted by one sync, as Kubernetes' burstReplicas

Obj = dict[str, Any]


class ReplicaSetController(QueuedController):
    name = "replicaset"

    def __init__(self, api: ResourceAPI, *, clock=time.time) -> None:
        super().__init__(api)
        self.clock = clock
        self._rs, self._pods = by_kind("ReplicaSet"), by_kind("Pod")
        self._opts = WriteOptions(warn=False)
        # Indexes kept from the cache's events: pods by the ReplicaSet that controls them (its uid),
        # pods controlled by none (for adoption), and each ReplicaSet's uid and selector.
        self._controlled: dict[str, set[str]] = {}
        self._orphans: dict[str, set[str]] = {}  # namespace → pod keys
        self._pod_owner: dict[str, str] = {}  # pod key → controlling ReplicaSet uid, or "" for an orphan
        self._selectors: dict[str, tuple[str, LabelSelector | None]] = {}  # rs key → (uid, selector)
        self._rs_by_uid: dict[str, str] = {}

    # --- indexes ---------------------------------------------------------------------------------------

    def reset(self) -> None:
        self._controlled.clear(), self._orphans.clear(), self._pod_owner.clear()
        self._selectors.clear(), self._rs_by_uid.clear()

    def initial_keys(self) -> Iterable[str]:
        for record in self.api.cache.items(self._rs.store_prefix):
            self._index_rs(record.key, record.obj)
        for record in self.api.cache.items(self._pods.store_prefix):
            self._index_pod(record.key, record.obj)
        return list(self._selectors)

    def _index_rs(self, key: str, rs: Obj | None) -> None:
        old = self._selectors.pop(key, None)
        if old is not None:
            self._rs_by_uid.pop(old[0], None)
        if rs is None:
            return
        uid = rs["metadata"]["uid"]
        try:
            selector = label_selector_from_struct((rs.get("spec") or {}).get("selector"))
        except SelectorError:
            selector = None
        self._selectors[key] = (uid, selector if selector is not None and not selector.empty else None)
        self._rs_by_uid[uid] = key

    def _index_pod(self, key: str, pod: Obj | None) -> None:
        old = self._pod_owner.pop(key, None)
        if old is not None:
            group = self._controlled.get(old) if old else self._orphans.get(key.split("/")[3])
            if group is not None:
                group.discard(key)
        if pod is None:
            return
        ref = controller_of(pod)
        owner = ref.get("uid", "") if ref is not None else ""
        if ref is not None and ref.get("kind") != "ReplicaSet":
            return  # another kind's pod: never adopted, never counted
        self._pod_owner[key] = owner
        if owner:
            self._controlled.setdefault(owner, set()).add(key)
        else:
            self._orphans.setdefault(pod["metadata"]["namespace"], set()).add(key)

    def keys_for(self, event: Event) -> Iterable[str]:
        key = event.key
        if key.startswith(self._rs.store_prefix):
            self._index_rs(key, None if event.type is EventType.DELETED else event.record.obj)
            return (key,)
        if not key.startswith(self._pods.store_prefix):
            return ()
        before = self._pod_owner.get(key)
        pod = None if event.type is EventType.DELETED else event.record.obj
        self._index_pod(key, pod)
        after = self._pod_owner.get(key)
        keys = {self._rs_by_uid[uid] for uid in (before, after) if uid and uid in self._rs_by_uid}
        if pod is not None and after == "":
            labels = pod["metadata"].get("labels") or {}
            ns_prefix = f"{self._rs.store_prefix}{pod['metadata']['namespace']}/"
            keys.update(k for k, (_, sel) in self._selectors.items()
                        if sel is not None and k.startswith(ns_prefix) and sel.matches(labels))
        return keys

    # --- one ReplicaSet --------------------------------------------------------------------------------

    async def sync(self, key: str) -> float | None:
        record = self.api.cache.get(key)
        if record is None:
            return None
        rs = record.obj
        meta, spec = rs["metadata"], rs.get("spec") or {}
        entry = self._selectors.get(key)
        selector = entry[1] if entry is not None else None
        pods = [r.obj for r in map(self.api.cache.get, sorted(self._controlled.get(meta["uid"], ()))) if r is not None]
        if selector is not None and not meta.get("deletionTimestamp"):
            pods = await self._claim(rs, selector, pods)
        active = [p for p in pods if is_active(p)]
        if not meta.get("deletionTimestamp"):
            await self._scale(rs, active, int(spec.get("replicas", 1)))
            await self.api.cache.wait_fresh()
            active = [r.obj for r in map(self.api.cache.get, sorted(self._controlled.get(meta["uid"], ())))
                      if r is not None and is_active(r.obj)]
        return await self._write_status(rs, active)

    async def _claim(self, rs: Obj, selector: LabelSelector, pods: list[Obj]) -> list[Obj]:
        """Release the controlled pods the selector no longer matches; adopt the matching orphans."""
        kept = []
        for pod in pods:
            if selector.matches(pod["metadata"].get("labels")):
                kept.append(pod)
            elif not pod["metadata"].get("deletionTimestamp"):
                refs = [r for r in pod["metadata"].get("ownerReferences") or () if r.get("uid") != rs["metadata"]["uid"]]
                await self._patch_pod(pod, {"metadata": {"ownerReferences": refs or None,
                                                         "resourceVersion": pod["metadata"]["resourceVersion"]}})
        namespace = rs["metadata"]["namespace"]
        for key in sorted(self._orphans.get(namespace, ())):
            record = self.api.cache.get(key)
            if record is None:
                continue
            pod = record.obj
            if pod["metadata"].get("deletionTimestamp") or not selector.matches(pod["metadata"].get("labels")):
                continue
            refs = [*(pod["metadata"].get("ownerReferences") or ()), owner_reference(rs)]
            adopted = await self._patch_pod(pod, {"metadata": {"ownerReferences": refs,
                                                               "resourceVersion": pod["metadata"]["resourceVersion"]}})
            if adopted is not None:
                kept.append(adopted)
        return kept

    async def _patch_pod(self, pod: Obj, patch: Obj) -> Obj | None:
        meta = pod["metadata"]
        try:
            reply = await self.api.patch(self._pods, meta["namespace"], meta["name"], patch, "merge", self._opts)
        except errors.ApiError as exc:  # changed or gone meanwhile: the change brings this key back
            self._log.debug("pod %s/%s not claimed: %s", meta["namespace"], meta["name"], exc.message)
            return None
        return msgspec.json.decode(reply.body)

    async def _scale(self, rs: Obj, active: list[Obj], replicas: int) -> None:
        diff = replicas - len(active)
        if diff > 0:
            await self._create(rs, min(diff, MAX_BURST))
        elif diff < 0:
            doomed = sorted(active, key=deletion_order)[:min(-diff, MAX_BURST)]
            await asyncio.gather(*(self._delete(p) for p in doomed))

    async def _create(self, rs: Obj, count: int) -> None:
        """``count`` pods, in batches that double while creates succeed (a quota or a bad template
        fails one pod, not hundreds)."""
        template = (rs.get("spec") or {}).get("template") or {}
        batch, made = 1, 0
        while made < count:
            size = min(batch, count - made)
            results = await asyncio.gather(
                *(self.api.create(self._pods, rs["metadata"]["namespace"], pod_from_template(rs, template), self._opts)
                  for _ in range(size)), return_exceptions=True)
            failures = [r for r in results if isinstance(r, BaseException)]
            made += size
            if failures:
                raise failures[0]
            batch *= 2

    async def _delete(self, pod: Obj) -> None:
        meta = pod["metadata"]
        try:
            await self.api.delete(self._pods, meta["namespace"], meta["name"], None, None, meta["uid"])
        except errors.ApiError as exc:
            if exc.code != 404:
                raise

    async def _write_status(self, rs: Obj, active: list[Obj]) -> float | None:
        spec, meta = rs.get("spec") or {}, rs["metadata"]
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = self.clock()
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        ready = [p for p in active if is_ready(p)]
        available = [p for p in ready if is_available(p, min_ready, now)]
        status = {
            "replicas": len(active),
            "fullyLabeledReplicas": sum(1 for p in active
                                        if template_labels.items() <= (p["metadata"].get("labels") or {}).items()),
            "readyReplicas": len(ready),
            "availableReplicas": len(available),
            "observedGeneration": int(meta.get("generation") or 1),
        }
        if (rs.get("status") or {}) != status:
            try:
                await self.api.update(self._rs, meta["namespace"], meta["name"], {**rs, "status": status},
                                      self._opts, subresource="status")
            except errors.ApiError as exc:
                if exc.code not in (404, 409):
                    raise
                return None  # changed or gone: that change queues the key again
        waiting = [min_ready - (now - ready_since(p)) for p in ready if p not in available]
        return max(0.0, math.ceil(min(waiting) * 10) / 10) if waiting else None
