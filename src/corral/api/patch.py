"""JSON merge patch (RFC 7386), JSON patch (RFC 6902) and Kubernetes' strategic merge patch, over
plain dicts. No I/O here.

A strategic merge patch is a merge patch that knows the object's lists. A list with a merge key
(a pod's ``containers`` by ``name``, a container's ``ports`` by ``containerPort``: the resource says
which, see ``ResourceType.merge_keys``) is merged item by item: a patch item updates the item with
the same key, or is appended; a list of scalars with the merge strategy (``finalizers``) gains the
patch's values. Every other list is replaced, as in a merge patch. Directives, as Kubernetes reads
them: ``$patch: replace`` (a map or list replaced whole), ``$patch: delete`` (a map removed; in a
list, the item with that key), ``$retainKeys`` (a map keeps only these keys),
``$deleteFromPrimitiveList/<field>`` (values removed from a list of scalars) and
``$setElementOrder/<field>`` (the listed items first, in that order, the others after them as they
were). An unknown directive is an error, never stored.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

import msgspec

__all__ = ["PatchError", "merge_patch", "json_patch", "strategic_merge_patch"]


class PatchError(ValueError):
    """A patch that is malformed or does not apply to the object."""


def _copy(value: Any) -> Any:
    """A copy of a patch's JSON value: a list through msgspec (~5x faster than ``deepcopy`` for a
    Placement's thousands of decisions), a scalar as it is."""
    if isinstance(value, list):
        try:
            return msgspec.json.decode(msgspec.json.encode(value))
        except (TypeError, msgspec.EncodeError):  # not JSON (a YAML date, say): copied as it is
            return copy.deepcopy(value)
    return copy.deepcopy(value)


def merge_patch(target: Any, patch: Any) -> Any:
    """Return ``target`` with ``patch`` merged in; ``null`` in the patch deletes a key."""
    if not isinstance(patch, dict):
        return _copy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _split_pointer(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"JSON pointer must start with '/': {pointer!r}")
    return [_unescape(t) for t in pointer[1:].split("/")]


def _resolve_parent(doc: Any, tokens: list[str], pointer: str) -> tuple[Any, str]:
    cur = doc
    for token in tokens[:-1]:
        if isinstance(cur, dict):
            if token not in cur:
                raise PatchError(f"path {pointer!r} does not exist")
            cur = cur[token]
        elif isinstance(cur, list):
            cur = cur[_index(cur, token, pointer, allow_end=False)]
        else:
            raise PatchError(f"path {pointer!r} does not exist")
    return cur, tokens[-1]


def _index(seq: list[Any], token: str, pointer: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(seq)
    if not token.isdigit():
        raise PatchError(f"invalid array index {token!r} in {pointer!r}")
    idx = int(token)
    if idx > len(seq) or (idx == len(seq) and not allow_end):
        raise PatchError(f"array index {idx} out of range in {pointer!r}")
    return idx


def _get(doc: Any, pointer: str) -> Any:
    cur = doc
    for token in _split_pointer(pointer):
        if isinstance(cur, dict) and token in cur:
            cur = cur[token]
        elif isinstance(cur, list):
            cur = cur[_index(cur, token, pointer, allow_end=False)]
        else:
            raise PatchError(f"path {pointer!r} does not exist")
    return cur


def _add(doc: Any, pointer: str, value: Any) -> Any:
    tokens = _split_pointer(pointer)
    if not tokens:
        return value
    parent, last = _resolve_parent(doc, tokens, pointer)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, pointer, allow_end=True), value)
    else:
        raise PatchError(f"path {pointer!r} does not exist")
    return doc


def _remove(doc: Any, pointer: str) -> tuple[Any, Any]:
    tokens = _split_pointer(pointer)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent, last = _resolve_parent(doc, tokens, pointer)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {pointer!r} does not exist")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, pointer, allow_end=False))
    raise PatchError(f"path {pointer!r} does not exist")


MAX_OPERATIONS = 10_000
MAX_COPIED_BYTES = 3 * 1024 * 1024  # what "copy" operations may add, together (each could double the object)


def json_patch(target: Any, operations: Any) -> Any:
    """Apply an RFC 6902 operation list to a copy of ``target``; all or nothing. At most
    ``MAX_OPERATIONS`` operations, whose ``copy`` operations add at most ``MAX_COPIED_BYTES``."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    if len(operations) > MAX_OPERATIONS:
        raise PatchError(f"a JSON patch of {len(operations)} operations; at most {MAX_OPERATIONS} are taken")
    doc = copy.deepcopy(target)
    copied = 0
    for n, op in enumerate(operations):
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"operation {n} must be an object with 'op' and 'path'")
        kind, path = op["op"], op["path"]
        for field in ("path", "from"):
            if field in op and not isinstance(op[field], str):
                raise PatchError(f"operation {n}: '{field}' must be a JSON pointer string, got {op[field]!r}")
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"operation {n} ({kind}) needs a 'value'")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)  # must exist
            doc, _ = _remove(doc, path) if _split_pointer(path) else (doc, None)
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind in ("move", "copy"):
            if "from" not in op:
                raise PatchError(f"operation {n} ({kind}) needs a 'from'")
            if kind == "move":
                doc, value = _remove(doc, op["from"])
            else:
                value = copy.deepcopy(_get(doc, op["from"]))
                copied += len(msgspec.json.encode(value))
                if copied > MAX_COPIED_BYTES:
                    raise PatchError(f"operation {n}: the patch's copies would add more than {MAX_COPIED_BYTES} bytes")
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise PatchError(f"test operation {n} failed at {path!r}")
        else:
            raise PatchError(f"operation {n}: unknown op {kind!r}")
    return doc


_DELETE = object()  # what a map patched with `$patch: delete` becomes: its key is removed
_DELETE_FROM = "$deleteFromPrimitiveList/"
_ORDER = "$setElementOrder/"


def strategic_merge_patch(target: Any, patch: Any, merge_keys: Mapping[str, str]) -> dict[str, Any]:
    """Return ``target`` with the strategic merge ``patch`` applied. ``merge_keys`` maps a list
    field's path (field names joined by dots, list positions left out: ``spec.containers.ports``)
    to its merge key, or to ``""`` for a list of scalars merged as a set."""
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object")
    result = _merge_map(target if isinstance(target, dict) else None, patch, "", merge_keys)
    if result is _DELETE:
        raise PatchError("a patch cannot delete the whole object ($patch: delete at the top)")
    return result  # type: ignore[return-value]


def _where(path: str) -> str:
    return path or "the object"


def _strip(value: Any, path: str) -> Any:
    """A patch value to store as it is: a copy, refusing directives left in it."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k.startswith("$"):
                raise PatchError(f"{_where(path)}: the directive {k!r} cannot be used here")
            out[k] = _strip(v, f"{path}.{k}" if path else k)
        return out
    if isinstance(value, list):
        return [_strip(v, path) for v in value]
    return value


def _merge_map(original: dict[str, Any] | None, patch: dict[str, Any], path: str,
               merge_keys: Mapping[str, str]) -> Any:
    directive = patch.get("$patch", "merge")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _strip({k: v for k, v in patch.items() if k != "$patch"}, path)
    if directive != "merge":
        raise PatchError(f"{_where(path)}: unknown $patch directive {directive!r} (merge, replace or delete)")
    result = dict(original) if original else {}
    retain = patch.get("$retainKeys")
    if retain is not None and not (isinstance(retain, list) and all(isinstance(k, str) for k in retain)):
        raise PatchError(f"{_where(path)}: $retainKeys must be a list of field names")
    deletions: dict[str, list[Any]] = {}
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith((_DELETE_FROM, _ORDER)):
            field = key.split("/", 1)[1]
            if not isinstance(value, list):
                raise PatchError(f"{_where(path)}: {key} must be a list")
            (deletions if key.startswith(_DELETE_FROM) else orders)[field] = value
            continue
        if key.startswith("$"):
            raise PatchError(f"{_where(path)}: unknown directive {key!r}")
        if retain is not None and key not in retain:
            raise PatchError(f"{_where(path)}: {key!r} is patched but not in $retainKeys")
        sub = f"{path}.{key}" if path else key
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            merged = _merge_map(current if isinstance(current, dict) else None, value, sub, merge_keys)
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and sub in merge_keys:
            current = result.get(key)
            result[key] = _merge_list(current if isinstance(current, list) else [], value, sub, merge_keys)
        else:
            result[key] = _strip(value, sub)
    for field, values in deletions.items():
        current = result.get(field)
        if isinstance(current, list):
            result[field] = [v for v in current if v not in values]
    for field, order in orders.items():
        current = result.get(field)
        if isinstance(current, list):
            result[field] = _in_order(current, order, merge_keys.get(f"{path}.{field}" if path else field, ""))
    if retain is not None:
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(original: list[Any], patch: list[Any], path: str, merge_keys: Mapping[str, str]) -> list[Any]:
    key = merge_keys[path]
    if not key:  # scalars, merged as a set: the original's order, then what is new
        out = list(original)
        for value in patch:
            if isinstance(value, (dict, list)):
                raise PatchError(f"{path}: a list of values; got {value!r}")
            if value not in out:
                out.append(value)
        return out
    if any(isinstance(item, dict) and item.get("$patch") == "replace" and len(item) == 1 for item in patch):
        return [_strip(item, path) for item in patch if not (isinstance(item, dict) and item.get("$patch") == "replace")]
    out = list(original)
    for n, item in enumerate(patch):
        if not isinstance(item, dict):
            raise PatchError(f"{path}[{n}]: the list is merged by {key!r}, so each item must be an object")
        if key not in item:
            raise PatchError(f"{path}[{n}]: the item has no {key!r}, the key this list is merged by")
        at = next((i for i, old in enumerate(out) if isinstance(old, dict) and old.get(key) == item[key]), None)
        merged = _merge_map(out[at] if at is not None else None, item, path, merge_keys)
        if merged is _DELETE:
            if at is not None:
                del out[at]
        elif at is not None:
            out[at] = merged
        else:
            out.append(merged)
    return out


def _in_order(items: list[Any], order: list[Any], key: str) -> list[Any]:
    """``items`` with those ``order`` names first, in its order; the others after, as they were."""
    def ident(x: Any) -> Any:
        return x.get(key) if key and isinstance(x, dict) else x

    wanted = [ident(o) for o in order]
    rank = {}
    for i, w in enumerate(wanted):
        try:
            rank.setdefault(w, i)
        except TypeError:  # an unhashable name: not an order we can follow
            raise PatchError(f"$setElementOrder: {w!r} cannot name an item") from None
    listed = sorted((x for x in items if _hashable(ident(x)) and ident(x) in rank), key=lambda x: rank[ident(x)])
    return listed + [x for x in items if not (_hashable(ident(x)) and ident(x) in rank)]


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
