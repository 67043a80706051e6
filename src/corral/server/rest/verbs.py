"""What each API verb does to the store: the REST semantics, free of HTTP details.

:class:`ResourceAPI` is called by the HTTP layer (``server.app``) with decoded inputs and answers
with a :class:`Reply` (status code, JSON bytes, warnings) or raises :class:`ApiError`. Reads come
from the watch cache after it has caught up with the store; writes go to the store with
compare-and-swap on the revision that was read, so concurrent writers never lose an update.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Iterator

import msgspec

from corral.api import validation
from corral.api.defaults import apply_create_defaults, apply_update_defaults, now_rfc3339
from corral.api.patch import PatchError, json_patch, merge_patch, strategic_merge_patch
from corral.api.write_check import check_write
from corral.api.resources import (PROPAGATION_FINALIZERS, SYSTEM_NAMESPACES, SYSTEM_PRIORITY_CLASSES, ResourceType,
                                  by_kind)
from corral.api.kubectl.fields import kubernetes_unknown_fields
from corral.api.selectors import FieldSelector, LabelSelector
from corral.server import errors
from corral.server.rest import binding, disruption
from corral.server.watch import WatchCache, editable
from corral.store.base import Compacted, Conflict, KeyExists, KeyNotFound, Record, Store

__all__ = ["ResourceAPI", "Reply", "ListOptions", "WriteOptions"]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode

_CAS_RETRIES = 8
IMMUTABLE_SELECTORS = ("ReplicaSet", "Deployment", "DaemonSet")  # apps/v1: a workload's selector never changes
TOO_LARGE_WAIT = 3.0  # Kubernetes' wait for a resourceVersion no write has made yet


@dataclass(slots=True)
class Reply:
    code: int
    body: bytes
    warnings: list[str] = field(default_factory=list)


_NOT_WRITTEN = Reply(200, b"")  # what a change returns to have nothing written (a dry run's binding)


@dataclass(frozen=True, slots=True)
class ListOptions:
    labels: LabelSelector = LabelSelector()
    fields: FieldSelector = FieldSelector()
    limit: int = 0
    continue_token: str = ""
    resource_version: int = 0  # 0: any (the newest)
    exact: bool = False  # resourceVersionMatch=Exact: the list as it was at resource_version


@dataclass(frozen=True, slots=True)
class WriteOptions:
    strict: bool = False  # fieldValidation=Strict
    warn: bool = True  # fieldValidation=Ignore turns warnings off
    dry_run: bool = False
    user: Any = None  # the client's UserInfo: its writes pass admission (the server's own do not)


def _within(path: str, roots: list[str]) -> bool:
    """Whether ``path`` is one of ``roots`` or inside one (``a.b[0].c`` is inside ``a.b``)."""
    return any(path == r or path.startswith((r + ".", r + "[")) for r in roots)


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


MAX_CONTINUE_TOKEN = 2048  # a token names a revision and a key; a longer one is not ours


class ResourceAPI:
    def __init__(self, store: Store, cache: WatchCache, *, continue_key: bytes) -> None:
        self.store = store
        self.cache = cache
        # Continue tokens are signed with it, so a client cannot make a list claim a revision it
        # never had; servers sharing a store must share it (the server derives it from its CA).
        self.continue_key = continue_key
        # (resource, new object, old object or None, user) → raises ApiError: the server's admission
        self.admit: Callable[[ResourceType, dict[str, Any], dict[str, Any] | None, Any], None] | None = None
        # Evictions one at a time: each counts the healthy pods its budgets want after the last one.
        self._evicting = asyncio.Lock()

    # --- reads -------------------------------------------------------------------------------------------

    async def current(self, resource: ResourceType, namespace: str | None, name: str, *,
                      consistent: bool = False, at_least: int = 0) -> Record:
        """The object from the watch cache, once the cache is fresh enough.

        ``consistent``: every write acknowledged anywhere before this call is in (what a client's
        read needs; one store round trip on etcd). Otherwise the cache need only have reached
        revision ``at_least`` — enough for a write, which compares and swaps anyway (waiting for
        this process's own writes to come back from etcd's watch first would make every write queue
        behind the ones before it) — and an object missing from that view is looked for again in a
        consistent one (it may have just been created, through this server or another)."""
        key = resource.key(namespace, name)
        if consistent:
            await self.cache.wait_consistent()
        elif at_least:
            if await self._unmade(at_least):
                # A version no write has made yet (not even through another server): the object
                # cannot be at it, so the compare-and-swap it guards fails now, as in Kubernetes.
                raise errors.conflict(resource, name)
            await self.cache.wait_fresh(at_least)
        record = self.cache.get(key)
        if record is None and not consistent:
            await self.cache.wait_consistent()
            record = self.cache.get(key)
        if record is None:
            raise errors.not_found(resource, name)
        return record

    async def _unmade(self, revision: int) -> bool:
        """Whether no write has made ``revision`` yet, anywhere: beyond this cache and the store.
        Asks the store only for a revision the cache has not reached."""
        return revision > self.cache.revision and revision > await self.store.current_revision()

    async def reach(self, revision: int) -> None:
        """Wait until the cache has seen ``revision`` (a read or watch from it). One that the store
        itself has not reached is waited for ``TOO_LARGE_WAIT`` seconds, then answered as
        Kubernetes answers it: 504, "Too large resource version"."""
        if revision <= self.cache.revision:
            return
        if not await self._unmade(revision):
            await self.cache.wait_fresh(revision)
            return
        try:
            await self.cache.wait_fresh(revision, timeout=TOO_LARGE_WAIT)
        except asyncio.TimeoutError:
            raise errors.ApiError(504, "Timeout", f"Too large resource version: {revision}, current: "
                                  f"{self.cache.revision}", {"causes": [{"reason": "ResourceVersionTooLarge",
                                                                         "message": "Too large resource version"}],
                                                             "retryAfterSeconds": 1}) from None

    async def _caught_up(self, conflict: Conflict) -> None:
        """After a compare-and-swap lost to a write this cache has not seen yet: wait for it."""
        await self.cache.wait_fresh(max(conflict.actual, 0))

    async def get(self, resource: ResourceType, namespace: str | None, name: str) -> Reply:
        return Reply(200, (await self.current(resource, namespace, name, consistent=True)).value)

    def _key_prefix(self, resource: ResourceType, namespace: str | None) -> str:
        return f"{resource.store_prefix}{namespace}/" if resource.namespaced and namespace else resource.store_prefix

    async def list(self, resource: ResourceType, namespace: str | None, opts: ListOptions) -> Reply:
        if opts.resource_version:  # not older than it: a version from the future waits, then 504
            await self.reach(opts.resource_version)
        if opts.limit or opts.continue_token or opts.exact:
            return await self._list_paged(resource, namespace, opts)
        await self.cache.wait_consistent()
        prefix = self._key_prefix(resource, namespace)
        name = opts.fields.exact("metadata.name")
        records = []
        for record in self.cache.items(resource.store_prefix, prefix):
            if name is not None and record.key.rsplit("/", 1)[-1] != name:
                continue
            if not opts.labels.empty and not opts.labels.matches_object(record.obj):
                continue
            if not opts.fields.empty and not opts.fields.matches(record.obj):
                continue
            records.append(record)
        records.sort(key=lambda r: r.key)
        return Reply(200, self._list_body(resource, (r.value for r in records), self.cache.revision, ""))

    def _list_body(self, resource: ResourceType, items: Iterable[bytes], revision: int, cont: str) -> bytes:
        """A list's JSON from its items' JSON, without decoding them."""
        meta: dict[str, Any] = {"resourceVersion": str(revision)}
        if cont:
            meta["continue"] = cont
        head = _encode({"kind": resource.list_kind, "apiVersion": resource.api_version, "metadata": meta})
        return head[:-1] + b',"items":[' + b",".join(items) + b"]}"

    def _sign(self, revision: int, start: str) -> str:
        return hmac.new(self.continue_key, f"{revision}\0{start}".encode(), hashlib.sha256).hexdigest()[:32]

    async def _list_paged(self, resource: ResourceType, namespace: str | None, opts: ListOptions) -> Reply:
        prefix = self._key_prefix(resource, namespace)
        start = ""
        if opts.continue_token:
            try:
                if len(opts.continue_token) > MAX_CONTINUE_TOKEN:
                    raise ValueError
                token = _decode(base64.urlsafe_b64decode(opts.continue_token.encode()))
                revision, start = int(token["rv"]), str(token["start"])
                if not start.startswith(prefix) or not hmac.compare_digest(str(token["sig"]),
                                                                            self._sign(revision, start)):
                    raise ValueError
            except (ValueError, KeyError, TypeError, binascii.Error, msgspec.DecodeError):
                raise errors.bad_request("invalid continue token: not one this cluster gave out for this list") from None
        elif opts.exact:
            revision = opts.resource_version
        else:
            revision = await self.store.current_revision()
        limit = opts.limit or (2**31 if opts.exact else 500)
        found: list[Record] = []
        more = True
        try:
            while more and len(found) < limit:
                page = await self.store.list(prefix, revision=revision, limit=limit, start_after=start)
                more = page.more
                for record in page.items:
                    start = record.key
                    if (opts.labels.empty or opts.labels.matches_object(record.obj)) and (
                        opts.fields.empty or opts.fields.matches(record.obj)
                    ):
                        found.append(record)
                        if len(found) == limit:
                            more = more or record is not page.items[-1]
                            break
        except Compacted:  # (a continue token and resourceVersionMatch never come together)
            if not opts.continue_token:
                raise errors.gone(f"too old resource version: {revision} ({self.store.compacted_revision})") from None
            raise errors.gone(
                "The provided continue parameter is too old to display a consistent list result. "
                "You can start a new list without the continue parameter."
            ) from None
        next_page = ({"rv": revision, "start": found[-1].key, "sig": self._sign(revision, found[-1].key)}
                     if more and found else None)
        cont = base64.urlsafe_b64encode(_encode(next_page)).decode() if next_page else ""
        return Reply(200, self._list_body(resource, (r.value for r in found), revision, cont))

    # --- create ------------------------------------------------------------------------------------------

    def _check_kind(self, resource: ResourceType, obj: Any) -> None:
        if not isinstance(obj, dict):
            raise errors.bad_request(f"the request body must be a JSON object (a {resource.kind})")
        kind = obj.get("kind")
        if kind is not None and kind != resource.kind:
            raise errors.bad_request(
                f'the kind of the body ("{kind}") does not match the resource ({resource.kind}, {resource.plural})'
            )
        version = obj.get("apiVersion")
        if version is not None and version != resource.api_version:
            raise errors.bad_request(
                f'the apiVersion of the body ("{version}") does not match {resource.api_version}'
            )

    def _validate(self, resource: ResourceType, obj: dict[str, Any], opts: WriteOptions) -> list[str]:
        name = _meta(obj).get("name")
        causes, unknown = check_write(resource, obj)
        if causes:
            raise errors.invalid(resource, name if isinstance(name, str) else None, causes)
        if not unknown:
            return []
        # Of the fields corral does not model, those Kubernetes does not have either are misspelt:
        # refused under Strict (what kubectl asks by default), as Kubernetes refuses them. The rest
        # are Kubernetes fields corral keeps without acting on them: a warning, never a refusal.
        k8s_unknown = kubernetes_unknown_fields(resource.api_version, resource.kind, obj)
        typos = unknown if k8s_unknown is None else [t for t in k8s_unknown if _within(t, unknown)]
        if typos and opts.strict:
            listed = ", ".join(f'unknown field "{u}"' for u in typos)
            raise errors.bad_request(f"{resource.kind} in version \"{resource.version}\" cannot be handled as a "
                                     f"{resource.kind}: strict decoding error: {listed}")
        if not opts.warn:
            return []
        kept = [u for u in unknown if not _within(u, typos)]
        return ([f'unknown field "{t}": Kubernetes has no such field (misspelt?); kept as written' for t in typos]
                + [f'field "{u}": corral keeps it as written but does not act on it' for u in kept])

    async def create(self, resource: ResourceType, namespace: str | None, obj: Any, opts: WriteOptions) -> Reply:
        self._check_kind(resource, obj)
        meta = _meta(obj)
        if resource.namespaced:
            body_ns = meta.get("namespace")
            if namespace and body_ns and body_ns != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            namespace = namespace or body_ns or "default"
        warnings = self._validate(resource, obj, opts)
        apply_create_defaults(resource, obj, namespace)
        name = obj["metadata"]["name"]
        ns_key = by_kind("Namespace").key(None, namespace)
        if resource.namespaced and self.cache.get(ns_key) is None:
            await self.cache.wait_consistent()  # created a moment ago, through this server or another?
            if self.cache.get(ns_key) is None:
                raise errors.not_found(by_kind("Namespace"), namespace or "")
        if resource.kind == "Pod":
            class_name = (obj.get("spec") or {}).get("priorityClassName")
            if class_name and self.cache.get(by_kind("PriorityClass").key(None, class_name)) is None:
                await self.cache.wait_consistent()  # as for the namespace
            self._admit_priority(obj)
        if opts.user is not None and self.admit is not None:
            self.admit(resource, obj, None, opts.user)
        if opts.dry_run:
            return Reply(201, _encode(obj), warnings)
        try:
            record = await self.store.create(resource.key(namespace, name), obj)
        except KeyExists:
            raise errors.already_exists(resource, name) from None
        return Reply(201, record.value, warnings)

    def _admit_priority(self, pod: dict[str, Any]) -> None:
        """Priority admission: spec.priority comes from the PriorityClass, never from the user."""
        spec = pod["spec"]
        pc_resource = by_kind("PriorityClass")
        class_name = spec.get("priorityClassName")
        value, policy = 0, None
        if class_name:
            record = self.cache.get(pc_resource.key(None, class_name))
            if record is None:  # Kubernetes answers 403; a field path tells the user what to fix
                raise errors.invalid(by_kind("Pod"), pod["metadata"]["name"], [validation.Cause(
                    "spec.priorityClassName", "FieldValueNotFound",
                    f"Not found: {class_name!r}: no PriorityClass with name {class_name} was found")])
            value, policy = record.obj["value"], record.obj.get("preemptionPolicy")  # value: required
        else:
            for record in self.cache.items(pc_resource.store_prefix):
                if record.obj.get("globalDefault"):
                    class_name = _meta(record.obj).get("name")
                    value, policy = record.obj["value"], record.obj.get("preemptionPolicy")  # value: required
                    spec["priorityClassName"] = class_name
                    break
        given = spec.get("priority")
        if given is not None and given != value:
            raise errors.forbidden(
                by_kind("Pod"), pod["metadata"]["name"],
                f"the integer value of priority ({given}) must not be provided in pod spec; "
                f"priority admission controller computed {value} from the given PriorityClass name",
            )
        spec["priority"] = value
        spec.setdefault("preemptionPolicy", policy or "PreemptLowerPriority")

    # --- update and patch -------------------------------------------------------------------------------

    def _merge_update(self, resource: ResourceType, current: dict[str, Any], new: dict[str, Any],
                      subresource: str | None) -> dict[str, Any]:
        """The object to store when ``new`` replaces ``current`` (via the main resource or /status)."""
        if subresource == "status":
            merged = _decode(_encode(current))
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            return merged
        # A copy of what this changes: an in-process caller's object often shares its metadata with
        # the cached one ({**cached, "spec": ...}), which a refused write must leave as it was.
        merged = {**new, "metadata": dict(new.get("metadata") or {})}
        cur_meta, meta = current["metadata"], merged["metadata"]
        for key in ("uid", "creationTimestamp", "namespace", "name", "deletionTimestamp",
                    "deletionGracePeriodSeconds", "generation"):
            if key in cur_meta:
                meta[key] = cur_meta[key]
            else:
                meta.pop(key, None)
        merged["apiVersion"], merged["kind"] = resource.api_version, resource.kind
        if resource.has_status:
            if "status" in current:
                merged["status"] = current["status"]
            else:
                merged.pop("status", None)
        apply_update_defaults(resource, merged)
        if resource.kind == "Pod":
            self._check_pod_spec_update(current, merged)
        if resource.kind in ("RoleBinding", "ClusterRoleBinding") and merged.get("roleRef") != current.get("roleRef"):
            raise errors.invalid(resource, cur_meta.get("name"), [validation.Cause(
                "roleRef", validation.INVALID, "Invalid value: cannot change roleRef (delete the binding and create "
                "a new one)")])
        if resource.kind in IMMUTABLE_SELECTORS and (merged.get("spec") or {}).get("selector") != \
                (current.get("spec") or {}).get("selector"):
            raise errors.invalid(resource, cur_meta.get("name"), [validation.Cause(
                "spec.selector", validation.INVALID, "Invalid value: field is immutable")])
        causes = validation.update_causes(resource, current, merged)
        if causes:
            raise errors.invalid(resource, cur_meta.get("name"), causes)
        if merged.get("spec") != current.get("spec"):
            meta["generation"] = int(cur_meta.get("generation") or 1) + 1
        return merged

    def _check_pod_spec_update(self, current: dict[str, Any], new: dict[str, Any]) -> None:
        """Kubernetes' rule: a pod's spec is fixed once created, but for images and a few fields."""
        def masked(spec: Any) -> Any:
            spec = _decode(_encode(spec or {}))
            for c in (*spec.get("containers", ()), *spec.get("initContainers", ())):
                if isinstance(c, dict):
                    c.pop("image", None)
                    c.pop("imagePullPolicy", None)  # defaulted from the image
            for key in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds"):
                spec.pop(key, None)
            return spec

        if masked(current.get("spec")) != masked(new.get("spec")):
            name = current["metadata"]["name"]
            raise errors.invalid(by_kind("Pod"), name, [validation.Cause(
                "spec", validation.FORBIDDEN,
                "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` "
                "(only additions to existing tolerations) or `spec.terminationGracePeriodSeconds`",
            )])

    async def update(self, resource: ResourceType, namespace: str | None, name: str, obj: Any,
                     opts: WriteOptions, subresource: str | None = None) -> Reply:
        self._check_kind(resource, obj)
        meta = _meta(obj)
        if meta.get("name") not in (None, name):
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        if resource.namespaced and meta.get("namespace") not in (None, namespace):
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        rv = meta.get("resourceVersion")
        pinned = 0
        if rv not in (None, ""):
            try:
                pinned = int(rv)
            except (TypeError, ValueError):
                raise errors.bad_request(f"invalid resourceVersion {rv!r}") from None
        for _ in range(_CAS_RETRIES):
            current = await self.current(resource, namespace, name, at_least=pinned)
            if pinned and pinned != current.revision:
                raise errors.conflict(resource, name)
            try:
                return await self._write_update(resource, namespace, name, current, obj, current.revision,
                                                opts, subresource)
            except Conflict as exc:
                if pinned:  # the client's version is no longer current
                    raise errors.conflict(resource, name) from None
                await self._caught_up(exc)  # without a version the update applies to the newest
        raise errors.conflict(resource, name)

    async def _write_update(self, resource: ResourceType, namespace: str | None, name: str,
                            current: Record, obj: dict[str, Any], expected: int, opts: WriteOptions,
                            subresource: str | None) -> Reply:
        _, causes = validation.type_check(resource, obj)
        if causes:
            raise errors.invalid(resource, name, causes)
        merged = self._merge_update(resource, current.obj, obj, subresource)
        merged["metadata"]["resourceVersion"] = str(current.revision)
        warnings = self._validate(resource, merged, opts)
        if merged == current.obj:
            return Reply(200, current.value, warnings)
        if opts.user is not None and self.admit is not None:
            self.admit(resource, merged, current.obj, opts.user)
        if opts.dry_run:
            return Reply(200, _encode(merged), warnings)
        key = resource.key(namespace, name)
        if self._finalized(resource, current.obj, merged):
            # The last finalizer of an object being deleted is gone: so is the object. A write that
            # came in between is a store Conflict, which the caller retries as it does an update's.
            try:
                gone = await self.store.delete(key, expected)
            except KeyNotFound:
                raise errors.not_found(resource, name) from None
            return Reply(200, gone.value, warnings)
        if resource.kind == "Pod" and self._terminated(merged) and not _meta(merged).get("finalizers"):
            # The agent reports the pod gone: the record goes with it (or with its last finalizer).
            return Reply(200, (await self._delete_now(resource, name, key, None)).value, warnings)
        try:
            record = await self.store.update(key, merged, expected)
        except KeyNotFound:
            raise errors.not_found(resource, name) from None
        return Reply(200, record.value, warnings)

    @staticmethod
    def _finalized(resource: ResourceType, current: dict[str, Any], merged: dict[str, Any]) -> bool:
        meta = _meta(merged)
        if not meta.get("deletionTimestamp") or meta.get("finalizers") or not _meta(current).get("finalizers"):
            return False
        if resource.kind != "Pod" or not (merged.get("spec") or {}).get("nodeName"):
            return True
        # A pod on a node goes with its agent's Terminated report (below), or at once if it was
        # force-deleted (grace 0): Kubernetes deletes a pod when its grace is 0 and no finalizer is left.
        return meta.get("deletionGracePeriodSeconds") == 0

    @staticmethod
    def _terminated(pod: dict[str, Any]) -> bool:
        return bool(_meta(pod).get("deletionTimestamp")) and (pod.get("status") or {}).get("phase") == "Terminated"

    async def patch(self, resource: ResourceType, namespace: str | None, name: str, patch: Any,
                    patch_type: str, opts: WriteOptions, subresource: str | None = None) -> Reply:
        pinned_rv = _meta(patch).get("resourceVersion") if isinstance(patch, dict) else None
        pinned = int(pinned_rv) if isinstance(pinned_rv, str) and pinned_rv.isdigit() else 0
        for _ in range(_CAS_RETRIES):
            current = await self.current(resource, namespace, name, at_least=pinned)
            try:
                if patch_type == "json":
                    patched = json_patch(_decode(current.value), patch)
                elif patch_type == "strategic":
                    patched = strategic_merge_patch(_decode(current.value), patch, resource.merge_keys)
                elif patch_type != "merge":
                    raise ValueError(f"unknown patch type {patch_type!r}")  # a caller's mistake, not a client's
                else:
                    if not isinstance(patch, dict):
                        raise PatchError("a merge patch must be a JSON object")
                    patched = merge_patch(_decode(current.value), patch)
            except PatchError as exc:
                raise errors.ApiError(422, "Invalid", f"the patch could not be applied: {exc}") from None
            if not isinstance(patched, dict):
                raise errors.bad_request("the patched object is not a JSON object")
            self._check_kind(resource, patched)
            rv = _meta(patched).get("resourceVersion")
            if rv not in (None, "") and str(rv) != str(current.revision):  # the patch pins a version
                raise errors.conflict(resource, name)
            try:
                return await self._write_update(resource, namespace, name, current, patched,
                                                current.revision, opts, subresource)
            except Conflict as exc:
                await self._caught_up(exc)
        raise errors.conflict(resource, name)

    async def _rewrite(self, resource: ResourceType, namespace: str | None, name: str,
                       change: Callable[[Record, dict[str, Any]], Reply | None], *,
                       fence: tuple[str, int] | None = None) -> Record | Reply:
        """Read, change, compare-and-swap write; on a conflicting write, again from a fresh read.

        ``change(current, obj)`` edits ``obj`` in place — its top level and its metadata, spec and
        status dicts are fresh; values below them are shared, so replace them, never mutate — and returns
        None to have it written, or a :class:`Reply` to answer without writing. It may raise
        :class:`ApiError`. Returns the written record, or the change's reply. ``fence``: see
        :meth:`Store.update` (raises :class:`~corral.store.Fenced`).
        """
        for _ in range(_CAS_RETRIES):
            current = await self.current(resource, namespace, name)
            obj = editable(current.obj)  # the parts a change may edit (nested values shared)
            early = change(current, obj)
            if early is not None:
                return early
            try:
                return await self.store.update(current.key, obj, current.revision, fence=fence)
            except Conflict as exc:
                await self._caught_up(exc)
            except KeyNotFound:
                raise errors.not_found(resource, name) from None
        raise errors.conflict(resource, name)

    # --- delete ------------------------------------------------------------------------------------------

    async def _delete_now(self, resource: ResourceType, name: str, key: str, expected: int | None) -> Record:
        try:
            return await self.store.delete(key, expected)
        except KeyNotFound:
            raise errors.not_found(resource, name) from None
        except Conflict:
            raise errors.conflict(resource, name, "the resourceVersion in the precondition does not "
                                  "match the object") from None

    async def delete(self, resource: ResourceType, namespace: str | None, name: str,
                     grace_seconds: int | None, precondition_rv: str | None,
                     precondition_uid: str | None, dry_run: bool = False, propagation: str | None = None) -> Reply:
        """Delete now, or — when the object has finalizers, or ``propagation`` (Orphan, Foreground)
        adds one for the garbage collector — mark it deleted and keep it until they are removed."""
        expected = None
        if precondition_rv:
            expected = int(precondition_rv) if str(precondition_rv).isdigit() else -1
        current = await self.current(resource, namespace, name, at_least=max(expected or 0, 0))
        if precondition_uid and _meta(current.obj).get("uid") != precondition_uid:
            raise errors.conflict(resource, name, "the UID in the precondition does not match the object")
        if expected is not None:
            if expected != current.revision:
                raise errors.conflict(resource, name, "the resourceVersion in the precondition does not "
                                      "match the object")
        self._check_deletable(resource, name)
        if dry_run:
            return Reply(200, current.value)
        key = resource.key(namespace, name)
        finalizer = PROPAGATION_FINALIZERS.get(propagation or "Background")
        finalizers = _meta(current.obj).get("finalizers")
        if resource.kind == "Pod" and (current.obj.get("spec") or {}).get("nodeName"):
            # The request's grace period, else the pod's own; zero deletes at once, as Kubernetes
            # documents terminationGracePeriodSeconds: 0 ("delete immediately") — unless finalizers
            # keep the pod: then it is marked with grace 0 and goes with the last of them. A propagation
            # policy does not change how a bound pod stops.
            spec_grace = (current.obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            grace = grace_seconds if grace_seconds is not None else spec_grace
            if grace != 0 or finalizers:
                return await self._delete_gracefully(resource, namespace, name, grace)
        elif finalizer or finalizers:
            return await self._delete_finalized(resource, namespace, name, finalizer)
        if resource.kind == "Namespace":
            await self._delete_namespace_contents(name)
        return Reply(200, (await self._delete_now(resource, name, key, expected)).value)

    async def _delete_finalized(self, resource: ResourceType, namespace: str | None, name: str,
                                finalizer: str | None) -> Reply:
        def mark(current: Record, obj: dict[str, Any]) -> Reply | None:
            meta = obj["metadata"]
            finalizers = list(meta.get("finalizers") or ())
            if meta.get("deletionTimestamp") and (finalizer is None or finalizer in finalizers):
                return Reply(200, current.value)  # already on its way
            if finalizer is not None and finalizer not in finalizers:
                meta["finalizers"] = [*finalizers, finalizer]
            meta.setdefault("deletionTimestamp", now_rfc3339())
            meta.setdefault("deletionGracePeriodSeconds", 0)
            return None

        result = await self._rewrite(resource, namespace, name, mark)
        return result if isinstance(result, Reply) else Reply(200, result.value)

    async def _delete_gracefully(self, resource: ResourceType, namespace: str | None, name: str,
                                 grace: int) -> Reply:
        """A bound pod: mark it Terminating; its agent stops it and reports Terminated. A pod already
        on its way is left as it is, unless this gives it less time: then, as in Kubernetes, its
        deadline is the shorter grace counted from when its deletion was first asked for."""
        def terminate(current: Record, pod: dict[str, Any]) -> Reply | None:
            meta = pod["metadata"]
            start = datetime.now(timezone.utc)
            marked = meta.get("deletionTimestamp")
            if marked:  # marked here or by _delete_finalized: both give it its grace
                given = meta["deletionGracePeriodSeconds"]
                if grace >= given:
                    return Reply(200, current.value)  # already on its way, with no more time than this gives
                start = datetime.fromisoformat(marked) - timedelta(seconds=given)
            deadline = start + timedelta(seconds=grace)
            meta["deletionTimestamp"] = deadline.strftime("%Y-%m-%dT%H:%M:%SZ")
            meta["deletionGracePeriodSeconds"] = grace
            status = pod["status"]  # fresh from _rewrite, even for a pod whose status was cleared
            if status.get("phase") != "Terminated":
                status["phase"] = "Terminating"
            return None

        result = await self._rewrite(resource, namespace, name, terminate)
        return result if isinstance(result, Reply) else Reply(200, result.value)

    async def _delete_namespace_contents(self, namespace: str) -> None:
        from corral.api.resources import RESOURCES

        for resource in RESOURCES:
            if not resource.namespaced:
                continue
            for record in self.cache.items(resource.store_prefix, f"{resource.store_prefix}{namespace}/"):
                try:
                    await self.store.delete(record.key)
                except KeyNotFound:
                    pass

    @staticmethod
    def _check_deletable(resource: ResourceType, name: str) -> None:
        """What every cluster needs may not be deleted: the system namespaces and priority classes."""
        if resource.kind == "Namespace" and name in SYSTEM_NAMESPACES:
            raise errors.forbidden(resource, name, "this namespace may not be deleted")
        if resource.kind == "PriorityClass" and name in SYSTEM_PRIORITY_CLASSES:
            raise errors.forbidden(resource, name, "this is a system priority class: it may not be deleted")

    async def delete_collection(self, resource: ResourceType, namespace: str | None,
                                opts: ListOptions, grace_seconds: int | None, *, dry_run: bool = False) -> Reply:
        await self.cache.wait_consistent()
        deleted = []
        chosen = sorted((record for record in self.cache.items(resource.store_prefix, self._key_prefix(resource, namespace))
                         if opts.labels.matches_object(record.obj) and opts.fields.matches(record.obj)),
                        key=lambda r: r.key)
        for record in chosen:  # all or nothing: one protected object refuses the whole request
            self._check_deletable(resource, record.key.rsplit("/", 1)[-1])
        for record in chosen:
            name = record.key.rsplit("/", 1)[-1]
            ns = _meta(record.obj).get("namespace")
            try:
                reply = await self.delete(resource, ns, name, grace_seconds, None, None, dry_run)
            except errors.ApiError as exc:
                if exc.code == 404:
                    continue
                raise
            deleted.append(reply.body)
        return Reply(200, self._list_body(resource, deleted, self.store.revision, ""))

    # --- binding -----------------------------------------------------------------------------------------

    async def bind(self, namespace: str, pod_name: str | None, binding: Any, opts: WriteOptions) -> Reply:
        """Assign a pod to a node: spec.nodeName, phase Scheduled, PodScheduled=True; 409 if bound."""
        binding_res = by_kind("Binding")
        self._check_kind(binding_res, binding)
        name = pod_name or _meta(binding).get("name")
        if not name:
            raise errors.invalid(binding_res, None, [validation.Cause("metadata.name", validation.REQUIRED,
                                                                      "Required value")])
        if pod_name and _meta(binding).get("name") not in (None, pod_name):
            raise errors.bad_request(
                f"the name of the binding ({_meta(binding).get('name')}) does not match the pod ({pod_name})"
            )
        _, causes = validation.validate(binding_res, {**binding, "metadata": {**_meta(binding), "name": name}})
        if causes:
            raise errors.invalid(binding_res, name, causes)
        node = binding["target"]["name"]
        await self.assign_node(namespace, name, node, dry_run=opts.dry_run)
        return Reply(201, _encode({
            "kind": "Binding", "apiVersion": "v1", "metadata": {"name": name, "namespace": namespace},
            "target": {"kind": "Node", "apiVersion": "v1", "name": node},
        }))

    async def assign_node(self, namespace: str, name: str, node: str, *, dry_run: bool = False,
                          fence: tuple[str, int] | None = None) -> None:
        """The binding itself, for callers inside the server that built a valid one (the scheduler);
        with ``dry_run``, checked and not written.

        ``fence``: the leader's Lease key and revision; the binding is written only while the Lease
        is still there (else :class:`~corral.store.Fenced`)."""
        pods = by_kind("Pod")

        def change(current: Record, pod: dict[str, Any]) -> Reply | None:
            binding.assign(pods, pod, node)
            return _NOT_WRITTEN if dry_run else None

        await self._rewrite(pods, namespace, name, change, fence=fence)

    # --- eviction ----------------------------------------------------------------------------------------

    async def evict_through_api(self, namespace: str, name: str, *, move: bool, grace: int | None,
                                dry_run: bool) -> Reply:
        """``POST pods/NAME/eviction`` (kubectl drain): refused with 429 while a PodDisruptionBudget
        that selects the pod allows no more disruptions (:mod:`corral.server.rest.disruption`); then, as
        Kubernetes does, the pod is deleted gracefully. With ``move`` (corral drain) it is instead
        returned to Pending, the same pod, for the scheduler to place elsewhere (:meth:`evict`)."""
        pods, pdbs = by_kind("Pod"), by_kind("PodDisruptionBudget")
        async with self._evicting:
            pod = (await self.current(pods, namespace, name, consistent=True)).obj

            def namespace_pods() -> Iterator[dict[str, Any]]:  # read only if a budget selects the pod
                for record in self.cache.items(pods.store_prefix, self._key_prefix(pods, namespace)):
                    yield record.obj

            budgets = disruption.budgets_for(
                pod, [r.obj for r in self.cache.items(pdbs.store_prefix, self._key_prefix(pdbs, namespace))],
                namespace_pods())
            why = disruption.refusal(pod, budgets)
            if why is not None:
                raise errors.ApiError(429, "TooManyRequests", why, {
                    "name": name, "kind": "pods", "causes": [{"reason": "DisruptionBudget", "message": why}]})
            if not dry_run:
                if move:
                    await self.evict(namespace, name, "Evicted", "evicted through the API")
                else:
                    await self.delete(pods, namespace, name, grace, None, None)
        return Reply(201, errors.status_body(201, "", "", status="Success"))

    async def evict(self, namespace: str, name: str, reason: str, message: str) -> Reply:
        """Take a pod off its node and back to Pending, for the scheduler to place again.

        corral's eviction moves the pod (there is no ReplicaSet to recreate it): spec.nodeName is
        cleared, the phase returns to Pending with PodScheduled=False, and the agent that ran it
        sees it leave and stops its copy. A pod that is being deleted is left to finish, and one that
        has finished (Succeeded or Failed) is never placed again: it stays as it ended.
        """
        def unbind(current: Record, pod: dict[str, Any]) -> Reply | None:
            if _meta(pod).get("deletionTimestamp") or not (pod.get("spec") or {}).get("nodeName"):
                return Reply(200, current.value)  # being deleted, or not on a node: nothing to move
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                return Reply(200, current.value)  # its work is done: running it again would repeat it
            node = pod["spec"].pop("nodeName")
            status = pod.setdefault("status", {})
            status["phase"] = "Pending"
            status["reason"], status["message"] = reason, f"{message} (was on node {node})"
            for key in ("containerStatuses", "hostIP", "podIP", "podIPs", "startTime"):
                status.pop(key, None)
            status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": reason,
                                     "message": status["message"], "lastTransitionTime": now_rfc3339()}]
            return None

        result = await self._rewrite(by_kind("Pod"), namespace, name, unbind)
        return result if isinstance(result, Reply) else Reply(201, result.value)
