"""Bounded decoding of what clients send: JSON and YAML documents whose nesting, size and YAML
aliases are limited before they become Python objects, for the API server's request bodies and the
CLI's manifests alike.

- **Nesting**: at most ``MAX_DEPTH`` levels of objects and lists (Kubernetes' objects need a few
  dozen; deeper input would only exhaust recursion somewhere later).
- **YAML aliases**: a YAML document is composed first (libyaml, in C), then measured as it would be
  once every alias is expanded; more than ``MAX_YAML_NODES`` nodes is refused before anything is
  built, so a few hundred bytes of nested aliases cannot become gigabytes of JSON.
- **Size**: callers limit the bytes they read; the stored object's own size is the store's limit
  (:class:`corral.store.TooLarge`).

Errors are :class:`DecodeError`; its message completes "the request body is …" or "document N:
…" ("not valid YAML (line 3, column 7): …", "nested more than 100 levels deep").
"""

from __future__ import annotations

from typing import Any, Iterator

import msgspec
import yaml

__all__ = ["DecodeError", "MAX_DEPTH", "MAX_YAML_NODES", "decode_json", "decode_yaml", "yaml_documents"]

MAX_DEPTH = 100
MAX_YAML_NODES = 200_000  # after alias expansion; a 1.5 MiB object has fewer in any real manifest

_decode = msgspec.json.Decoder().decode
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~5x faster


class DecodeError(ValueError):
    """Input that is not accepted; the message says why."""


def _too_deep() -> DecodeError:
    return DecodeError(f"nested more than {MAX_DEPTH} levels deep")


def check_depth(value: Any, raw: bytes | None = None) -> None:
    """Refuse ``value`` if its objects and lists nest deeper than ``MAX_DEPTH``. With ``raw`` (the
    JSON it came from) most values are cleared by counting brackets, without a walk."""
    if raw is not None and raw.count(b"{") + raw.count(b"[") <= MAX_DEPTH:
        return
    stack = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _too_deep()
        children = current.values() if isinstance(current, dict) else current if isinstance(current, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))


def decode_json(raw: bytes) -> Any:
    """A JSON document; :class:`DecodeError` when it is not JSON or nests too deep."""
    try:
        value = _decode(raw)
    except RecursionError:
        raise _too_deep() from None
    except UnicodeDecodeError as exc:  # msgspec's word for a string that is not UTF-8
        raise DecodeError(f"not valid JSON: not UTF-8 at byte {exc.start}") from None
    except msgspec.DecodeError as exc:
        raise DecodeError(f"not valid JSON: {exc}") from None
    check_depth(value, raw)
    return value


def _measure(root: yaml.Node) -> None:
    """Refuse a composed document that nests too deep or expands past ``MAX_YAML_NODES`` nodes.
    Each node is measured once (an alias shares its anchor's node), so the cost follows the text,
    not the expansion."""
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if isinstance(node, yaml.ScalarNode):
            sizes[key], depths[key] = 1, 0
            continue
        children = [c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode) else node.value
        if done:
            open_.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children)
            depths[key] = 1 + max((depths[id(c)] for c in children), default=0)
            if sizes[key] > MAX_YAML_NODES:
                raise DecodeError(f"a YAML document of more than {MAX_YAML_NODES} nodes (counting each use of "
                                  "an alias as a copy)")
            if depths[key] > MAX_DEPTH:
                raise _too_deep()
            continue
        if key in sizes:
            continue
        if key in open_:
            raise DecodeError("a YAML document that contains itself through an alias")
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)


def yaml_documents(text: bytes | str) -> Iterator[Any]:
    """Every document of a YAML stream, each measured before it is built."""
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            _measure(node)
            yield loader.construct_document(node)
    except RecursionError:
        raise _too_deep() from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise DecodeError(f"not valid YAML{where}: {problem}") from None
    finally:
        loader.dispose()


def decode_yaml(raw: bytes | str) -> Any:
    """A single YAML document (none: ``None``); more than one is refused."""
    documents = yaml_documents(raw)
    first = next(documents, None)
    if next(documents, None) is not None:
        raise DecodeError("more than one YAML document (send one object per request)")
    return first
