"""Discovery (``/api``, ``/apis``, ``/api/v1``, ``/apis/{group}/{version}``, ``/version``) and OpenAPI v3.

Built once from the resource registry and the msgspec models; answered from bytes.
"""

from __future__ import annotations

import platform
from typing import Any

import msgspec

import corral
from corral import GIT_VERSION, KUBERNETES_VERSION
from corral.agent.node_info import go_arch
from corral.api import models
from corral.api.resources import RESOURCES, ResourceType, groups

__all__ = ["discovery_documents", "openapi_documents", "KUBERNETES_VERSION"]  # KUBERNETES_VERSION: from corral


_encode = msgspec.json.Encoder().encode


def _resource_list(group: str, version: str) -> dict[str, Any]:
    resources = []
    for r in RESOURCES:
        if r.group != group or r.version != version:
            continue
        resources.append({
            "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
            "kind": r.kind, "verbs": list(r.verbs), "shortNames": list(r.short_names),
        })
        for sub in r.subresources:
            verbs = {"binding": ["create"], "eviction": ["create"], "log": ["get"]}.get(sub, ["get", "patch", "update"])
            kind = {"binding": "Binding", "eviction": "Eviction"}.get(sub, r.kind)
            resources.append({"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced,
                              "kind": kind, "verbs": verbs})
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version, "resources": resources}


def discovery_documents() -> dict[str, bytes]:
    """Path → JSON body for every discovery endpoint."""
    docs: dict[str, Any] = {
        "/api": {"kind": "APIVersions", "versions": ["v1"],
                 "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]},
        "/api/v1": _resource_list("", "v1"),
    }
    group_list = []
    for group, versions in groups().items():
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        group_list.append({"name": group, "versions": gvs, "preferredVersion": gvs[0]})
        docs[f"/apis/{group}"] = {"kind": "APIGroup", "apiVersion": "v1", "name": group,
                                  "versions": gvs, "preferredVersion": gvs[0]}
        for v in versions:
            docs[f"/apis/{group}/{v}"] = _resource_list(group, v)
    docs["/apis"] = {"kind": "APIGroupList", "apiVersion": "v1", "groups": group_list}
    # In Kubernetes' form, for the Kubernetes release whose API corral serves (and whose kubectl
    # and Python client its tests run), with corral's own version as build metadata, as k3s
    # writes v1.28.4+k3s1: kubectl compares major.minor with its own and warned of a skew of 36
    # minor versions when this said v0.1.0.
    major, minor = KUBERNETES_VERSION.split(".")[:2]
    docs["/version"] = {
        "major": major, "minor": minor, "gitVersion": GIT_VERSION,
        "gitCommit": "", "gitTreeState": "", "buildDate": "", "goVersion": "",
        "compiler": f"corral {corral.__version__} (Python {platform.python_version()})",
        "platform": f"{platform.system().lower()}/{go_arch()}", "corralVersion": corral.__version__,
    }
    docs["/version/"] = docs["/version"]  # as Kubernetes serves it too (the Python client asks there)
    return {path: _encode(doc) for path, doc in docs.items()}


_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
            409: "Conflict (AlreadyExists, or a stale resourceVersion)", 413: "RequestEntityTooLarge",
            415: "UnsupportedMediaType", 422: "Invalid (every bad field named)", 429: "TooManyRequests (Retry-After)",
            503: "ServiceUnavailable (the store)", 504: "Timeout", 507: "InsufficientStorage (the store is full)"}
_STATUS = {"application/json": {"schema": {"$ref": "#/components/schemas/Status"}}}
READ_ERRORS = (400, 401, 403, 404, 429, 503, 504)
WRITE_ERRORS = (400, 401, 403, 404, 409, 413, 422, 429, 503, 504, 507)


def _answers(ok: dict[str, Any], errors: tuple[int, ...]) -> dict[str, Any]:
    """An operation's responses: its successes and, as Kubernetes Status objects, its errors."""
    return {**ok, **{str(code): {"description": _REASONS[code], "content": _STATUS} for code in errors}}


def _list_schema(r: ResourceType, ref: str) -> dict[str, Any]:
    return {"type": "object", "required": ["items"], "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string", "enum": [r.list_kind]},
        "metadata": {"type": "object", "properties": {
            "resourceVersion": {"type": "string"}, "continue": {"type": "string"},
            "remainingItemCount": {"type": "integer"}}},
        "items": {"type": "array", "items": {"$ref": ref}}}}


def _operations(r: ResourceType, ref: str) -> dict[str, Any]:
    ns = [{"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}]
    name = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
    list_params = [
        {"name": p, "in": "query", "schema": {"type": t}}
        for p, t in (("labelSelector", "string"), ("fieldSelector", "string"), ("limit", "integer"),
                     ("continue", "string"), ("watch", "boolean"), ("resourceVersion", "string"),
                     ("timeoutSeconds", "integer"), ("allowWatchBookmarks", "boolean"))
    ] + [{"name": "resourceVersionMatch", "in": "query", "schema": {"type": "string", "enum": ["", "Exact", "NotOlderThan"]}}]
    delete_params = [{"name": "gracePeriodSeconds", "in": "query", "schema": {"type": "integer"}},
                     {"name": "dryRun", "in": "query", "schema": {"type": "string", "enum": ["All"]}}]
    body = {"required": True, "content": {"application/json": {"schema": {"$ref": ref}}}}
    one = {"description": "OK", "content": {"application/json": {"schema": {"$ref": ref}}}}
    many = {"description": "OK (with ?watch=true: one JSON watch event per line)",
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{r.list_kind}"}}}}
    base = r.collection_path("{namespace}" if r.namespaced else None)
    scope = ns if r.namespaced else []
    patch_body = {"required": True, "content": {
        "application/merge-patch+json": {"schema": {"type": "object"}},
        "application/strategic-merge-patch+json": {"schema": {"type": "object"}},
        "application/json-patch+json": {"schema": {"type": "array", "items": {"type": "object"}}},
    }}
    patch_errors = (*WRITE_ERRORS, 415)
    paths: dict[str, Any] = {}
    if "list" in r.verbs:
        paths[base] = {
            "get": {"operationId": f"list{r.kind}", "parameters": scope + list_params,
                    "responses": _answers({"200": many}, READ_ERRORS)},
            "post": {"operationId": f"create{r.kind}", "parameters": scope, "requestBody": body,
                     "responses": _answers({"201": {**one, "description": "Created"}}, WRITE_ERRORS)},
        }
        if "deletecollection" in r.verbs:
            paths[base]["delete"] = {
                "operationId": f"deleteCollection{r.kind}",
                "parameters": scope + [p for p in list_params if p["name"] in ("labelSelector", "fieldSelector")]
                + delete_params, "responses": _answers({"200": many}, WRITE_ERRORS)}
        item: dict[str, Any] = {
            "get": {"operationId": f"read{r.kind}", "parameters": scope + name,
                    "responses": _answers({"200": one}, READ_ERRORS)},
            "delete": {"operationId": f"delete{r.kind}", "parameters": scope + name + delete_params,
                       "responses": _answers({"200": one}, WRITE_ERRORS)},
        }
        if "update" in r.verbs:
            item["put"] = {"operationId": f"replace{r.kind}", "parameters": scope + name, "requestBody": body,
                           "responses": _answers({"200": one}, WRITE_ERRORS)}
        if "patch" in r.verbs:
            item["patch"] = {"operationId": f"patch{r.kind}", "parameters": scope + name, "requestBody": patch_body,
                             "responses": _answers({"200": one}, patch_errors)}
        paths[f"{base}/{{name}}"] = item
        for sub in r.subresources:
            if sub == "status":
                paths[f"{base}/{{name}}/status"] = {
                    "get": {"operationId": f"read{r.kind}Status", "parameters": scope + name,
                            "responses": _answers({"200": one}, READ_ERRORS)},
                    "put": {"operationId": f"replace{r.kind}Status", "parameters": scope + name,
                            "requestBody": body, "responses": _answers({"200": one}, WRITE_ERRORS)},
                    "patch": {"operationId": f"patch{r.kind}Status", "parameters": scope + name,
                              "requestBody": patch_body, "responses": _answers({"200": one}, patch_errors)},
                }
            elif sub == "binding":
                bref = "#/components/schemas/Binding"
                paths[f"{base}/{{name}}/binding"] = {"post": {
                    "operationId": f"create{r.kind}Binding", "parameters": scope + name,
                    "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": bref}}}},
                    "responses": _answers({"201": {"description": "Created", "content": _STATUS}}, WRITE_ERRORS)}}
    else:
        paths[base] = {"post": {"operationId": f"create{r.kind}", "parameters": scope, "requestBody": body,
                                "responses": _answers({"201": {**one, "description": "Created"}}, WRITE_ERRORS)}}
    return paths


def openapi_documents() -> dict[str, bytes]:
    """``/openapi/v3`` (the index) and one OpenAPI 3.0 document per group-version."""
    types = [r.model for r in RESOURCES] + [models.Status, models.DeleteOptions]
    _, components = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
    for r in RESOURCES:
        if "list" in r.verbs:
            components[r.list_kind] = _list_schema(r, f"#/components/schemas/{r.model.__name__}")
    index: dict[str, Any] = {"paths": {}}
    docs: dict[str, bytes] = {}
    by_gv: dict[str, list[ResourceType]] = {}
    for r in RESOURCES:
        gv = f"apis/{r.group}/{r.version}" if r.group else f"api/{r.version}"
        by_gv.setdefault(gv, []).append(r)
    for gv, resources in by_gv.items():
        paths: dict[str, Any] = {}
        for r in resources:
            paths.update(_operations(r, f"#/components/schemas/{r.model.__name__}"))
        doc = {"openapi": "3.0.0", "info": {"title": "corral", "version": corral.__version__},
               "paths": paths, "components": {"schemas": components}}
        docs[f"/openapi/v3/{gv}"] = _encode(doc)
        index["paths"][gv] = {"serverRelativeURL": f"/openapi/v3/{gv}"}
    docs["/openapi/v3"] = _encode(index)
    return docs
