"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902) over plain dicts. No I/O here.

Strategic merge patch bodies are applied as merge patches: for the fields corral acts on the two
agree except for lists of named items, which a merge patch replaces whole.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

__all__ = ["PatchError", "merge_patch", "json_patch"]


class PatchError(ValueError):
    """A patch that is malformed or does not apply to the object."""


def merge_patch(target: Any, patch: Any) -> Any:
    """Return ``target`` with ``patch`` merged in; ``null`` in the patch deletes a key."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
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
