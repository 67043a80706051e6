"""Other renderings of a read than the object itself, chosen by the ``Accept`` header as Kubernetes does.

- ``application/json;as=Table;v=v1;g=meta.k8s.io`` (and ``v1beta1``): a ``Table`` of the kind's printed
  columns (:mod:`corral.api.kubectl.printing`), one row per object, for get, list and watch. This is what
  ``kubectl get`` asks for first; without it kubectl shows only NAME and AGE. ``?includeObject=``
  ``None`` | ``Object`` | ``PartialObjectMetadata`` (the default) says what each row carries.
- ``as=PartialObjectMetadata`` / ``as=PartialObjectMetadataList``: only the objects' metadata (what
  metadata-only informers ask for).

The header lists what the client accepts in its order of preference; the first rendering corral
can give wins, a plain JSON type (``application/json``, ``application/*``, ``*/*``) meaning the object
itself. A header that asks only for renderings corral cannot give (``as=Table;v=v2``) is answered 406;
one naming no rendering at all gets JSON, as before.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import msgspec

from corral.api.kubectl import printing
from corral.api.resources import ResourceType
from corral.server import errors

__all__ = ["Rendering", "negotiate", "render_object", "render_list", "render_watch_event"]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode

META_GROUP = "meta.k8s.io"
_VERSIONS = ("v1", "v1beta1")
_AS = ("Table", "PartialObjectMetadata", "PartialObjectMetadataList")
_INCLUDE = ("None", "Object", "PartialObjectMetadata")


@dataclass(frozen=True, slots=True)
class Rendering:
    kind: str  # Table | PartialObjectMetadata | PartialObjectMetadataList
    version: str  # of meta.k8s.io
    include: str = "PartialObjectMetadata"  # what a Table's rows carry

    @property
    def api_version(self) -> str:
        return f"{META_GROUP}/{self.version}"


def negotiate(accept: str, include_object: str | None = None, *, listing: bool = False) -> Rendering | None:
    """The rendering ``accept`` asks for first that corral gives; None: the object itself as JSON."""
    if include_object is not None and include_object not in _INCLUDE:
        raise errors.bad_request(f"includeObject must be one of {', '.join(_INCLUDE)}, not {include_object!r}")
    if "as=" not in accept:  # the common case, read without parsing
        return None
    asked_for_rendering = False
    for media in accept.split(","):
        kind, *params = (p.strip() for p in media.split(";"))
        if kind not in ("application/json", "application/*", "*/*"):
            continue
        named = dict(p.partition("=")[::2] for p in params if "=" in p)
        as_ = named.get("as")
        if as_ is None:
            return None
        asked_for_rendering = True
        if as_ not in _AS or named.get("g") != META_GROUP or named.get("v") not in _VERSIONS:
            continue
        if as_ == "PartialObjectMetadataList" and not listing:
            continue
        if as_ == "PartialObjectMetadata" and listing:
            as_ = "PartialObjectMetadataList"  # a list of them, as Kubernetes answers
        return Rendering(as_, named["v"], include_object or "PartialObjectMetadata")
    if asked_for_rendering:
        raise errors.ApiError(406, "NotAcceptable",
                              f"only the object itself (application/json) or meta.k8s.io/v1 and v1beta1 Table, "
                              f"PartialObjectMetadata and PartialObjectMetadataList can be given; asked for {accept!r}")
    return None


def _partial(obj: dict[str, Any], version: str) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "apiVersion": f"{META_GROUP}/{version}",
            "metadata": obj.get("metadata") or {}}


def _row(resource: ResourceType, columns: list[printing.Column], obj: dict[str, Any], r: Rendering,
         now: float) -> dict[str, Any]:
    row: dict[str, Any] = {"cells": printing.row_cells(columns, obj, now)}
    conditions = printing.row_conditions(resource.kind, obj)
    if conditions:
        row["conditions"] = conditions
    if r.include == "Object":
        row["object"] = obj
    elif r.include == "PartialObjectMetadata":
        row["object"] = _partial(obj, r.version)
    return row


def _table(resource: ResourceType, objs: list[dict[str, Any]], r: Rendering, meta: dict[str, Any], *,
           headers: bool = True) -> dict[str, Any]:
    columns = printing.columns_for(resource.kind)
    now = time.time()
    return {"kind": "Table", "apiVersion": r.api_version, "metadata": meta,
            "columnDefinitions": [c.definition() for c in columns] if headers else None,
            "rows": [_row(resource, columns, o, r, now) for o in objs]}


def render_object(resource: ResourceType, body: bytes, r: Rendering) -> bytes:
    obj = _decode(body)
    if r.kind == "Table":
        meta = {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion", "")}
        return _encode(_table(resource, [obj], r, meta))
    return _encode(_partial(obj, r.version))


def render_list(resource: ResourceType, body: bytes, r: Rendering) -> bytes:
    listed = _decode(body)
    items, meta = listed.get("items") or [], listed.get("metadata") or {}
    if r.kind == "Table":
        return _encode(_table(resource, items, r, meta))
    return _encode({"kind": "PartialObjectMetadataList", "apiVersion": r.api_version, "metadata": meta,
                    "items": [_partial(o, r.version) for o in items]})


def render_watch_event(resource: ResourceType, line: bytes, r: Rendering, *, first: bool) -> bytes:
    """One watch event line (``{"type":…,"object":…}\\n``) with its object rendered: a Table of one row,
    with the column definitions in the first event only (as Kubernetes sends them)."""
    event = _decode(line)
    obj = event.get("object") or {}
    if event.get("type") == "ERROR":
        return line  # a Status: as it is
    if r.kind == "Table":
        meta = {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion", "")}
        objs = [] if event.get("type") == "BOOKMARK" else [obj]
        rendered = _table(resource, objs, r, meta, headers=first)
    else:
        rendered = _partial(obj, r.version)
    return _encode({"type": event.get("type"), "object": rendered}) + b"\n"
