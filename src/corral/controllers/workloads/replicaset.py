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
   (:func:`~corral.controllers.workloads.pods.deletion_order`: unplaced first, not ready first, newest first).
3. **Status.** ``replicas``, ``fullyLabeledReplicas``, ``readyReplicas``, ``availableReplicas``
   (ready for ``minReadySeconds``) and ``observedGeneration``, written when they changed; with pods
   about to become available, the ReplicaSet is looked at again when they are.

A sync costs the same for 3 pods or 10,000: each ReplicaSet's counts of active and ready pods, and
the pods its selector stopped matching, are kept up to date from each pod's change as the cache
applies it; the pods themselves are looked at only to choose which to delete, or when
``minReadySeconds`` or template labels beyond the selector's need them.

A ReplicaSet being deleted creates and deletes nothing (the garbage collector takes its pods).
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

import msgspec

from corral.api.resources import ResourceType, by_kind
from corral.api.selectors import LabelSelector, SelectorError, label_selector_from_struct
from corral.controllers.workloads.pods import (controller_of, deletion_order, is_active, is_available, is_ready,
                                     owner_reference, pod_from_template, ready_since)
from corral.controllers.batches import record_creates, slow_start
from corral.controllers.queued import QueuedController
from corral.server import errors
from corral.server.rest import ResourceAPI
from corral.store import Event, EventType

__all__ = ["ReplicaSetController", "MAX_BURST"]

MAX_BURST = 500  # pods created or deleted by one sync, as Kubernetes' burstReplicas

Obj = dict[str, Any]


@dataclass(slots=True)
class _Tally:
    """One ReplicaSet's pods, kept up to date from each pod's change (so a sync need not look at
    them all): the keys, how many are active and ready, and those the selector no longer matches."""

    pods: set[str] = field(default_factory=set)
    active: int = 0
    ready: int = 0
    unmatched: set[str] = field(default_factory=set)


_NO_PODS = _Tally()
_ORPHAN = ("", False, False)  # a pod no controller owns, as indexed (its state is read once it is adopted)


class ReplicaSetController(QueuedController):
    name = "replicaset"
    component = "replicaset-controller"  # the source of its events

    def __init__(self, api: ResourceAPI, *, clock=time.time) -> None:
        super().__init__(api)
        self.clock = clock
        self._rs, self._pods = by_kind("ReplicaSet"), by_kind("Pod")
        # Kept from the cache's events: each ReplicaSet's pods (by its uid), the pods no controller
        # owns (by namespace, for adoption), and each ReplicaSet's uid and selector.
        self._tallies: dict[str, _Tally] = {}
        self._orphans: dict[str, set[str]] = {}
        self._pod_state: dict[str, tuple[str, bool, bool]] = {}  # pod key → (owner uid or "", active, ready)
        self._selectors: dict[str, tuple[str, LabelSelector | None]] = {}  # rs key → (uid, selector)
        self._rs_by_uid: dict[str, str] = {}
        self._selector_of: dict[str, LabelSelector | None] = {}  # uid → selector

    # --- indexes ---------------------------------------------------------------------------------------

    def reset(self) -> None:
        self._tallies.clear(), self._orphans.clear(), self._pod_state.clear()
        self._selectors.clear(), self._rs_by_uid.clear(), self._selector_of.clear()

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
            self._selector_of.pop(old[0], None)
        if rs is None:
            return
        uid = rs["metadata"]["uid"]
        try:
            selector = label_selector_from_struct((rs.get("spec") or {}).get("selector"))
        except SelectorError:
            selector = None
        selector = selector if selector is not None and not selector.empty else None
        self._selectors[key] = (uid, selector)
        self._rs_by_uid[uid] = key
        self._selector_of[uid] = selector

    def _index_pod(self, key: str, pod: Obj | None) -> None:
        old = self._pod_state.pop(key, None)
        if old is not None:
            owner, active, ready = old
            if owner:
                tally = self._tallies[owner]
                tally.pods.discard(key), tally.unmatched.discard(key)
                tally.active -= active
                tally.ready -= ready
                if not tally.pods:
                    del self._tallies[owner]
            else:
                self._orphans.get(key.split("/")[3], set()).discard(key)
        if pod is None:
            return
        ref = controller_of(pod)
        if ref is not None and ref.get("kind") != "ReplicaSet":
            return  # another kind's pod: never adopted, never counted
        owner = ref.get("uid", "") if ref is not None else ""
        if not owner:  # counted once adopted, when it is indexed again
            self._pod_state[key] = _ORPHAN
            self._orphans.setdefault(pod["metadata"]["namespace"], set()).add(key)
            return
        active = is_active(pod)
        ready = active and is_ready(pod)
        self._pod_state[key] = (owner, active, ready)
        tally = self._tallies.setdefault(owner, _Tally())
        tally.pods.add(key)
        tally.active += active
        tally.ready += ready
        selector = self._selector_of.get(owner)
        if selector is not None and not selector.matches(pod["metadata"].get("labels")):
            tally.unmatched.add(key)

    def watched(self) -> tuple[ResourceType, ...]:
        return self._rs, self._pods

    def keys_for(self, event: Event) -> Iterable[str]:
        key = event.key
        if key.startswith(self._rs.store_prefix):
            self._index_rs(key, None if event.type is EventType.DELETED else event.record.obj)
            return (key,)
        if not key.startswith(self._pods.store_prefix):
            return ()
        before = self._pod_state.get(key, _ORPHAN)[0]
        pod = None if event.type is EventType.DELETED else event.record.obj
        self._index_pod(key, pod)
        state = self._pod_state.get(key)
        after = state[0] if state is not None else ""
        orphan = state is not None and not after
        if not (before or after or (orphan and self._selectors)):
            return ()  # not a ReplicaSet's, or none could adopt it (every pod while there are none)
        keys = {self._rs_by_uid[uid] for uid in (before, after) if uid and uid in self._rs_by_uid}
        if orphan:  # the ReplicaSets of its namespace whose selector matches may adopt it
            labels = pod["metadata"].get("labels") or {}  # type: ignore[index]
            ns_prefix = f"{self._rs.store_prefix}{pod['metadata']['namespace']}/"  # type: ignore[index]
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
        selector = self._selector_of.get(meta["uid"])
        if not meta.get("deletionTimestamp"):
            changed = await self._claim(rs, selector)
            changed = await self._scale(rs, spec["replicas"]) or changed
            if changed:
                await self.api.cache.wait_fresh()
        return await self._write_status(rs, selector)

    def _pods_of(self, uid: str) -> list[Obj]:
        return [r.obj for r in map(self.api.cache.get, self._tallies.get(uid, _NO_PODS).pods) if r is not None]

    async def _claim(self, rs: Obj, selector: LabelSelector | None) -> bool:
        """Release the controlled pods the selector no longer matches; adopt the matching orphans.
        True if it wrote anything."""
        uid, wrote = rs["metadata"]["uid"], False
        for key in sorted(self._tallies.get(uid, _NO_PODS).unmatched):
            record = self.api.cache.get(key)
            if record is None or record.obj["metadata"].get("deletionTimestamp"):
                continue
            pod = record.obj
            refs = [r for r in pod["metadata"].get("ownerReferences") or () if r.get("uid") != uid]
            wrote = await self._patch_pod(pod, {"metadata": {"ownerReferences": refs or None, "resourceVersion":
                                                             pod["metadata"]["resourceVersion"]}}) or wrote
        if selector is None:
            return wrote
        for key in sorted(self._orphans.get(rs["metadata"]["namespace"], ())):
            record = self.api.cache.get(key)
            if record is None:
                continue
            pod = record.obj
            if pod["metadata"].get("deletionTimestamp") or not selector.matches(pod["metadata"].get("labels")):
                continue
            refs = [*(pod["metadata"].get("ownerReferences") or ()), owner_reference(rs)]
            wrote = await self._patch_pod(pod, {"metadata": {"ownerReferences": refs, "resourceVersion":
                                                             pod["metadata"]["resourceVersion"]}}) or wrote
        if wrote:
            await self.api.cache.wait_fresh()  # the counts below include what was adopted or released
        return wrote

    async def _patch_pod(self, pod: Obj, patch: Obj) -> bool:
        """Whether the pod was patched (the cache brings the result)."""
        meta = pod["metadata"]
        try:
            await self.api.patch(self._pods, meta["namespace"], meta["name"], patch, "merge", self.opts)
        except errors.ApiError as exc:  # changed or gone meanwhile: the change brings this key back
            self._log.debug("pod %s/%s not claimed: %s", meta["namespace"], meta["name"], exc.message)
            return False
        return True

    async def _scale(self, rs: Obj, replicas: int) -> bool:
        """Create the missing pods or delete the surplus ones; True if it did either."""
        tally = self._tallies.get(rs["metadata"]["uid"], _NO_PODS)
        releasing = sum(1 for k in tally.unmatched if self._pod_state[k][1])  # not ours for long (indexed together)
        diff = replicas - (tally.active - releasing)
        if diff > 0:
            await self._create(rs, min(diff, MAX_BURST))
        elif diff < 0:
            active = [p for p in self._pods_of(rs["metadata"]["uid"]) if is_active(p)]
            doomed = sorted(active, key=deletion_order)[:min(-diff, MAX_BURST)]
            await asyncio.gather(*(self._delete(rs, p) for p in doomed))
        return diff != 0

    async def _create(self, rs: Obj, count: int) -> None:
        """``count`` pods, in batches that double while creates succeed (:func:`slow_start`)."""
        template = (rs.get("spec") or {}).get("template") or {}
        namespace = rs["metadata"]["namespace"]
        results = await slow_start([lambda: self.api.create(self._pods, namespace, pod_from_template(rs, template),
                                                            self.opts)] * count, limit=count)
        record_creates(self, rs, results,
                       lambda result, i: f"Created pod: {msgspec.json.decode(result.body)['metadata']['name']}")

    async def _delete(self, rs: Obj, pod: Obj) -> None:
        if await self.delete_if_unchanged(self._pods, pod):
            self.events.record(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}")

    async def _write_status(self, rs: Obj, selector: LabelSelector | None) -> float | None:
        spec, meta = rs.get("spec") or {}, rs["metadata"]
        tally = self._tallies.get(meta["uid"], _NO_PODS)
        min_ready = spec["minReadySeconds"]
        now = self.clock()
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        waiting: list[float] = []
        available = tally.ready
        labelled = tally.active
        if min_ready > 0 or not _implied(template_labels, selector):
            # Only then are the pods themselves looked at: otherwise the counts kept say it all.
            pods = [p for p in self._pods_of(meta["uid"]) if is_active(p)]
            labelled = sum(1 for p in pods if template_labels.items() <= (p["metadata"].get("labels") or {}).items())
            ready = [p for p in pods if is_ready(p)]
            available = sum(1 for p in ready if is_available(p, min_ready, now))
            waiting = [min_ready - (now - ready_since(p)) for p in ready if not is_available(p, min_ready, now)]
        status = {
            "replicas": tally.active,
            "fullyLabeledReplicas": labelled,
            "readyReplicas": tally.ready,
            "availableReplicas": available,
            "observedGeneration": meta["generation"],
        }
        if (rs.get("status") or {}) != status:
            try:
                await self.api.update(self._rs, meta["namespace"], meta["name"], {**rs, "status": status},
                                      self.opts, subresource="status")
            except errors.ApiError as exc:
                if exc.code not in (404, 409):
                    raise
                return None  # changed or gone: that change queues the key again
        return max(0.0, math.ceil(min(waiting) * 10) / 10) if waiting else None


def _implied(template_labels: dict[str, str], selector: LabelSelector | None) -> bool:
    """Every pod the selector matches carries the template's labels (so is fully labelled)."""
    if selector is None:
        return not template_labels
    required = {r.key: r.values for r in selector.requirements if r.operator == "="}
    return all(required.get(k) == frozenset([v]) for k, v in template_labels.items())
