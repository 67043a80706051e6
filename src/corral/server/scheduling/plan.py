"""``/corral/v1/plan``: a dry run of manifests against the running scheduler's view of the cluster.

``POST`` takes a PlanRequest (the manifests, what-ifs, optionally another scheduler configuration)
and answers the plan (:mod:`corral.plan`); ``GET`` answers the plan version now, which
``corral apply --if-plan-version`` compares with the plan's. Both are non-resource URLs: RBAC
grants them (``corral:planner``, or cluster-admin), since a plan shows every node and where pods
run. Each manifest and each pod it makes passes the same validation, defaults and admission as a
create with ``dryRun``, as the requesting user; nothing is written. With the scheduler in a
process of its own, that happens here and the pods are decided there (:mod:`corral.plan.place`).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any, Awaitable, Callable

import msgspec
from aiohttp import web

from corral.api.resources import UnknownResource, by_kind
from corral.plan import PLAN_PATH, PLAN_VERSION_PATH
from corral.plan.expand import Expansion, PlanInputError, expand
from corral.plan.place import PlanInvalid, asked, checked_config, configured, copy_of, place, version_of
from corral.plan.request import PlanRequest, parse_request
from corral.scheduler.process import SchedulerProcess
from corral.scheduler.scheduler import Scheduler
from corral.server import errors
from corral.server.http.routes import USER, read_body
from corral.server.rest import ResourceAPI, WriteOptions

__all__ = ["PLAN_PATH", "PLAN_VERSION_PATH", "plan_version", "make_plan", "plan_version_apart", "make_plan_apart"]

PLAN_SECONDS = 120.0  # how long a scheduler process may take to answer a plan (10,000 pods: ~10 s)


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
    return _version_body(version_of(scheduler), revision)


def _version_body(version: str, revision: int) -> bytes:
    return msgspec.json.encode({"kind": "PlanVersion", "apiVersion": "corral.dev/v1", "planVersion": version,
                                "resourceVersion": str(revision)})


async def _plan_request(request: web.Request) -> PlanRequest:
    body = await read_body(request)
    try:
        if isinstance(body, dict) and "manifests" in body:  # YAML text: decoded off the event loop
            return await asyncio.to_thread(parse_request, body)
        return parse_request(body)
    except PlanInputError as exc:
        raise _invalid(exc.path, exc.message) from None


async def _expanded(api: ResourceAPI, request: web.Request, req: PlanRequest, nodes: list[dict[str, Any]]) -> Expansion:
    try:
        return await expand(req.items, _admission(api, request[USER], req), nodes)
    except PlanInputError as exc:
        raise _invalid(exc.path, exc.message) from None


async def make_plan(request: web.Request, scheduler: Scheduler, api: ResourceAPI, revision: int) -> bytes:
    """The plan for the request's body, as JSON (422 naming the field for bad input)."""
    req = await _plan_request(request)
    try:
        config, same = configured(scheduler, req.scheduler_config)
        # The copy is taken in one step of the event loop: the cluster at one revision.
        snap = copy_of(scheduler, config, same, revision)
        version = version_of(scheduler)
        table = snap.cache.table
        expansion = await _expanded(api, request, req, [table.objects[int(r)] for r in table.valid_rows()])
        report = await place(scheduler, snap, same, version, revision, expansion.pods,
                             without=req.without_nodes, add=req.add_nodes)
    except PlanInvalid as exc:
        raise _invalid(exc.field, exc.message) from None
    report["notes"] = expansion.notes + report["notes"]
    return msgspec.json.encode(report)


async def plan_version_apart(process: SchedulerProcess, api: ResourceAPI) -> bytes:
    """The plan version, asked of a scheduler in its own process."""
    revision = api.cache.revision  # the child is given every change up to here before the question
    return _version_body(await process.ask("plan_version"), revision)


async def make_plan_apart(request: web.Request, process: SchedulerProcess, api: ResourceAPI) -> bytes:
    """:func:`make_plan` with the scheduler in its own process: the manifests are read, expanded and
    admitted here (as the requesting user), and the pods they make are decided there, on a copy of
    its state taken once every change this server had seen reached it."""
    req = await _plan_request(request)
    try:
        if req.scheduler_config is not None:  # refused before anything is expanded, as beside the scheduler
            checked_config(req.scheduler_config)
    except PlanInvalid as exc:
        raise _invalid(exc.field, exc.message) from None
    expansion = await _expanded(api, request, req, [r.obj for r in api.cache.items(by_kind("Node").store_prefix)])
    question = asked(api.cache.revision, expansion.pods, req.without_nodes, req.add_nodes, req.scheduler_config)
    answer = await process.ask("plan", question, timeout=PLAN_SECONDS)
    if answer[0] == "invalid":
        raise _invalid(answer[1], answer[2])
    report = answer[1]
    report["notes"] = expansion.notes + report["notes"]
    return msgspec.json.encode(report)
