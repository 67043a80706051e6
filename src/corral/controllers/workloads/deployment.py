"""The Deployment controller: rolls a pod template out through ReplicaSets, as Kubernetes does.

Each template a Deployment has had is a ReplicaSet it owns, named ``{deployment}-{hash}`` after
the template's hash (label ``pod-template-hash`` on the ReplicaSet, its selector and its pods, so
the ReplicaSets of one Deployment never share pods) and numbered by the annotation
``deployment.kubernetes.io/revision``. For each Deployment (its key queued when it or one of its
ReplicaSets changes):

1. **The new ReplicaSet**: the one whose template is the Deployment's, made when there is none
   (revision: one more than the highest), its revision raised when an older template comes back
   (``kubectl rollout undo``). A paused Deployment makes none: it only scales.
2. **Rollout.** *RollingUpdate*: the new ReplicaSet grows while all ReplicaSets together stay within
   ``replicas + maxSurge`` (a ReplicaSet counted at its size, or at the pods its status still counts
   while its controller has not yet removed those it was scaled down from: pods, not only sizes,
   stay within the surge); the old ones shrink — their unavailable pods first — while the available
   pods stay at least ``replicas - maxUnavailable``. *Recreate*: the old ones go to zero, and the new
   one grows only once none of their pods is left, or left running: a pod being deleted still runs
   until its agent reports it stopped (its key is queued again when one of them goes). Scaling a
   Deployment that is not rolling out changes the new ReplicaSet alone.
3. **History.** Old ReplicaSets scaled to zero beyond ``revisionHistoryLimit`` are deleted, oldest first.
4. **Status.** The counts kubectl shows (``READY UP-TO-DATE AVAILABLE``) and two conditions:
   Available (at least ``replicas - maxUnavailable`` pods available) and Progressing (a new
   ReplicaSet is being rolled out; complete; or stuck: no progress for ``progressDeadlineSeconds``,
   reason ``ProgressDeadlineExceeded``, which ``kubectl rollout status`` reports as a failure).

The ReplicaSet controller makes and deletes the pods; this one only sets ReplicaSets' replicas.
"""

from __future__ import annotations

import time
from typing import Any, Iterable

import msgspec

from corral.api.resources import ResourceType, by_kind
from corral.api.kinds.apps import percent_or_count
from corral.api.selectors import SelectorError, label_selector_from_struct
from corral.controllers.workloads.pods import FINISHED, controller_of, owner_reference
from corral.controllers.queued import QueuedController
from corral.scheduler.cache.node_table import parse_timestamp
from corral.api.defaults import rfc3339
from corral.server import errors
from corral.server.rest import ResourceAPI
from corral.store import Event, EventType

__all__ = ["DeploymentController", "REVISION", "HASH_LABEL", "template_hash"]

REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"  # the Deployment's size a ReplicaSet was last scaled for
HASH_LABEL = "pod-template-hash"
# Annotations of a Deployment its ReplicaSets do not inherit (kubectl's own, and the revision).
_NOT_COPIED = (REVISION, "kubectl.kubernetes.io/last-applied-configuration", "deployment.kubernetes.io/revision-history")
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # no vowels (no words), no look-alikes: as Kubernetes names them

Obj = dict[str, Any]


def template_hash(template: Obj, collisions: int = 0) -> str:
    """The template's FNV-1a hash (with the collision count, when names collided), written in
    Kubernetes' safe alphabet: the ``pod-template-hash`` label and the ReplicaSet's name suffix."""
    h = 0x811C9DC5
    for byte in msgspec.json.encode(template, order="sorted") + (str(collisions).encode() if collisions else b""):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_ALPHABET[ord(c) % len(_ALPHABET)] for c in str(h))


def _pruned(value: Any) -> Any:
    """``value`` without null or empty fields, for comparing templates: one that kubectl sends back
    (``rollout undo``) carries ``creationTimestamp: null`` and ``resources: {}``, as Go writes an
    unset field, and is the same template as one without them."""
    if isinstance(value, dict):
        pruned = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v is not None and v != {} and v != []}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def _without_hash(template: Obj) -> Obj:
    template = _pruned(template)
    meta = dict(template.get("metadata") or {})
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != HASH_LABEL}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    return {**template, "metadata": meta}


def _inherited(deploy: Obj) -> Obj:
    """The Deployment's annotations its new ReplicaSet carries too (``kubectl rollout history``
    shows the ``kubernetes.io/change-cause`` of each revision from them)."""
    return {k: v for k, v in (deploy["metadata"].get("annotations") or {}).items() if k not in _NOT_COPIED}


def _revision(obj: Obj) -> int:
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(REVISION, "")
    return int(text) if text.isdigit() else 0


def _desired(rs: Obj, default: int) -> int:
    text = ((rs.get("metadata") or {}).get("annotations") or {}).get(DESIRED, "")
    return int(text) if text.isdigit() else default


def _proportional(sets: list[Obj], wanted: int) -> list[tuple[Obj, int]]:
    """``wanted`` replicas shared among ``sets`` in proportion to their sizes, as Kubernetes scales a
    paused Deployment: each ReplicaSet by the ratio of ``wanted`` to the Deployment size it was last
    scaled for (its ``desired-replicas`` annotation), so a scaling cut short and done again ends where
    it would have; what rounding leaves goes to the largest, newest."""
    if not sets:
        return []
    total = sum(_replicas(rs) for rs in sets)
    if total == 0:
        return [(rs, wanted if rs is sets[-1] else 0) for rs in sets]
    counts = [_replicas(rs) if _desired(rs, total) == wanted else _replicas(rs) * wanted // _desired(rs, total) or 0
              for rs in sets]
    pending = [i for i, rs in enumerate(sets) if _desired(rs, total) != wanted]
    order = sorted(pending, key=lambda i: (counts[i], _revision(sets[i])), reverse=True)
    for i in order[:max(wanted - sum(counts), 0)]:
        counts[i] += 1
    return list(zip(sets, counts))


def _replicas(rs: Obj) -> int:
    return rs["spec"]["replicas"]


def _status_count(rs: Obj, field: str) -> int:
    return int((rs.get("status") or {}).get(field) or 0)


def _pods_at_most(rs: Obj) -> int:
    """The pods ``rs`` may have: its size, or more while its status still counts pods it was
    scaled down from (its controller has not removed them yet, or not yet said so)."""
    return max(_replicas(rs), _status_count(rs, "replicas"))


class DeploymentController(QueuedController):
    name = "deployment"
    component = "deployment-controller"  # the source of its events

    def __init__(self, api: ResourceAPI, *, clock=time.time) -> None:
        super().__init__(api)
        self.clock = clock
        self._deploys, self._rs, self._pods = by_kind("Deployment"), by_kind("ReplicaSet"), by_kind("Pod")
        self._owned: dict[str, set[str]] = {}  # deployment uid → keys of the ReplicaSets it controls
        self._rs_owner: dict[str, str] = {}  # ReplicaSet key → its deployment's uid
        self._by_uid: dict[str, str] = {}  # deployment uid → its key
        self._orphans: dict[str, set[str]] = {}  # namespace → keys of ReplicaSets no controller owns

    # --- indexes ---------------------------------------------------------------------------------------

    def reset(self) -> None:
        self._owned.clear(), self._rs_owner.clear(), self._by_uid.clear(), self._orphans.clear()

    def initial_keys(self) -> Iterable[str]:
        keys = []
        for record in self.api.cache.items(self._deploys.store_prefix):
            self._by_uid[record.obj["metadata"]["uid"]] = record.key
            keys.append(record.key)
        for record in self.api.cache.items(self._rs.store_prefix):
            self._index_rs(record.key, record.obj)
        return keys

    def _index_rs(self, key: str, rs: Obj | None) -> str | None:
        old = self._rs_owner.pop(key, None)
        if old is not None:
            self._owned.get(old, set()).discard(key)
        namespace = key.split("/")[3]
        self._orphans.get(namespace, set()).discard(key)
        ref = controller_of(rs) if rs is not None else None
        if rs is not None and ref is None and not rs["metadata"].get("deletionTimestamp"):
            self._orphans.setdefault(namespace, set()).add(key)  # a Deployment whose selector matches adopts it
        if ref is None or ref.get("kind") != "Deployment":
            return old
        uid = ref.get("uid", "")
        self._rs_owner[key] = uid
        self._owned.setdefault(uid, set()).add(key)
        return old

    def watched(self) -> tuple[ResourceType, ...]:
        return self._deploys, self._pods, self._rs

    def routed_by_owner(self) -> dict[str, str]:
        return {self._pods.store_prefix: "ReplicaSet"}  # a pod concerns it only as a ReplicaSet's (:meth:`_stopped`)

    def keys_for(self, event: Event) -> Iterable[str]:
        key = event.key
        deleted = event.type is EventType.DELETED
        if key.startswith(self._deploys.store_prefix):
            uid = event.record.obj["metadata"]["uid"]
            if deleted:
                self._by_uid.pop(uid, None)
                return ()
            self._by_uid[uid] = key
            return (key,)
        if key.startswith(self._pods.store_prefix):
            return self._stopped(event)
        if not key.startswith(self._rs.store_prefix):
            return ()
        before = self._index_rs(key, None if deleted else event.record.obj)
        after = self._rs_owner.get(key)
        keys = {self._by_uid[uid] for uid in (before, after) if uid and uid in self._by_uid}
        namespace = key.split("/")[3]
        if key in self._orphans.get(namespace, ()):  # an orphan: the namespace's Deployments may adopt it
            prefix = f"{self._deploys.store_prefix}{namespace}/"
            keys.update(k for k in self._by_uid.values() if k.startswith(prefix))
        return keys

    def _stopped(self, event: Event) -> tuple[str, ...]:
        """A pod of one of a Recreate Deployment's ReplicaSets gone or finished: the Deployment, which
        may be waiting for it (a pod's other changes reach it through its ReplicaSet's status)."""
        pod = event.record.obj
        if event.type is not EventType.DELETED and (pod.get("status") or {}).get("phase") not in FINISHED:
            return ()
        ref = controller_of(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return ()
        uid = self._rs_owner.get(self._rs.key(pod["metadata"]["namespace"], ref.get("name", "")))
        key = self._by_uid.get(uid) if uid else None
        record = self.api.cache.get(key) if key else None
        if record is None or ((record.obj.get("spec") or {}).get("strategy") or {}).get("type") != "Recreate":
            return ()
        return (record.key,)

    # --- one Deployment --------------------------------------------------------------------------------

    async def sync(self, key: str) -> float | None:
        record = self.api.cache.get(key)
        if record is None:
            return None
        deploy = record.obj
        meta, spec = deploy["metadata"], deploy.get("spec") or {}
        if meta.get("deletionTimestamp"):
            return None  # the garbage collector takes its ReplicaSets
        if await self._adopt(deploy):
            await self.api.cache.wait_fresh()  # the adopted ones are among its ReplicaSets below
        sets = [r.obj for r in map(self.api.cache.get, sorted(self._owned.get(meta["uid"], ()))) if r is not None]
        template = _pruned(spec.get("template") or {})
        new = next((rs for rs in sets if _without_hash((rs.get("spec") or {}).get("template") or {}) == template), None)
        old = sorted((rs for rs in sets if rs is not new), key=lambda rs: (_revision(rs), rs["metadata"]["name"]))
        created = False
        if not spec.get("paused"):
            if new is None:
                new, deploy = await self._create_new(deploy, template, old)
                created = new is not None
            else:
                new, deploy = await self._keep_new_current(deploy, new, old)
        if new is not None and not spec.get("paused"):
            if spec["strategy"]["type"] == "Recreate":
                await self._recreate(deploy, new, old)
            else:
                await self._roll(deploy, new, old)
        elif spec.get("paused"):  # scaling only (no rollout meanwhile): shared out among the ReplicaSets that run
            running = [rs for rs in sets if _replicas(rs)] or sorted(sets, key=_revision)  # none: the newest grows
            for rs, replicas in _proportional(running, spec["replicas"]):
                await self._set_replicas(deploy, rs, replicas)
        await self._trim_history(deploy, old)
        return await self._write_status(deploy, new, old, created)

    async def _adopt(self, deploy: Obj) -> bool:
        """ReplicaSets no controller owns whose labels its selector matches become its own (a
        Deployment deleted with ``--cascade=orphan`` and applied again takes its ReplicaSets back)."""
        meta = deploy["metadata"]
        try:
            selector = label_selector_from_struct((deploy.get("spec") or {}).get("selector"))
        except SelectorError:
            return False
        if selector is None or selector.empty:
            return False
        adopted = False
        for key in sorted(self._orphans.get(meta["namespace"], ())):
            record = self.api.cache.get(key)
            if record is None or not selector.matches(record.obj["metadata"].get("labels") or {}):
                continue
            refs = [*(record.obj["metadata"].get("ownerReferences") or ()), owner_reference(deploy)]
            try:
                await self._patch_rs(record.obj, {"metadata": {"ownerReferences": refs}})
            except errors.ApiError as exc:  # changed or gone meanwhile: its change brings it back
                self._log.debug("ReplicaSet %s not adopted: %s", key, exc.message)
                continue
            adopted = True
        return adopted

    async def _create_new(self, deploy: Obj, template: Obj, old: list[Obj]) -> tuple[Obj | None, Obj]:
        """(the new ReplicaSet, or None after a name collision; the Deployment as this left it)."""
        meta, spec = deploy["metadata"], deploy["spec"]
        collisions = int((deploy.get("status") or {}).get("collisionCount") or 0)
        digest = template_hash(template, collisions)
        labels = {**((template.get("metadata") or {}).get("labels") or {}), HASH_LABEL: digest}
        selector = dict(spec.get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: digest}
        annotations = _inherited(deploy)
        annotations[REVISION] = str(max((_revision(rs) for rs in old), default=0) + 1)
        wanted = spec["replicas"]
        annotations[DESIRED] = str(wanted)
        if any(_pods_at_most(rs) for rs in old):
            # Rolling: start within the surge; Recreate: start at none, once the old pods are gone.
            if spec["strategy"]["type"] == "Recreate":
                initial = 0
            else:
                surge, _ = self._limits(deploy)
                initial = max(0, min(wanted, wanted + surge - sum(_pods_at_most(rs) for rs in old)))
        else:
            initial = wanted
        rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
              "metadata": {"name": f"{meta['name']}-{digest}", "namespace": meta["namespace"], "labels": labels,
                           "annotations": annotations, "ownerReferences": [owner_reference(deploy)]},
              "spec": {"replicas": initial, "minReadySeconds": spec["minReadySeconds"],
                       "selector": selector,
                       "template": {**template, "metadata": {**(template.get("metadata") or {}), "labels": labels}}}}
        try:
            reply = await self.api.create(self._rs, meta["namespace"], rs, self.opts)
        except errors.ApiError as exc:
            if exc.code != 409:
                raise
            # A ReplicaSet of that name with another template: hash again with one more collision.
            status = {**(deploy.get("status") or {}), "collisionCount": collisions + 1}
            await self.api.update(self._deploys, meta["namespace"], meta["name"], {**deploy, "status": status},
                                  self.opts, subresource="status")
            return None, deploy
        deploy = await self._annotate_revision(deploy, annotations[REVISION])
        if initial:
            self.events.record(deploy, "Normal", "ScalingReplicaSet",
                               f"Scaled up replica set {rs['metadata']['name']} from 0 to {initial}")
        return msgspec.json.decode(reply.body), deploy

    async def _keep_new_current(self, deploy: Obj, new: Obj, old: list[Obj]) -> tuple[Obj, Obj]:
        """An older template back (rollout undo): its ReplicaSet becomes the newest revision again;
        and it follows the Deployment's annotations and minReadySeconds. (That ReplicaSet, the
        Deployment as this left it.)"""
        spec = deploy["spec"]
        highest = max((_revision(rs) for rs in old), default=0)
        patch: Obj = {}
        current = new["metadata"].get("annotations") or {}
        annotations = {k: v for k, v in _inherited(deploy).items() if current.get(k) != v}  # e.g. change-cause
        if _revision(new) <= highest:
            annotations[REVISION] = str(highest + 1)
        if annotations:
            patch["metadata"] = {"annotations": annotations}
        min_ready = spec["minReadySeconds"]
        if new["spec"]["minReadySeconds"] != min_ready:
            patch["spec"] = {"minReadySeconds": min_ready}
        if patch:
            new = await self._patch_rs(new, patch)
        if str(_revision(new)) != (deploy["metadata"].get("annotations") or {}).get(REVISION):
            deploy = await self._annotate_revision(deploy, str(_revision(new)))
        return new, deploy

    async def _annotate_revision(self, deploy: Obj, revision: str) -> Obj:
        """The Deployment numbered ``revision``, as the patch left it: the status this sync writes
        needs its resourceVersion. Gone meanwhile, or its spec changed (which the status written from
        this sync's spec must not claim to have observed): ``deploy`` as it was."""
        meta = deploy["metadata"]
        try:
            reply = await self.api.patch(self._deploys, meta["namespace"], meta["name"],
                                         {"metadata": {"annotations": {REVISION: revision}}}, "merge", self.opts)
        except errors.ApiError as exc:
            if exc.code != 404:
                raise
            return deploy
        patched = msgspec.json.decode(reply.body)
        return patched if patched["metadata"].get("generation") == meta.get("generation") else deploy

    def _limits(self, deploy: Obj) -> tuple[int, int]:
        """(maxSurge, maxUnavailable) as pod counts, as Kubernetes resolves them: never both 0."""
        spec = deploy["spec"]
        wanted = spec["replicas"]
        rolling = spec["strategy"]["rollingUpdate"]  # a RollingUpdate's: the API defaults both
        surge = percent_or_count(rolling["maxSurge"], wanted, round_up=True)
        unavailable = percent_or_count(rolling["maxUnavailable"], wanted, round_up=False)
        if surge == 0 and unavailable == 0:
            unavailable = 1
        return surge, min(unavailable, wanted)

    async def _roll(self, deploy: Obj, new: Obj, old: list[Obj]) -> None:
        wanted = deploy["spec"]["replicas"]
        surge, unavailable = self._limits(deploy)
        everyone = [new, *old]
        # Grow the new ReplicaSet within the surge (or shrink it to the wanted count); its
        # desired-replicas annotation follows the Deployment's size either way.
        if _replicas(new) > wanted:
            await self._set_replicas(deploy, new, wanted)
        else:
            room = wanted + surge - sum(_pods_at_most(rs) for rs in everyone)
            await self._set_replicas(deploy, new, _replicas(new) + max(0, min(room, wanted - _replicas(new))))
        # Shrink the old ones while enough pods stay available.
        if not any(_replicas(rs) for rs in old):
            return
        min_available = wanted - unavailable
        new_unavailable = _replicas(new) - _status_count(new, "availableReplicas")
        budget = sum(_replicas(rs) for rs in everyone) - min_available - new_unavailable
        if budget <= 0:
            return
        left = {rs["metadata"]["name"]: _replicas(rs) for rs in old}
        for rs in old:  # their pods that are not available go first: they serve nobody
            cut = min(budget, max(0, _replicas(rs) - _status_count(rs, "availableReplicas")))
            left[rs["metadata"]["name"]] -= cut
            budget -= cut
        # What is left of the budget is the available pods beyond min_available (fewer while an old
        # set's status still counts pods beyond its size; 0 when the unavailable ones took it all):
        # the available ones go, oldest first, as far as it reaches.
        for rs in old:
            cut = min(budget, left[rs["metadata"]["name"]])
            left[rs["metadata"]["name"]] -= cut
            budget -= cut
        for rs in old:
            await self._set_replicas(deploy, rs, left[rs["metadata"]["name"]])

    async def _recreate(self, deploy: Obj, new: Obj, old: list[Obj]) -> None:
        for rs in old:
            if _replicas(rs):
                await self._set_replicas(deploy, rs, 0)
        wanted = deploy["spec"]["replicas"]
        if _replicas(new) < wanted and self._still_running(old):
            return  # old pods still there, or told to stop and not stopped yet: the new ones wait
        await self._set_replicas(deploy, new, wanted)

    def _still_running(self, old: list[Obj]) -> bool:
        """Whether a pod of ``old`` is there and not finished (one being deleted included: it runs
        until its agent reports it stopped), as Kubernetes' Recreate waits for them."""
        uids = {rs["metadata"]["uid"] for rs in old}
        if not uids:
            return False
        namespace_prefix = f"{self._pods.store_prefix}{old[0]['metadata']['namespace']}/"
        for record in self.api.cache.items(self._pods.store_prefix, namespace_prefix):
            ref = controller_of(record.obj)
            if ref is not None and ref.get("uid") in uids and (record.obj.get("status") or {}).get(
                    "phase") not in FINISHED:
                return True
        return False

    async def _set_replicas(self, deploy: Obj, rs: Obj, replicas: int) -> None:
        before = _replicas(rs)
        desired = str(deploy["spec"]["replicas"])
        if before != replicas or ((rs["metadata"].get("annotations") or {}).get(DESIRED) != desired and before):
            await self._patch_rs(rs, {"metadata": {"annotations": {DESIRED: desired}}, "spec": {"replicas": replicas}})
        if before != replicas:
            self.events.record(deploy, "Normal", "ScalingReplicaSet", f"Scaled {'up' if replicas > before else 'down'} "
                               f"replica set {rs['metadata']['name']} from {before} to {replicas}")

    async def _patch_rs(self, rs: Obj, patch: Obj) -> Obj:
        meta = rs["metadata"]
        patch = {**patch, "metadata": {**patch.get("metadata", {}), "resourceVersion": meta["resourceVersion"]}}
        reply = await self.api.patch(self._rs, meta["namespace"], meta["name"], patch, "merge", self.opts)
        return msgspec.json.decode(reply.body)

    async def _trim_history(self, deploy: Obj, old: list[Obj]) -> None:
        limit = deploy["spec"]["revisionHistoryLimit"]
        idle = [rs for rs in old if not _replicas(rs) and not _status_count(rs, "replicas")]
        for rs in idle[:max(0, len(idle) - limit)]:  # oldest first
            await self.delete_if_unchanged(self._rs, rs)

    # --- status ----------------------------------------------------------------------------------------

    async def _write_status(self, deploy: Obj, new: Obj | None, old: list[Obj], created: bool) -> float | None:
        meta, spec = deploy["metadata"], deploy["spec"]
        previous = deploy.get("status") or {}
        wanted = spec["replicas"]
        everyone = [rs for rs in (new, *old) if rs is not None]
        # Available with at most maxUnavailable missing; Recreate has none to spare (as Kubernetes).
        unavailable = 0 if spec["strategy"]["type"] == "Recreate" else self._limits(deploy)[1]
        counts = {
            "replicas": sum(_status_count(rs, "replicas") for rs in everyone),
            "updatedReplicas": _status_count(new, "replicas") if new is not None else 0,
            "readyReplicas": sum(_status_count(rs, "readyReplicas") for rs in everyone),
            "availableReplicas": sum(_status_count(rs, "availableReplicas") for rs in everyone),
        }
        counts["unavailableReplicas"] = max(0, wanted - counts["availableReplicas"])
        now = self.clock()
        stamp = rfc3339(now)
        conditions = {c.get("type"): c for c in previous.get("conditions") or ()}

        def condition(kind: str, status: str, reason: str, message: str, *, progressed: bool = True) -> Obj:
            before = conditions.get(kind) or {}
            same = before.get("status") == status and before.get("reason") == reason
            return {"type": kind, "status": status,
                    "lastUpdateTime": stamp if progressed or not same else before.get("lastUpdateTime", stamp),
                    "lastTransitionTime": before.get("lastTransitionTime", stamp) if before.get("status") == status
                    else stamp, "reason": reason, "message": message}

        available = counts["availableReplicas"] >= wanted - unavailable
        out = [condition("Available", "True" if available else "False",
                         "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
                         "Deployment has minimum availability." if available
                         else "Deployment does not have minimum availability.", progressed=False)]
        name = new["metadata"]["name"] if new is not None else meta["name"]
        complete = new is not None and counts["updatedReplicas"] == wanted and counts["replicas"] == wanted \
            and counts["availableReplicas"] == wanted and _replicas(new) == wanted
        again: float | None = None
        deadline = spec["progressDeadlineSeconds"]
        old_progress = conditions.get("Progressing") or {}
        moved = created or any(previous.get(k, 0) != v for k, v in counts.items())
        if spec.get("paused"):
            out.append(condition("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused", progressed=False))
        elif complete:
            # Its times move only when it is new: a settled Deployment keeps the time it settled.
            out.append(condition("Progressing", "True", "NewReplicaSetAvailable",
                                 f'ReplicaSet "{name}" has successfully progressed.', progressed=False))
        elif moved or old_progress.get("reason") in (None, "NewReplicaSetAvailable", "DeploymentPaused"):
            reason = "NewReplicaSetCreated" if created else "ReplicaSetUpdated"
            message = f'Created new replica set "{name}"' if created else f'ReplicaSet "{name}" is progressing.'
            out.append(condition("Progressing", "True", reason, message))
            again = float(deadline)
        else:  # no progress since the last update: stuck once the deadline passes
            since = parse_timestamp(old_progress.get("lastUpdateTime")) or now
            if old_progress.get("reason") == "ProgressDeadlineExceeded" or now - since > deadline:
                out.append(condition("Progressing", "False", "ProgressDeadlineExceeded",
                                     f'ReplicaSet "{name}" has timed out progressing.', progressed=False))
            else:
                out.append(old_progress)
                again = max(0.1, deadline - (now - since))
        status = {"observedGeneration": meta["generation"], **counts, "conditions": out}
        if "collisionCount" in previous:
            status["collisionCount"] = previous["collisionCount"]
        if status != previous:
            try:
                await self.api.update(self._deploys, meta["namespace"], meta["name"], {**deploy, "status": status},
                                      self.opts, subresource="status")
            except errors.ApiError as exc:
                if exc.code not in (404, 409):
                    raise
        return again
