"""The plan request's JSON (``POST /corral/v1/plan``), checked field by field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from corral.api.quantity import QuantityError, to_milli, to_units
from corral.plan.dry_run import NodeSpec
from corral.plan.expand import PlanInputError

__all__ = ["PlanRequest", "parse_request", "MAX_ITEMS", "MAX_ADDED_NODES"]

MAX_ITEMS = 5_000  # manifests in one plan
MAX_ADDED_NODES = 10_000  # nodes --add-nodes may add in all
MAX_MANIFEST_CHARS = 1536 * 1024  # manifests given as text (the dashboard's plan page), as the largest object


@dataclass(slots=True)
class PlanRequest:
    items: list[dict[str, Any]]
    namespace: str = "default"
    without_nodes: list[str] = field(default_factory=list)
    add_nodes: list[NodeSpec] = field(default_factory=list)
    scheduler_config: dict[str, Any] | None = None  # another configuration to try; None: the live one


def _strings(value: Any, path: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PlanInputError(path, "must be a list of names")
    return value


def _node_spec(value: Any, path: str) -> NodeSpec:
    if not isinstance(value, dict):
        raise PlanInputError(path, "must be an object: {count, cpu, memory, pods, labels}")
    unknown = sorted(set(value) - {"count", "cpu", "memory", "pods", "labels"})
    if unknown:
        raise PlanInputError(f"{path}.{unknown[0]}", "unknown field (count, cpu, memory, pods and labels are known)")
    count = value.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise PlanInputError(f"{path}.count", "must be a positive integer")
    shape: dict[str, str] = {}
    for name, convert in (("cpu", to_milli), ("memory", to_units)):
        raw = value.get(name)
        if raw is None:
            raise PlanInputError(f"{path}.{name}", "Required value")
        try:
            if convert(str(raw)) <= 0:
                raise QuantityError("must be more than zero")
        except (QuantityError, ValueError) as exc:
            raise PlanInputError(f"{path}.{name}", f"{raw!r} is not a quantity: {exc}") from None
        shape[name] = str(raw)
    pods = value.get("pods", 110)
    if not isinstance(pods, int) or isinstance(pods, bool) or pods < 1:
        raise PlanInputError(f"{path}.pods", "must be a positive integer")
    labels = value.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise PlanInputError(f"{path}.labels", "must map label names to string values")
    return NodeSpec(count, shape["cpu"], shape["memory"], pods, tuple(sorted(labels.items())))


def _documents(text: Any) -> list[Any]:
    """``manifests``: YAML or JSON text as a user pastes it (documents, Lists expanded), decoded
    with the API's bounds (size, depth, aliases)."""
    from corral.api.wire.decoding import DecodeError, yaml_documents

    if not isinstance(text, str) or not text.strip():
        raise PlanInputError("manifests", "must be the manifests' YAML or JSON text")
    if len(text) > MAX_MANIFEST_CHARS:
        raise PlanInputError("manifests", f"at most {MAX_MANIFEST_CHARS} characters")
    items: list[Any] = []
    read = 0  # documents read so far: an error is in the next one
    try:
        for doc in yaml_documents(text):  # JSON is YAML too
            read += 1
            if doc is None:
                continue
            if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
                items += doc["items"]
            else:
                items.append(doc)
    except DecodeError as exc:
        raise PlanInputError("manifests", f"document {read + 1}: {exc}") from None
    return items


def parse_request(body: Any) -> PlanRequest:
    """The plan request's JSON, checked; :class:`PlanInputError` names the field that is wrong."""
    if not isinstance(body, dict):
        raise PlanInputError("", "the request body must be a JSON object (a PlanRequest)")
    unknown = sorted(set(body) - {"apiVersion", "kind", "namespace", "items", "manifests", "withoutNodes",
                                  "addNodes", "schedulerConfig"})
    if unknown:
        raise PlanInputError(unknown[0], "unknown field")
    if "manifests" in body:
        if "items" in body:
            raise PlanInputError("manifests", "give items or manifests, not both")
        body = {**body, "items": _documents(body["manifests"])}
    items = body.get("items")
    if not isinstance(items, list) or not items:
        raise PlanInputError("items", "Required value: the manifests to plan")
    if len(items) > MAX_ITEMS:
        raise PlanInputError("items", f"at most {MAX_ITEMS} manifests in one plan (got {len(items)})")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise PlanInputError(f"items[{i}]", "must be an object (an API object)")
    namespace = body.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise PlanInputError("namespace", "must be a string")
    adds = body.get("addNodes") or []
    if not isinstance(adds, list):
        raise PlanInputError("addNodes", "must be a list")
    add_nodes = [_node_spec(a, f"addNodes[{i}]") for i, a in enumerate(adds)]
    if sum(a.count for a in add_nodes) > MAX_ADDED_NODES:
        raise PlanInputError("addNodes", f"at most {MAX_ADDED_NODES} nodes in all")
    config = body.get("schedulerConfig")
    if config is not None and not isinstance(config, dict):
        raise PlanInputError("schedulerConfig", "must be an object (a scheduler configuration)")
    return PlanRequest(items, namespace, _strings(body.get("withoutNodes") or [], "withoutNodes"), add_nodes, config)
