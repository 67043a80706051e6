"""Reading manifests for ``apply`` and ``delete -f``: files, directories, stdin; YAML or JSON.

Each document is checked enough to be sent (a mapping with apiVersion, kind and metadata.name of
a kind corral serves); everything else is the server's to validate. Problems are reported as one
line naming the file, the document number (1-based) and the field.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["Manifest", "ManifestError", "load_manifests"]


class ManifestError(Exception):
    """A manifest that cannot be read; the message is the one line to show the user."""


@dataclass(frozen=True, slots=True)
class Manifest:
    source: str  # file path, or "-" for stdin
    index: int  # 1-based document number within the source
    obj: dict[str, Any]

    @property
    def where(self) -> str:
        return f"{self.source}: document {self.index}"


def _files(path: str) -> list[str]:
    if path == "-":
        return ["-"]
    if os.path.isdir(path):
        found = sorted(
            os.path.join(path, name) for name in os.listdir(path)
            if name.endswith((".yaml", ".yml", ".json")) and os.path.isfile(os.path.join(path, name))
        )
        if not found:
            raise ManifestError(f"{path}: no .yaml, .yml or .json files in this directory")
        return found
    if not os.path.exists(path):
        raise ManifestError(f"{path}: no such file or directory")
    return [path]


def _documents(source: str, text: str) -> list[Any]:
    from corral.api.wire.decoding import DecodeError, decode_json, yaml_documents

    if source.endswith(".json") or text.lstrip().startswith(("{", "[")):
        try:
            doc = decode_json(text.encode())
        except DecodeError as exc:
            raise ManifestError(f"{source}: document 1: {exc}") from None
        if isinstance(doc, list):
            return doc
        return [doc]
    docs: list[Any] = []
    try:
        for doc in yaml_documents(text):
            docs.append(doc)
    except DecodeError as exc:
        raise ManifestError(f"{source}: document {len(docs) + 1}: {exc}") from None
    return docs


def _expand(doc: Any) -> list[Any]:
    """A ``List`` (kind: List / PodList, items: [...]) stands for its items."""
    if isinstance(doc, dict) and isinstance(doc.get("items"), list) and str(doc.get("kind", "")).endswith("List"):
        return doc["items"]
    return [doc]


def _check(m_source: str, index: int, doc: Any) -> dict[str, Any]:
    from corral.api.resources import UnknownResource, by_kind

    where = f"{m_source}: document {index}"
    if not isinstance(doc, dict):
        raise ManifestError(f"{where}: expected a mapping (an API object), got {type(doc).__name__}")
    for field in ("apiVersion", "kind"):
        if not isinstance(doc.get(field), str) or not doc.get(field):
            raise ManifestError(f"{where}: {field}: Required value")
    try:
        resource = by_kind(doc["kind"])
    except UnknownResource:
        raise ManifestError(f'{where}: kind: corral does not serve kind "{doc["kind"]}"') from None
    if doc["apiVersion"] != resource.api_version:
        raise ManifestError(
            f'{where}: apiVersion: "{doc["apiVersion"]}" does not serve {doc["kind"]} '
            f'(use "{resource.api_version}")'
        )
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        raise ManifestError(f"{where}: metadata: Required value")
    if not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ManifestError(f"{where}: metadata.name: Required value")
    return doc


def load_manifests(paths: list[str]) -> list[Manifest]:
    """Every document of every file, checked; raises :class:`ManifestError` before any is sent."""
    out: list[Manifest] = []
    for path in paths:
        for source in _files(path):
            if source == "-":
                text = sys.stdin.read()
            else:
                try:
                    with open(source, encoding="utf-8") as f:
                        text = f.read()
                except (OSError, UnicodeDecodeError) as exc:
                    raise ManifestError(f"{source}: cannot read: {exc}") from None
            index = 0
            for doc in _documents(source, text):
                if doc is None:  # an empty document between '---' separators
                    continue
                for item in _expand(doc):
                    index += 1
                    out.append(Manifest(source, index, _check(source, index, item)))
    if not out:
        raise ManifestError(f"{', '.join(paths)}: no objects found")
    return out
