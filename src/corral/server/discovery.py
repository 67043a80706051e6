"""Discovery (``/api``, ``/apis``, ``/api/v1``, ``/apis/{group}/{version}``, ``/version``) and OpenAPI v3.

Built once from the resource registry and the msgspec models; answered from bytes.
"""

from __future__ import annotations

import platform
from typing import Any

import msgspec

import corral
from corral.api import models
from corral.api.resources import RESOURCES, ResourceType, groups

__all__ = ["discovery_documents", "openapi_documents"]

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
    major, minor = corral.__version__.split(".")[:2]
    docs["/version"] = {
        "major": major, "minor": minor, "gitVersion": f"v{corral.__version__}", "gitCommit": "",
        "gitTreeState": "", "buildDate": "", "goVersion": "", "compiler": "corral",
        "platform": f"{platform.system().lower()}/{platform.machine()}",
        "pythonVersion": platform.python_version(),
    }
    return {path: _encode(doc) for path, doc in docs.items()}


def _operations(r: ResourceType, ref: str) -> dict[str, Any]:
    ns = [{"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}]
    name = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
    list_params = [
        {"name": p, "in": "query", "schema": {"type": t}}
        for p, t in (("labelSelector", "string"), ("fieldSelector", "string"), ("limit", "integer"),
                     ("continue", "string"), ("watch", "boolean"), ("resourceVersion", "string"),
                     ("timeoutSeconds", "integer"), ("allowWatchBookmarks", "boolean"))
    ]
    body = {"required": True, "content": {"application/json": {"schema": {"$ref": ref}}}}
    ok = {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": ref}}}}}
    base = r.collection_path("{namespace}" if r.namespaced else None)
    scope = ns if r.namespaced else []
    paths: dict[str, Any] = {}
    if "list" in r.verbs:
        paths[base] = {
            "get": {"operationId": f"list{r.kind}", "parameters": scope + list_params, "responses": ok},
            "post": {"operationId": f"create{r.kind}", "parameters": scope, "requestBody": body,
                     "responses": {"201": ok["200"]}},
        }
        paths[f"{base}/{{name}}"] = {
            "get": {"operationId": f"read{r.kind}", "parameters": scope + name, "responses": ok},
            "put": {"operationId": f"replace{r.kind}", "parameters": scope + name, "requestBody": body,
                    "responses": ok},
            "patch": {"operationId": f"patch{r.kind}", "parameters": scope + name, "responses": ok,
                      "requestBody": {"required": True, "content": {
                          "application/merge-patch+json": {"schema": {"type": "object"}},
                          "application/strategic-merge-patch+json": {"schema": {"type": "object"}},
                          "application/json-patch+json": {"schema": {"type": "array", "items": {"type": "object"}}},
                      }}},
            "delete": {"operationId": f"delete{r.kind}", "parameters": scope + name, "responses": ok},
        }
        for sub in r.subresources:
            if sub == "status":
                paths[f"{base}/{{name}}/status"] = {
                    "get": {"operationId": f"read{r.kind}Status", "parameters": scope + name, "responses": ok},
                    "put": {"operationId": f"replace{r.kind}Status", "parameters": scope + name,
                            "requestBody": body, "responses": ok},
                }
            elif sub == "binding":
                bref = "#/components/schemas/Binding"
                paths[f"{base}/{{name}}/binding"] = {"post": {
                    "operationId": f"create{r.kind}Binding", "parameters": scope + name,
                    "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": bref}}}},
                    "responses": {"201": {"description": "Created"}}}}
    else:
        paths[base] = {"post": {"operationId": f"create{r.kind}", "parameters": scope, "requestBody": body,
                                "responses": {"201": ok["200"]}}}
    return paths


def openapi_documents() -> dict[str, bytes]:
    """``/openapi/v3`` (the index) and one OpenAPI 3.0 document per group-version."""
    types = [r.model for r in RESOURCES] + [models.Status, models.DeleteOptions]
    _, components = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
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
