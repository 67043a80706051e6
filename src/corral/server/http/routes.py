"""The HTTP face of the API: Kubernetes paths and query parameters onto :class:`ResourceAPI`.

Paths: ``/api/v1/{plural}[/{name}[/{sub}]]``, ``/api/v1/namespaces/{ns}/{plural}[/{name}[/{sub}]]`` and
the same under ``/apis/{group}/{version}``. Watches stream one JSON event per line. Every error
leaves as a ``Status`` object.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass
from typing import Any

import msgspec
from aiohttp import web

from corral.api.wire import protobuf
from corral.api.wire.decoding import DecodeError, decode_json, decode_yaml
from corral.api.resources import PROPAGATION_FINALIZERS, ResourceType, by_plural
from corral.api.selectors import SelectorError, parse_field_selector, parse_label_selector
from corral.api.validation import MAX_GRACE_SECONDS
from corral.server import errors
from corral.server.http import tables
from corral.server.agents import AgentConnector, MetricsAPI, proxy_logs, streams
from corral.server.authz.review import Reviews
from corral.server.watch import CacheWatcher, TooOld
from corral.server.flowcontrol import InflightLimits
from corral.server.http.params import flag as _flag, int_param as _int_param
from corral.server.rest import ListOptions, Reply, ResourceAPI, WriteOptions
from corral.server.rest.scale import get_scale, write_scale

__all__ = ["add_resource_routes", "MAX_BODY_BYTES", "VERB", "RESOURCE", "USER"]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 3 * 1024 * 1024  # Kubernetes' limit
OFF_LOOP_BYTES = 256 * 1024  # bodies larger than this are decoded in a thread
BOOKMARK_INTERVAL = 10.0
WATCH_WRITE_SECONDS = 30.0  # a watch client that takes no bytes for this long is disconnected
WATCH_CHUNK_BYTES = 16 * 1024  # encoded and written at a time: one TLS record (64 KiB held 2x the memory per watch)
DEFAULT_WATCH_TIMEOUT = 1800.0
_encode = msgspec.json.Encoder().encode
JSON = "application/json"
# What a request did, for the metrics middleware.
VERB = web.RequestKey("verb", str)
RESOURCE = web.RequestKey("resource", str)
USER = web.RequestKey("user", object)  # the authenticated UserInfo, set before any handler runs


@dataclass(frozen=True, slots=True)
class Target:
    resource: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


def parse_target(group: str, version: str, tail: str) -> Target:
    """The resource, namespace, name and subresource a path names; 404 if none."""
    segs = [s for s in tail.split("/") if s]
    namespace = None
    if len(segs) >= 3 and segs[0] == "namespaces":
        candidate = by_plural(group, segs[2])
        if candidate is not None and candidate.namespaced:
            namespace, segs = segs[1], segs[2:]
    if not segs or len(segs) > 3:
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    resource = by_plural(group, segs[0])
    if resource is None or resource.version != version:
        raise errors.ApiError(404, "NotFound",
                              f'the server could not find the requested resource ("{segs[0]}" in '
                              f'{group + "/" if group else ""}{version})')
    name = segs[1] if len(segs) > 1 else None
    sub = segs[2] if len(segs) > 2 else None
    if sub is not None and sub not in resource.subresources:
        raise errors.ApiError(404, "NotFound", f'{resource.plural} has no subresource "{sub}"')
    if resource.namespaced and namespace is None and name is not None:
        raise errors.ApiError(404, "NotFound", f"{resource.plural} are namespaced: use /namespaces/{{ns}}/{resource.plural}/{name}")
    return Target(resource, namespace, name, sub)


def _list_options(request: web.Request, resource: ResourceType) -> ListOptions:
    try:
        labels = parse_label_selector(request.query.get("labelSelector"))
    except SelectorError as exc:
        raise errors.bad_request(f"labelSelector: {exc}") from None
    try:
        fields = parse_field_selector(request.query.get("fieldSelector"), resource.field_selectors)
    except SelectorError as exc:
        raise errors.bad_request(f"fieldSelector: {exc}") from None
    _int_param(request, "timeoutSeconds")  # a list takes it too; malformed, it is a 400 there as well
    _flag(request, "allowWatchBookmarks")
    limit = _int_param(request, "limit") or 0
    if limit < 0:
        raise errors.bad_request("limit must not be negative")
    rv = request.query.get("resourceVersion", "")
    if rv and not (rv.isascii() and rv.isdigit() and len(rv) <= 19):
        raise errors.bad_request(f"resourceVersion must be a revision (a non-negative integer), got {rv[:40]!r}")
    cont = request.query.get("continue", "")
    match = request.query.get("resourceVersionMatch", "")
    if match:  # as Kubernetes validates it
        if match not in ("Exact", "NotOlderThan"):
            raise errors.bad_request(f'resourceVersionMatch: Unsupported value: "{match[:40]}": supported values: '
                                     '"Exact", "NotOlderThan"')
        if not rv:
            raise errors.bad_request("resourceVersionMatch is forbidden unless resourceVersion is provided")
        if cont:
            raise errors.bad_request("resourceVersionMatch is forbidden when continue is provided")
        if match == "Exact" and int(rv) == 0:
            raise errors.bad_request('resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
    return ListOptions(labels, fields, limit, cont, int(rv or 0), match == "Exact")


def _dry_run(values: Any, where: str = "dryRun") -> bool:
    """Kubernetes' dryRun: absent, or ``All``; anything else is refused (never taken as a real write)."""
    for value in values:
        if value != "All":
            raise errors.bad_request(f'{where}: Unsupported value: {msgspec.json.encode(value).decode()}: '
                                     'supported values: "All"')
    return bool(values)


def _grace(seconds: int | None) -> int | None:
    """A delete's grace period: 0 (at once) up to the longest a pod may declare."""
    if seconds is not None and not 0 <= seconds <= MAX_GRACE_SECONDS:
        raise errors.bad_request(f"gracePeriodSeconds must be between 0 and {MAX_GRACE_SECONDS}, got {seconds}")
    return seconds


def _propagation(policy: Any, orphan_dependents: Any = None) -> str | None:
    """A delete's propagationPolicy (or the older orphanDependents): what happens to what the object owns."""
    if policy is None or policy == "":
        return "Orphan" if orphan_dependents is True else None
    if not isinstance(policy, str) or policy not in PROPAGATION_FINALIZERS:
        raise errors.ApiError(422, "Invalid", f'propagationPolicy: Unsupported value: {msgspec.json.encode(policy).decode()}: '
                              'supported values: "Foreground", "Background", "Orphan"')
    return policy


def _delete_options(raw: bytes, content_type: str = "application/json") -> dict[str, Any]:
    """A DeleteOptions body (JSON, or protobuf as kubectl's typed clients send it), its fields'
    types checked (a wrong one is a 400, never a 500)."""
    try:
        opts = protobuf.decode_object(raw) if content_type == protobuf.CONTENT_TYPE else decode_json(raw)
    except protobuf.ProtobufError as exc:
        raise errors.ApiError(415, "UnsupportedMediaType", f"the protobuf DeleteOptions cannot be read: {exc}") from None
    except DecodeError as exc:
        raise errors.bad_request(f"the DeleteOptions body is {exc}") from None
    if not isinstance(opts, dict):
        raise errors.bad_request("the DeleteOptions body must be a JSON object")
    return _checked_delete_options(opts)


def _checked_delete_options(opts: dict[str, Any]) -> dict[str, Any]:
    grace = opts.get("gracePeriodSeconds")
    if grace is not None and (not isinstance(grace, int) or isinstance(grace, bool)):
        raise errors.bad_request(f"DeleteOptions.gracePeriodSeconds must be an integer, got {grace!r}")
    pre = opts.get("preconditions")
    if pre is not None and not (isinstance(pre, dict) and all(isinstance(pre.get(k), (str, type(None)))
                                                            for k in ("resourceVersion", "uid"))):
        raise errors.bad_request("DeleteOptions.preconditions must be an object of resourceVersion and uid strings")
    dry = opts.get("dryRun")
    if dry is not None and not isinstance(dry, list):
        raise errors.bad_request(f"DeleteOptions.dryRun must be a list, got {dry!r}")
    return opts


def _write_options(request: web.Request) -> WriteOptions:
    validation = request.query.get("fieldValidation", "Warn")
    if validation not in ("Warn", "Strict", "Ignore", ""):
        raise errors.bad_request(f'fieldValidation must be one of Ignore, Warn, Strict, got "{validation}"')
    return WriteOptions(strict=validation == "Strict", warn=validation != "Ignore",
                        dry_run=_dry_run(request.query.getall("dryRun", ())), user=request.get(USER))


async def read_body(request: web.Request, *, max_yaml_bytes: int = MAX_BODY_BYTES) -> Any:
    """The decoded request body (JSON, or YAML by content type, or protobuf for the kinds that have
    a schema), bounded as :mod:`corral.api.wire.decoding` says; 400 / 413 / 415 with a Status. YAML
    bodies are limited to ``max_yaml_bytes`` (the largest object the store takes) since decoding
    YAML costs a hundred times what JSON does; bodies past ``OFF_LOOP_BYTES`` are decoded in a
    thread, so no request holds the event loop for its whole decoding."""
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise errors.too_large(MAX_BODY_BYTES)
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise errors.too_large(MAX_BODY_BYTES) from None
    if not raw.strip():
        raise errors.bad_request("the request body is empty")
    if request.content_type == protobuf.CONTENT_TYPE:
        try:
            return protobuf.decode_object(raw)
        except protobuf.ProtobufError as exc:
            raise errors.ApiError(415, "UnsupportedMediaType", f"the protobuf request body cannot be read: {exc}") from None
    decode = decode_json
    if "yaml" in request.content_type:
        if len(raw) > max_yaml_bytes:
            raise errors.ApiError(413, "RequestEntityTooLarge", f"the YAML request body is too large: the limit is "
                                  f"{max_yaml_bytes} bytes (the largest object the server stores; send JSON)")
        decode = decode_yaml
    try:
        return await asyncio.to_thread(decode, raw) if len(raw) > OFF_LOOP_BYTES else decode(raw)
    except DecodeError as exc:
        raise errors.bad_request(f"the request body is {exc}") from None


PATCH_TYPES = {"application/json-patch+json": "json", "application/merge-patch+json": "merge",
               "application/strategic-merge-patch+json": "strategic"}


def _unsupported_patch(content_type: str) -> errors.ApiError:
    supported = ", ".join(PATCH_TYPES)
    if content_type.startswith("application/apply-patch"):
        message = (f"server-side apply ({content_type}) is not supported: apply from the client (kubectl apply "
                   f"without --server-side) or send one of {supported}")
    else:
        message = f"the patch type {content_type or '(none)'!r} is not supported; use one of {supported}"
    return errors.ApiError(415, "UnsupportedMediaType", message)


MAX_WARNINGS = 20  # Warning headers on one response; past it, one more says how many were left out
MAX_WARNING_CHARS = 512


def _warning_header(text: str) -> str:
    """A Warning header's value: the text quoted, control characters escaped (a client's field names
    end up here: a newline would split the header, and aiohttp refuses to send one), cut short."""
    text = "".join(c if c >= " " and c != "\x7f" else f"\\u{ord(c):04x}" for c in text).replace('"', "'")
    if len(text) > MAX_WARNING_CHARS:
        text = text[:MAX_WARNING_CHARS] + "..."
    return f'299 - "{text}"'


def respond(reply: Reply) -> web.Response:
    resp = web.Response(body=reply.body, status=reply.code, content_type=JSON)
    warnings = reply.warnings
    if len(warnings) > MAX_WARNINGS:
        warnings = [*warnings[:MAX_WARNINGS - 1], f"{len(warnings) - MAX_WARNINGS + 1} more warnings not shown"]
    for w in warnings:
        resp.headers.add("Warning", _warning_header(w))
    return resp


def _rendering(request: web.Request, *, listing: bool) -> tables.Rendering | None:
    """The Table or metadata-only rendering the client's Accept header asks for (None: the object)."""
    return tables.negotiate(request.headers.get("Accept", ""), request.query.get("includeObject"), listing=listing)


def _verb(request: web.Request, resource: ResourceType, verb: str) -> None:
    """Record what the request does (for the metrics) and refuse what the resource does not serve."""
    request[VERB] = verb
    if verb not in resource.verbs:
        raise errors.method_not_allowed(request.method, f"{resource.plural} ({verb})")


class ResourceRoutes:
    def __init__(self, api: ResourceAPI, reviews: Reviews, agents: AgentConnector, inflight: InflightLimits) -> None:
        self.api = api
        self.reviews = reviews
        self.agents = agents
        self.inflight = inflight

    async def read_body(self, request: web.Request) -> Any:
        return await read_body(request, max_yaml_bytes=self.api.store.max_value_bytes or MAX_BODY_BYTES)

    async def core(self, request: web.Request) -> web.StreamResponse:
        return await self.dispatch(request, parse_target("", request.match_info["version"], request.match_info["tail"]))

    async def grouped(self, request: web.Request) -> web.StreamResponse:
        target = parse_target(request.match_info["group"], request.match_info["version"], request.match_info["tail"])
        return await self.dispatch(request, target)

    async def dispatch(self, request: web.Request, t: Target) -> web.StreamResponse:
        api, method, res = self.api, request.method, t.resource
        request[RESOURCE] = res.plural
        if t.name is None:  # the collection
            if method == "GET":
                if _flag(request, "watch"):
                    _verb(request, res, "watch")
                    with self.inflight.watching(request[USER].name):
                        return await self.watch(request, t)
                _verb(request, res, "list")
                rendering = _rendering(request, listing=True)
                reply = await api.list(res, t.namespace, _list_options(request, res))
                if rendering is not None:  # a large list is rendered off the loop, as large bodies are decoded
                    render = functools.partial(tables.render_list, res, reply.body, rendering)
                    reply.body = await asyncio.to_thread(render) if len(reply.body) > OFF_LOOP_BYTES else render()
                return respond(reply)
            if method == "POST":
                _verb(request, res, "create")
                body = await self.read_body(request)
                if res.group == "authorization.k8s.io":
                    user = request[USER]
                    answer = self.reviews.answer(res.kind, body, user.name, user.groups)  # type: ignore[attr-defined]
                    return web.Response(body=_encode(answer), status=201, content_type=JSON)
                if res.kind == "Binding":
                    return respond(await api.bind(t.namespace or "default", None, body, _write_options(request)))
                return respond(await api.create(res, t.namespace, body, _write_options(request)))
            if method == "DELETE":
                _verb(request, res, "deletecollection")
                grace = _grace(_int_param(request, "gracePeriodSeconds"))
                dry_run = _dry_run(request.query.getall("dryRun", ()))
                return respond(await api.delete_collection(res, t.namespace, _list_options(request, res), grace,
                                                           dry_run=dry_run))
            raise errors.method_not_allowed(method, res.plural)
        if t.subresource == "eviction":
            if method != "POST":
                raise errors.method_not_allowed(method, "pods/eviction")
            request[VERB] = "create"
            return respond(await self._evict(request, t))
        if t.subresource == "log":
            if method != "GET":
                raise errors.method_not_allowed(method, "pods/log")
            request[VERB] = "get"
            return await proxy_logs(request, api, self.agents, t.namespace or "default", t.name)
        if t.subresource in ("exec", "attach", "portforward"):
            request[VERB] = "create"
            with self.inflight.watching(request[USER].name):
                if t.subresource == "portforward":
                    return await streams.portforward_stream(request, api, self.agents, t.namespace or "default", t.name)
                return await streams.exec_stream(request, api, self.agents, t.namespace or "default", t.name,
                                                 attach=t.subresource == "attach")
        if t.subresource == "binding":
            if method != "POST":
                raise errors.method_not_allowed(method, "pods/binding")
            request[VERB] = "create"
            return respond(await api.bind(t.namespace or "default", t.name, await self.read_body(request),
                                          _write_options(request)))
        if t.subresource == "scale":
            return respond(await self._scale(request, t))
        if method == "GET":
            _verb(request, res, "get")
            rendering = _rendering(request, listing=False)
            reply = await api.get(res, t.namespace, t.name)
            if rendering is not None:
                reply.body = tables.render_object(res, reply.body, rendering)
            return respond(reply)
        if method == "PUT":
            _verb(request, res, "update")
            return respond(await api.update(res, t.namespace, t.name, await self.read_body(request),
                                            _write_options(request), t.subresource))
        if method == "PATCH":
            _verb(request, res, "patch")
            patch_type = PATCH_TYPES.get(request.content_type)
            if patch_type is None:
                raise _unsupported_patch(request.content_type)
            body = await self.read_body(request)
            if patch_type == "json" and not isinstance(body, list):
                # A JSON patch is always a list; old official Python clients label every patch
                # body json-patch, so an object body is taken as the merge patch it must be.
                patch_type = "merge"
            return respond(await api.patch(res, t.namespace, t.name, body, patch_type,
                                           _write_options(request), t.subresource))
        if method == "DELETE":
            _verb(request, res, "delete")
            grace = _grace(_int_param(request, "gracePeriodSeconds"))
            pre_rv = pre_uid = None
            dry_run = _dry_run(request.query.getall("dryRun", ()))
            propagation = _propagation(request.query.get("propagationPolicy"), _flag(request, "orphanDependents"))
            if request.can_read_body:
                raw = await request.read()
                if raw.strip():
                    opts = _delete_options(raw, request.content_type)
                    if opts.get("gracePeriodSeconds") is not None and grace is None:
                        grace = _grace(opts["gracePeriodSeconds"])
                    pre = opts.get("preconditions") or {}
                    pre_rv, pre_uid = pre.get("resourceVersion"), pre.get("uid")
                    dry_run = _dry_run(opts.get("dryRun") or (), "DeleteOptions.dryRun") or dry_run
                    propagation = _propagation(opts.get("propagationPolicy"), opts.get("orphanDependents")) or propagation
            return respond(await api.delete(res, t.namespace, t.name, grace, pre_rv, pre_uid, dry_run, propagation))
        raise errors.method_not_allowed(method, f"{res.plural}/{t.name}")

    async def _scale(self, request: web.Request, t: Target) -> Reply:
        res, method = t.resource, request.method
        if method == "GET":
            _verb(request, res, "get")
            return await get_scale(self.api, res, t.namespace, t.name)
        if method == "PUT":
            _verb(request, res, "update")
            return await write_scale(self.api, res, t.namespace, t.name, await self.read_body(request),
                                     _write_options(request))
        if method == "PATCH":
            _verb(request, res, "patch")
            patch_type = PATCH_TYPES.get(request.content_type)
            if patch_type is None:
                raise _unsupported_patch(request.content_type)
            return await write_scale(self.api, res, t.namespace, t.name, await self.read_body(request),
                                     _write_options(request), patch_type)
        raise errors.method_not_allowed(method, f"{res.plural}/scale")

    async def _evict(self, request: web.Request, t: Target) -> Reply:
        """An Eviction (JSON, or protobuf from kubectl drain): its deleteOptions' grace period and
        dry run; ``?move=true`` is corral's own (corral drain): the pod returns to Pending instead
        of being deleted."""
        grace, dry_run = None, _dry_run(request.query.getall("dryRun", ()))
        if request.can_read_body:
            body = await self.read_body(request)
            if not isinstance(body, dict) or body.get("kind") not in (None, "Eviction"):
                raise errors.bad_request("the body of pods/eviction must be an Eviction (policy/v1)")
            opts = body.get("deleteOptions") or {}
            if not isinstance(opts, dict):
                raise errors.bad_request("Eviction.deleteOptions must be an object")
            opts = _checked_delete_options(opts)
            grace = _grace(opts.get("gracePeriodSeconds"))
            dry_run = _dry_run(opts.get("dryRun") or (), "Eviction.deleteOptions.dryRun") or dry_run
        return await self.api.evict_through_api(t.namespace or "default", t.name, move=_flag(request, "move"),
                                                grace=grace, dry_run=dry_run)

    async def watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        res = t.resource
        opts = _list_options(request, res)  # which has checked resourceVersion: absent or ASCII digits
        if request.query.get("resourceVersionMatch"):
            raise errors.bad_request("resourceVersionMatch is forbidden for watch")
        rv_raw = request.query.get("resourceVersion", "")
        from_revision = int(rv_raw) if rv_raw not in ("", "0") else None
        timeout = float(_int_param(request, "timeoutSeconds") or DEFAULT_WATCH_TIMEOUT)
        bookmarks = _flag(request, "allowWatchBookmarks")
        rendering = _rendering(request, listing=False)
        first = True  # a Table's column definitions go with the first event only
        prefix = f"{res.store_prefix}{t.namespace}/" if res.namespaced and t.namespace else res.store_prefix
        watcher = CacheWatcher(prefix, opts.fields.exact("metadata.name"), opts.labels, opts.fields)
        cache = self.api.cache
        if from_revision is None:
            await cache.wait_consistent()
        else:  # a version read through another server: this cache must have reached it too
            await self.api.reach(from_revision)
        resp = web.StreamResponse(headers={"Content-Type": JSON})
        resp.enable_chunked_encoding()
        try:
            cache.watch(res.store_prefix, watcher, from_revision)
        except TooOld as exc:
            # Kubernetes answers an expired watch with 200 and a single ERROR event.
            await resp.prepare(request)
            status = errors.gone(str(exc)).body()
            await resp.write(b'{"type":"ERROR","object":' + status + b"}\n")
            return resp
        try:
            await resp.prepare(request)
            deadline = time.monotonic() + timeout
            next_bookmark = time.monotonic() + BOOKMARK_INTERVAL
            while not watcher.closed or watcher.pending():
                now = time.monotonic()
                if now >= deadline:
                    break
                if not watcher.pending():
                    try:
                        await asyncio.wait_for(watcher.wakeup.wait(),
                                               min(deadline, next_bookmark) - now)
                    except asyncio.TimeoutError:
                        pass
                transport = request.transport
                if transport is None or transport.is_closing():
                    break  # the client left (aiohttp does not cancel the handler): let its buffer go
                lines = watcher.take(WATCH_CHUNK_BYTES)
                if lines and rendering is not None:
                    lines = [tables.render_watch_event(res, line, rendering, first=first and i == 0)
                             for i, line in enumerate(lines)]
                    first = False
                if lines:
                    try:
                        await asyncio.wait_for(resp.write(b"".join(lines)), WATCH_WRITE_SECONDS)
                    except asyncio.TimeoutError:  # the client does not read: drop the connection
                        if request.transport is not None:
                            request.transport.abort()
                        break
                elif bookmarks and time.monotonic() >= next_bookmark:
                    mark = {"kind": res.kind, "apiVersion": res.api_version,
                            "metadata": {"resourceVersion": str(max(watcher.last_revision, cache.revision))}}
                    line = b'{"type":"BOOKMARK","object":' + _encode(mark) + b"}\n"
                    if rendering is not None:
                        line = tables.render_watch_event(res, line, rendering, first=first)
                        first = False
                    await resp.write(line)
                if time.monotonic() >= next_bookmark:
                    next_bookmark = time.monotonic() + BOOKMARK_INTERVAL
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            cache.unwatch(res.store_prefix, watcher)
        return resp


def add_resource_routes(app: web.Application, api: ResourceAPI, reviews: Reviews, agents: AgentConnector,
                        inflight: InflightLimits) -> None:
    routes = ResourceRoutes(api, reviews, agents, inflight)
    MetricsAPI(api, agents).add_routes(app)  # before the routes of stored resources, which would take its paths
    app.router.add_route("*", r"/api/{version:v1}/{tail:.+}", routes.core)
    app.router.add_route("*", r"/apis/{group:[^/]+}/{version:[^/]+}/{tail:.+}", routes.grouped)
