"""``/corral/v1/plan``: a dry run of manifests against the running scheduler's view of the cluster.

``POST`` takes a PlanRequest (the manifests, what-ifs, optionally another scheduler configuration)
and answers the plan (:mod:`corral.plan`); ``GET`` answers the plan version now, which
``corral apply --if-plan-version`` compares with the plan's. Both are non-resource URLs: RBAC
grants them (``corral:planner``, or cluster-admin), since a plan shows every node and where pods
run. Each manifest and each pod it makes passes the same validation, defaults and admission as a
create with ``dryRun``, as the requesting user; nothing is written.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any, Awaitable, Callable

import msgspec
from aiohttp import web

from corral.api.resources import UnknownResource, by_kind
from corral.plan import PLAN_PATH, PLAN_VERSION_PATH
from corral.plan.dry_run import apply_what_ifs, fingerprint, run, snapshot, zone_usage
from corral.plan.expand import PlanInputError, expand
from corral.plan.request import parse_request
from corral.scheduler.profiles import ConfigError, parse_config
from corral.scheduler.scheduler import Scheduler, node_signature
from corral.server import errors
from corral.server.http import USER, read_body
from corral.server.rest import ResourceAPI, WriteOptions

__all__ = ["PLAN_PATH", "PLAN_VERSION_PATH", "plan_version", "make_plan"]


def _invalid(field: str, message: str) -> errors.ApiError:
    text = f"PlanRequest is invalid: {field}: {message}" if field else f"PlanRequest is invalid: {message}"
    return errors.ApiError(422, "Invalid", text, {
        "kind": "PlanRequest", "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}]})


def _within(exc: errors.ApiError, where: str) -> errors.ApiError:
    """An error about one manifest, with its place in the request in the message and field paths."""
    details = copy.deepcopy(exc.details) if exc.details else {}
    for cause in details.get("causes") or ():
        cause["field"] = f"{where}.{cause['field']}" if cause.get("field") else where
    return errors.ApiError(exc.code, exc.reason, f"{where}: {exc.message}", details or None)


def _admission(api: ResourceAPI, user: Any, req: Any) -> Callable[[str, dict[str, Any], str], Awaitable[dict[str, Any]]]:
    """What each manifest and each pod it makes go through: the server's validation, defaults and
    admission as ``user``, with ``dryRun`` (nothing written); refusals name ``items[i]``. What goes in
    a namespace the manifests themselves create is judged as if it existed (as `corral apply` judges
    it once the namespace is made)."""
    made_here = {((i.get("metadata") or {}).get("name")) for i in req.items
                 if isinstance(i, dict) and i.get("kind") == "Namespace" and isinstance(i.get("metadata"), dict)}

    async def admit(kind: str, obj: dict[str, Any], where: str) -> dict[str, Any]:
        try:
            resource = by_kind(kind)
        except UnknownResource:
            raise _invalid(f"{where}.kind", f'corral does not serve kind "{kind}"') from None
        obj = copy.deepcopy(obj)
        meta = obj.get("metadata")
        namespace = None
        if resource.namespaced and isinstance(meta, dict):
            namespace = meta.get("namespace") or req.namespace
            meta["namespace"] = namespace
            if namespace in made_here and api.cache.get(by_kind("Namespace").key(None, namespace)) is None:
                meta["namespace"] = "default"  # judged in one that exists; nothing in admission depends on which
        try:
            reply = await api.create(resource, None, obj, WriteOptions(dry_run=True, user=user))
        except errors.ApiError as exc:
            raise _within(exc, where) from None
        admitted = msgspec.json.decode(reply.body)
        if namespace is not None:
            admitted["metadata"]["namespace"] = namespace
        return admitted

    return admit


def plan_version(scheduler: Scheduler, revision: int) -> bytes:
    return msgspec.json.encode({"kind": "PlanVersion", "apiVersion": "corral.dev/v1",
                                "planVersion": fingerprint(scheduler.cache, node_signature),
                                "resourceVersion": str(revision)})


async def make_plan(request: web.Request, scheduler: Scheduler, api: ResourceAPI, revision: int) -> bytes:
    """The plan for the request's body, as JSON (422 naming the field for bad input)."""
    body = await read_body(request)
    try:
        if isinstance(body, dict) and "manifests" in body:  # YAML text: decoded off the event loop
            req = await asyncio.to_thread(parse_request, body)
        else:
            req = parse_request(body)
    except PlanInputError as exc:
        raise _invalid(exc.path, exc.message) from None
    config, same = scheduler.config, True
    if req.scheduler_config is not None:
        try:
            config, same = parse_config(req.scheduler_config, "schedulerConfig"), False
        except ConfigError as exc:
            raise _invalid("schedulerConfig", str(exc)) from None
    # The copy is taken in one step of the event loop: the cluster at one revision.
    try:
        snap = snapshot(scheduler.cache, scheduler.frameworks, config, revision,
                        ignored_resources=scheduler.extenders.ignored_resources(), same_config=same)
    except ConfigError as exc:
        raise _invalid("schedulerConfig", str(exc)) from None
    version = fingerprint(scheduler.cache, node_signature)
    admit = _admission(api, request[USER], req)
    table = snap.cache.table
    nodes = [table.objects[int(r)] for r in table.valid_rows()]
    before = zone_usage(snap.cache)
    try:
        expansion = await expand(req.items, admit, nodes)
        displaced = apply_what_ifs(snap, without=req.without_nodes, add=req.add_nodes)
    except PlanInputError as exc:
        raise _invalid(exc.path, exc.message) from None
    except KeyError as exc:
        raise _invalid("withoutNodes", f"no node {exc.args[0]!r} in the cluster") from None
    report = await run(snap, expansion.pods, displaced=displaced, extenders=scheduler.extenders if same else None,
                       before=before)
    report = {"kind": "Plan", "apiVersion": "corral.dev/v1", "resourceVersion": str(revision),
              "planVersion": version, **report, "notes": expansion.notes + report["notes"]}
    if not same:
        report["notes"].append("decided with the given scheduler configuration: another tie-break sequence "
                               "than the running scheduler's")
    if scheduler.extenders:
        report["notes"].append("scheduler extenders were asked to filter and score" if same else
                               "scheduler extenders were not asked (another configuration was given)")
    return msgspec.json.encode(report)
