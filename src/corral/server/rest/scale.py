"""The ``scale`` subresource of ReplicaSets and Deployments (``kubectl scale``, autoscalers).

An ``autoscaling/v1`` Scale is a view of the workload: ``spec.replicas`` from its spec,
``status.replicas`` and the selector (as a string) from its status. GET reads it; PUT and PATCH (of
any patch type) change the workload's ``spec.replicas`` and nothing else, through the workload's own
update path (validation, admission, compare-and-swap), and answer with the new Scale.
"""

from __future__ import annotations

from typing import Any

import msgspec

from corral.api.patch import PatchError, json_patch, merge_patch, strategic_merge_patch
from corral.api.resources import ResourceType
from corral.api.selectors import selector_string
from corral.api.validation import INVALID, REQUIRED, Cause
from corral.server import errors
from corral.server.rest import Reply, ResourceAPI, WriteOptions

__all__ = ["get_scale", "write_scale"]

_decode = msgspec.json.decode
_encode = msgspec.json.encode


def _scale(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                     if k in meta},
        "spec": {"replicas": spec.get("replicas", 1)},
        "status": {"replicas": status.get("replicas", 0), "selector": selector_string(spec.get("selector"))},
    }


async def get_scale(api: ResourceAPI, resource: ResourceType, namespace: str | None, name: str) -> Reply:
    current = await api.current(resource, namespace, name)
    return Reply(200, _encode(_scale(current.obj)))


async def write_scale(api: ResourceAPI, resource: ResourceType, namespace: str | None, name: str, body: Any,
                      opts: WriteOptions, patch_type: str | None = None) -> Reply:
    """PUT (``patch_type`` None: ``body`` is the new Scale) or PATCH of the Scale."""
    current = await api.current(resource, namespace, name)
    scale = _scale(current.obj)
    try:
        if patch_type is None:
            wanted = body
        elif patch_type == "json":
            wanted = json_patch(scale, body)
        elif patch_type == "strategic":
            wanted = strategic_merge_patch(scale, body, {})
        else:
            if not isinstance(body, dict):
                raise PatchError("a merge patch must be a JSON object")
            wanted = merge_patch(scale, body)
    except PatchError as exc:
        raise errors.ApiError(422, "Invalid", f"the patch could not be applied: {exc}") from None
    if not isinstance(wanted, dict) or wanted.get("kind") not in (None, "Scale"):
        raise errors.bad_request("the body of a scale subresource must be a Scale (autoscaling/v1)")
    spec = wanted.get("spec")
    replicas = spec.get("replicas") if isinstance(spec, dict) else None
    if replicas is None:
        raise errors.invalid(resource, name, [Cause("spec.replicas", REQUIRED, "Required value")])
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.invalid(resource, name, [Cause("spec.replicas", INVALID, f"Invalid value: {replicas!r}: "
                                                    "must be a non-negative integer")])
    change: dict[str, Any] = {"spec": {"replicas": replicas}}
    pinned = (wanted.get("metadata") or {}).get("resourceVersion") if isinstance(wanted.get("metadata"), dict) else None
    if patch_type is None and pinned:
        change["metadata"] = {"resourceVersion": pinned}  # a PUT pins the version it read
    reply = await api.patch(resource, namespace, name, change, "merge", opts)
    return Reply(200, _encode(_scale(_decode(reply.body))), reply.warnings)
