"""What the REST layer checks of an object it is asked to write. No I/O here.

:func:`check_write` gives :func:`~corral.api.validation.validate`'s causes (a write with any is
refused) and, when there are none, :func:`unknown_fields`: the fields corral keeps as written but
does not act on (the REST layer warns of them, or refuses those Kubernetes lacks too under strict
field validation). A pod's spec is checked once per distinct spec.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Callable

import msgspec

from corral.api.resources import ResourceType
from corral.api.validation import Cause, _metadata_causes, _pod_spec, type_check, validate

__all__ = ["check_write", "unknown_fields"]

_encode = msgspec.json.Encoder().encode


def check_write(resource: ResourceType, obj: dict[str, Any]) -> tuple[list[Cause], list[str]]:
    """What a create or an update of ``obj`` is refused for (:func:`validate`'s causes) and, when
    nothing, the fields corral keeps without acting on (:func:`unknown_fields`).

    A pod's spec is checked once per distinct spec (kept by its JSON): a Deployment's or a Job's pods
    share their template's spec, whose type check, checks and unknown-field walk cost several times
    its encoding; only the rest of each pod (its metadata, mostly) is checked every time."""
    spec = obj.get("spec") if resource.kind == "Pod" else None
    if isinstance(spec, dict):
        try:
            key = _encode(spec)
        except (TypeError, ValueError):  # not JSON (an in-process caller's value): checked in full
            key = None
        if key is not None:
            return _pod_write(resource, obj, spec, key)
    causes = validate(resource, obj)[1]
    return causes, ([] if causes else unknown_fields(resource, obj))


# A pod spec's part of check_write, by the spec's JSON: (the spec as JSON decodes it, typed, causes,
# unknown fields), ``typed`` False when the spec's types are wrong (its one cause is then all
# validate() reports). Only specs that are what JSON decodes are kept, and a hit counts only for a
# spec equal to that: a YAML body's date or number key encodes as a JSON string does, but is not one.
# Emptied when full.
_POD_SPECS: dict[bytes, tuple[Any, bool, tuple[Cause, ...], tuple[str, ...]]] = {}
POD_SPECS_LIMIT = 1024
_decode = msgspec.json.Decoder().decode


def _pod_write(resource: ResourceType, obj: dict[str, Any], spec: dict[str, Any],
               key: bytes) -> tuple[list[Cause], list[str]]:
    part = _POD_SPECS.get(key)
    if part is not None and part[0] == spec:
        _, spec_typed, spec_causes, spec_unknown = part
    else:
        alone = {"spec": spec}
        typed, causes = type_check(resource, alone)
        spec_typed = typed is not None
        spec_causes = tuple(_pod_spec(typed.spec) if spec_typed else causes)
        spec_unknown = tuple(unknown_fields(resource, alone)) if spec_typed else ()
        native = _decode(key)
        if native == spec:
            if len(_POD_SPECS) >= POD_SPECS_LIMIT:
                _POD_SPECS.clear()
            _POD_SPECS[key] = (native, spec_typed, spec_causes, spec_unknown)
    rest = {k: v for k, v in obj.items() if k != "spec"}
    typed, causes = type_check(resource, rest)
    if typed is None and (spec_typed or _comes_before(obj, causes[0].field, "spec")):
        return causes, []
    if not spec_typed:  # the first wrong type, in the object's order, as a check of the whole finds it
        return list(spec_causes), []
    causes = _metadata_causes(resource, typed)
    causes += spec_causes
    if causes:
        return causes, []
    unknown = unknown_fields(resource, rest)
    if spec_unknown:  # where the spec stands among the object's keys, as a walk of the whole gives them
        at = 0
        while at < len(unknown) and _comes_before(obj, unknown[at], "spec"):
            at += 1
        unknown[at:at] = spec_unknown
    return causes, unknown


def _comes_before(obj: dict[str, Any], path: str, key: str) -> bool:
    """Whether the field at ``path`` is under a key of ``obj`` that comes before ``key`` (a path
    under no key of ``obj``, such as ``<root>``, comes first)."""
    keys = list(obj)
    top = re.split(r"[.\[]", path, maxsplit=1)[0]
    return top not in keys or keys.index(top) < keys.index(key)


# --- fields corral keeps but does not act on ------------------------------------------------------------


def _walker(t: Any) -> Callable[[Any, str, list[str]], None] | None:
    """Build (once per type) a function listing the keys of a value that the type does not declare."""
    info = msgspec.inspect.type_info(t) if not isinstance(t, msgspec.inspect.Type) else t
    if isinstance(info, msgspec.inspect.UnionType):
        walkers = [w for w in (_walker(x) for x in info.types) if w is not None]
        return walkers[0] if walkers else None
    if isinstance(info, msgspec.inspect.ListType):
        item = _walker(info.item_type)
        if item is None:
            return None

        def walk_list(value: Any, path: str, out: list[str]) -> None:
            if isinstance(value, list):
                for i, v in enumerate(value):
                    item(v, f"{path}[{i}]", out)

        return walk_list
    if isinstance(info, msgspec.inspect.DictType):
        val = _walker(info.value_type)
        if val is None:
            return None

        def walk_dict(value: Any, path: str, out: list[str]) -> None:
            if isinstance(value, dict):
                for k, v in value.items():
                    val(v, f"{path}[{k}]", out)

        return walk_dict
    if isinstance(info, msgspec.inspect.StructType):
        cls = info.cls
        if cls in _STRUCT_WALKERS:
            return _STRUCT_WALKERS[cls]
        fields: dict[str, Any] = {}

        def walk_struct(value: Any, path: str, out: list[str]) -> None:
            if not isinstance(value, dict):
                return
            for k, v in value.items():
                if k not in fields:
                    out.append(f"{path}.{k}" if path else k)
                elif fields[k] is not None:
                    fields[k](v, f"{path}.{k}" if path else k, out)

        _STRUCT_WALKERS[cls] = walk_struct
        if info.tag_field:
            fields[info.tag_field] = None
        for f in info.fields:
            fields[f.encode_name] = _walker(f.type)
        return walk_struct
    return None


_STRUCT_WALKERS: dict[type, Callable[[Any, str, list[str]], None]] = {}


@functools.lru_cache(maxsize=None)
def _model_walker(model: type) -> Callable[[Any, str, list[str]], None] | None:
    return _walker(model)


def unknown_fields(resource: ResourceType, obj: dict[str, Any]) -> list[str]:
    """Field paths in ``obj`` that corral keeps as written but does not act on."""
    walker = _model_walker(resource.model)
    out: list[str] = []
    if walker is not None:
        walker(obj, "", out)
    return out
