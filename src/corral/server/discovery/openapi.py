"""OpenAPI: ``/openapi/v3`` (an index, then one OpenAPI 3.0 document per group-version) and
``/openapi/v2`` (Swagger 2.0, every group-version in one), built once from the resource registry and
the msgspec models, with what kubectl reads in them: each kind's group-version-kind on its schema
and operations, ``fieldValidation`` on writes, descriptions for ``kubectl explain``.
"""

from __future__ import annotations

from typing import Any

import msgspec

import corral
from corral.api import models
from corral.api.kubectl.descriptions import DESCRIPTIONS
from corral.api.resources import RESOURCES, ResourceType

__all__ = ["openapi_documents"]

_encode = msgspec.json.Encoder().encode


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


_WRITE_PARAMS = [
    {"name": "dryRun", "in": "query", "schema": {"type": "string", "enum": ["All"]},
     "description": "All: validate and admit the request, and answer as if it were done, but store nothing."},
    {"name": "fieldManager", "in": "query", "schema": {"type": "string"},
     "description": "The name of the actor making the change (accepted; corral does not track managed fields)."},
    {"name": "fieldValidation", "in": "query",
     "schema": {"type": "string", "enum": ["Ignore", "Warn", "Strict", ""]},
     "description": "What to do with fields corral does not know or act on: Ignore them, Warn (the default, "
                    "also when empty: a Warning header per field) or Strict (refuse the request with 400, naming "
                    "each field)."},
]


def _gvk(r: ResourceType, kind: str | None = None) -> dict[str, str]:
    return {"group": r.group, "version": r.version, "kind": kind or r.kind}


def _operations(r: ResourceType, ref: str) -> dict[str, Any]:
    paths = _plain_operations(r, ref)
    # kubectl finds a kind's operations by these extensions: it sends fieldValidation (and leaves
    # validation to the server) only when the kind's PATCH lists it; without them it looked for
    # /openapi/v2 and `kubectl apply` failed with "failed to download openapi".
    actions = {"get": "get", "post": "post", "put": "put", "patch": "patch", "delete": "delete"}
    for path, item in paths.items():
        for method, op in item.items():
            action = actions[method]
            if method == "get" and op["operationId"].startswith("list"):
                action = "list"
            elif method == "delete" and op["operationId"].startswith("deleteCollection"):
                action = "deletecollection"
            kind = "Binding" if path.endswith("/binding") else r.kind
            op["x-kubernetes-action"] = action
            op["x-kubernetes-group-version-kind"] = _gvk(r, kind)
            if method in ("post", "put", "patch"):
                op["parameters"] = op["parameters"] + _WRITE_PARAMS
    return paths


def _plain_operations(r: ResourceType, ref: str) -> dict[str, Any]:
    ns = [{"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}]
    name = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
    # An integer parameter given empty (``?timeoutSeconds=``) counts as not given, as in Kubernetes.
    list_params = [
        {"name": p, "in": "query", "schema": {"type": t}, **({"allowEmptyValue": True} if t == "integer" else {})}
        for p, t in (("labelSelector", "string"), ("fieldSelector", "string"), ("limit", "integer"),
                     ("continue", "string"), ("watch", "boolean"), ("resourceVersion", "string"),
                     ("timeoutSeconds", "integer"), ("allowWatchBookmarks", "boolean"))
    ] + [{"name": "resourceVersionMatch", "in": "query", "schema": {"type": "string", "enum": ["", "Exact", "NotOlderThan"]}}]
    delete_params = [{"name": "gracePeriodSeconds", "in": "query", "schema": {"type": "integer"}, "allowEmptyValue": True},
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
        # A JSON patch is a list of operations; an object sent under this type is taken as the merge
        # patch old official Python clients mean by it (they label every patch body so).
        "application/json-patch+json": {"schema": {"oneOf": [{"type": "array", "items": {"type": "object"}},
                                                             {"type": "object"}]}},
    }}
    patch_errors = (*WRITE_ERRORS, 415)
    paths: dict[str, Any] = {}
    if "list" in r.verbs:
        paths[base] = {
            "get": {"operationId": f"list{r.kind}", "parameters": scope + list_params,
                    "responses": _answers({"200": many}, READ_ERRORS)},
        }
        if "create" in r.verbs:
            paths[base]["post"] = {"operationId": f"create{r.kind}", "parameters": scope, "requestBody": body,
                                   "responses": _answers({"201": {**one, "description": "Created"}}, WRITE_ERRORS)}
        if "deletecollection" in r.verbs:
            paths[base]["delete"] = {
                "operationId": f"deleteCollection{r.kind}",
                "parameters": scope + [p for p in list_params if p["name"] in ("labelSelector", "fieldSelector")]
                + delete_params, "responses": _answers({"200": many}, WRITE_ERRORS)}
        item: dict[str, Any] = {
            "get": {"operationId": f"read{r.kind}", "parameters": scope + name,
                    "responses": _answers({"200": one}, READ_ERRORS)},
        }
        if "delete" in r.verbs:
            item["delete"] = {"operationId": f"delete{r.kind}", "parameters": scope + name + delete_params,
                              "responses": _answers({"200": one}, WRITE_ERRORS)}
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


_STANDARD = {
    "apiVersion": "The versioned schema of this representation of an object, as group/version (v1 for the "
                  "core group).",
    "kind": "The kind of object this is, in CamelCase; the server infers it from the endpoint a client "
            "writes to, and refuses a body of another kind.",
    "metadata": "Standard object metadata: name, namespace, labels, annotations, and what the server keeps "
                "(uid, resourceVersion, creationTimestamp).",
    "spec": "What the object's owner wants: the desired state.",
    "status": "What the system observed most recently: written by corral's components, read-only to others.",
}


def _nullable_to_openapi3(node: Any) -> Any:
    """msgspec's JSON schema as OpenAPI 3.0 readers (kubectl explain, its validation, schemathesis)
    take it: ``anyOf: [X, {type: null}]`` becomes X with ``nullable: true`` (a reference wrapped in
    ``allOf``, as Kubernetes writes it, since siblings of ``$ref`` are ignored), and empty
    ``required`` lists and ``default: null`` go."""
    if isinstance(node, list):
        return [_nullable_to_openapi3(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: _nullable_to_openapi3(v) for k, v in node.items()}
    alts = node.get("anyOf")
    if isinstance(alts, list) and len(alts) == 2 and {"type": "null"} in alts:
        other = next(a for a in alts if a != {"type": "null"})
        del node["anyOf"]
        node.pop("default", None)
        node.update({"allOf": [other]} if "$ref" in other else other)
        node["nullable"] = True
    if node.get("required") == []:
        del node["required"]
    return node


def _components() -> dict[str, Any]:
    types = [r.model for r in RESOURCES] + [models.Status, models.DeleteOptions]
    _, components = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
    components = _nullable_to_openapi3(components)
    for name, schema in components.items():  # what kubectl explain prints
        if name in DESCRIPTIONS:
            schema["description"] = DESCRIPTIONS[name]
        for field_name, prop in schema.get("properties", {}).items():
            text = DESCRIPTIONS.get(f"{name}.{field_name}")
            if text:
                prop["description"] = text
    for r in RESOURCES:
        schema = components[r.model.__name__]
        schema.setdefault("x-kubernetes-group-version-kind", []).append(_gvk(r))
        for field_name, text in _STANDARD.items():
            prop = schema.get("properties", {}).get(field_name)
            if prop is not None:
                prop.setdefault("description", text)
                if field_name == "kind":
                    prop.update({"type": "string"})
                    prop.pop("enum", None)
        if "list" in r.verbs:
            components[r.list_kind] = _list_schema(r, f"#/components/schemas/{r.model.__name__}")
            components[r.list_kind]["x-kubernetes-group-version-kind"] = [_gvk(r, r.list_kind)]
    return components


def openapi_documents() -> dict[str, bytes]:
    """``/openapi/v3`` (the index) and one OpenAPI 3.0 document per group-version."""
    components = _components()
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
    docs["/openapi/v2"] = _encode(_swagger2(components))
    return docs


def _v2_refs(node: Any) -> Any:
    """A v3 schema as Swagger 2.0 writes it: references into #/definitions, nullable as x-nullable."""
    if isinstance(node, list):
        return [_v2_refs(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k == "$ref":
            out[k] = v.replace("#/components/schemas/", "#/definitions/")
        elif k == "nullable":
            out["x-nullable"] = v
        else:
            out[k] = _v2_refs(v)
    return out


def _swagger2(components: dict[str, Any]) -> dict[str, Any]:
    """``/openapi/v2``: every group-version in one Swagger 2.0 document, for clients that read only it
    (JSON; kubectl reads v3 and asks v2 only of servers without it)."""
    paths: dict[str, Any] = {}
    for r in RESOURCES:
        for path, item in _operations(r, f"#/components/schemas/{r.model.__name__}").items():
            paths[path] = {method: _swagger2_operation(op) for method, op in item.items()}
    return {"swagger": "2.0", "info": {"title": "corral", "version": corral.__version__},
            "consumes": ["application/json", "application/yaml"], "produces": ["application/json"],
            "paths": _v2_refs(paths), "definitions": _v2_refs(components)}


def _swagger2_operation(op: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in op.items() if k not in ("parameters", "requestBody", "responses")}
    params = [{**{k: v for k, v in p.items() if k != "schema"}, **p.get("schema", {})} for p in op["parameters"]]
    body = op.get("requestBody")
    if body is not None:
        content = body["content"]
        schema = (content.get("application/json") or next(iter(content.values())))["schema"]
        params.append({"name": "body", "in": "body", "required": True, "schema": schema})
        if "application/json" not in content:
            out["consumes"] = list(content)
    out["parameters"] = params
    out["responses"] = {
        code: {"description": answer.get("description", ""),
               **({"schema": next(iter(answer["content"].values()))["schema"]} if answer.get("content") else {})}
        for code, answer in op["responses"].items()}
    return out
