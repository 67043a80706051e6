"""Tables and documents for the terminal: kubectl's columns, rich's layout, YAML and JSON.

Objects are plain dicts as the server returned them, so every field the user wrote is shown.
Statuses, readiness, restarts and ages come from :mod:`corral.api.kubectl.printing`, the functions behind
the server's tables, so ``corral get`` and ``kubectl get`` never disagree; corral adds a few columns
of its own (a node's allocatable cpu and memory, its measured download).
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Iterable

from corral.api.kubectl.printing import age, node_status, own_columns, pod_ready, pod_restarts, pod_status
from corral.api.quantity import QuantityError, format_bytes, format_cpu, to_milli, to_units
from corral.api.resources import ResourceType

__all__ = ["table_rows", "print_table", "dump", "age", "event_seen", "node_status", "pod_status", "human_bytes"]


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _cpu(value: Any) -> str:
    try:
        return format_cpu(to_milli(value))
    except QuantityError:
        return str(value)


def human_bytes(amount: int) -> str:
    """Bytes as people read them: exact binary suffixes when they fit (32Gi), else rounded to Mi
    below 10 Gi (1431Mi) and to a tenth of a Gi above (15.6Gi); never a bare 16001437696."""
    exact = format_bytes(amount)
    mi, gi = 2**20, 2**30
    if not exact.isdigit() and not (exact.endswith("Ki") and amount >= mi):  # 15626404Ki reads as 14.9Gi
        return exact
    if amount >= 10 * gi:
        return f"{amount / gi:.1f}Gi"
    if amount >= mi:
        return f"{round(amount / mi)}Mi"
    return f"{round(amount / 1024)}Ki" if amount >= 1024 else str(amount)


def _mem(value: Any) -> str:
    try:
        return human_bytes(to_units(value))
    except QuantityError:
        return str(value)


def _taints(node: dict[str, Any]) -> str:
    taints = (node.get("spec") or {}).get("taints") or ()
    return ",".join(f"{t.get('key')}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect')}"
                    for t in taints) or "<none>"


def _internal_ip(node: dict[str, Any]) -> str:
    for a in (node.get("status") or {}).get("addresses") or ():
        if a.get("type") == "InternalIP":
            return a.get("address", "")
    return "<none>"


def _labels(obj: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((_meta(obj).get("labels") or {}).items())) or "<none>"


def event_seen(ev: dict[str, Any]) -> str:
    """When an event was last seen, and for a repeated one how often since when, as kubectl shows it:
    ``2m (x16 over 12m)``."""
    last = age(ev.get("lastTimestamp") or ev.get("eventTime") or _meta(ev).get("creationTimestamp"))
    count = ev.get("count") or (ev.get("series") or {}).get("count") or 1
    if not isinstance(count, int) or count < 2:
        return last
    return f"{last} (x{count} over {age(ev.get('firstTimestamp') or ev.get('eventTime'))})"


def _event_object(ev: dict[str, Any]) -> str:
    io = ev.get("involvedObject") or {}
    return f"{str(io.get('kind', '')).lower()}/{io.get('name', '')}"


Column = tuple[str, Callable[[dict[str, Any]], str]]

_COLUMNS: dict[str, list[Column]] = {
    "Pod": [
        ("NAME", lambda o: _meta(o).get("name", "")),
        ("READY", pod_ready),
        ("STATUS", pod_status),
        ("RESTARTS", pod_restarts),
        ("NODE", lambda o: (o.get("spec") or {}).get("nodeName") or "<none>"),
        ("AGE", lambda o: age(_meta(o).get("creationTimestamp"))),
    ],
    "Node": [
        ("NAME", lambda o: _meta(o).get("name", "")),
        ("STATUS", node_status),
        ("CPU", lambda o: _cpu(((o.get("status") or {}).get("allocatable") or {}).get("cpu", "0"))),
        ("MEMORY", lambda o: _mem(((o.get("status") or {}).get("allocatable") or {}).get("memory", "0"))),
        ("AGE", lambda o: age(_meta(o).get("creationTimestamp"))),
    ],
    "Namespace": [
        ("NAME", lambda o: _meta(o).get("name", "")),
        ("STATUS", lambda o: (o.get("status") or {}).get("phase", "Active")),
        ("AGE", lambda o: age(_meta(o).get("creationTimestamp"))),
    ],
    "Event": [
        ("LAST SEEN", event_seen),
        ("TYPE", lambda o: o.get("type") or "Normal"),
        ("REASON", lambda o: o.get("reason") or ""),
        ("OBJECT", _event_object),
        ("MESSAGE", lambda o: o.get("message") or ""),
    ],
    "Lease": [
        ("NAME", lambda o: _meta(o).get("name", "")),
        ("HOLDER", lambda o: (o.get("spec") or {}).get("holderIdentity") or ""),
        ("AGE", lambda o: age(_meta(o).get("creationTimestamp"))),
    ],
    "PriorityClass": [
        ("NAME", lambda o: _meta(o).get("name", "")),
        ("VALUE", lambda o: str(o.get("value", ""))),
        ("GLOBAL-DEFAULT", lambda o: "true" if o.get("globalDefault") else "false"),
        ("AGE", lambda o: age(_meta(o).get("creationTimestamp"))),
    ],
}

_WIDE: dict[str, list[Column]] = {
    "Pod": [
        ("IP", lambda o: (o.get("status") or {}).get("podIP") or "<none>"),
        ("NOMINATED NODE", lambda o: (o.get("status") or {}).get("nominatedNodeName") or "<none>"),
        ("PRIORITY", lambda o: str((o.get("spec") or {}).get("priority", 0))),
    ],
    "Node": [
        ("PODS", lambda o: str(((o.get("status") or {}).get("allocatable") or {}).get("pods", ""))),
        ("INTERNAL-IP", _internal_ip),
        ("TAINTS", _taints),
        ("DOWNLOAD", lambda o: ((((o.get("status") or {}).get("network") or {}).get("throughput") or {})
                                .get("download") or "<none>")),
        ("LABELS", _labels),
    ],
}

_DEFAULT_COLUMNS: list[Column] = [
    ("NAME", lambda o: _meta(o).get("name", "")),
    ("AGE", lambda o: age(_meta(o).get("creationTimestamp"))),
]


def _server_columns(kind: str, wide: bool) -> list[Column] | None:
    """The columns the server's tables give a kind corral's CLI has none of its own for (ReplicaSets,
    Deployments, ...): the same cells, so ``corral get`` and ``kubectl get`` agree."""
    printed = own_columns(kind)
    if printed is None:
        return None
    return [(c.name.upper(), lambda o, c=c: str(c.cell(o, time.time()))) for c in printed if wide or not c.priority]


def columns(resource: ResourceType, wide: bool, all_namespaces: bool, show_labels: bool = False) -> list[Column]:
    server = None if resource.kind in _COLUMNS else _server_columns(resource.kind, wide)
    cols = list(server or _COLUMNS.get(resource.kind, _DEFAULT_COLUMNS))
    if wide and server is None:
        cols += _WIDE.get(resource.kind, [("LABELS", _labels)] if resource.kind not in _COLUMNS else [])
    if show_labels and not any(name == "LABELS" for name, _ in cols):
        cols.append(("LABELS", _labels))
    if all_namespaces and resource.namespaced:
        cols.insert(0, ("NAMESPACE", lambda o: _meta(o).get("namespace", "")))
    return cols


def table_rows(resource: ResourceType, objs: Iterable[dict[str, Any]], *, wide: bool = False,
               all_namespaces: bool = False, show_labels: bool = False) -> tuple[list[str], list[list[str]]]:
    cols = columns(resource, wide, all_namespaces, show_labels)
    return [c[0] for c in cols], [[fn(o) for _, fn in cols] for o in objs]


def print_table(headers: list[str], rows: list[list[str]], *, out=None) -> None:
    """Columns aligned like kubectl's; bold headers on a terminal (via rich), plain text otherwise."""
    out = out or sys.stdout
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "   ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    if out.isatty():
        from rich.console import Console

        console = Console(file=out, highlight=False, soft_wrap=True)
        console.print(line(headers), style="bold", markup=False)
        for row in rows:
            console.print(line(row), markup=False)
    else:
        out.write("\n".join(line(r) for r in [headers, *rows]) + "\n")


def dump(obj: Any, fmt: str) -> str:
    if fmt == "json":
        import json

        return json.dumps(obj, indent=2) + "\n"
    import yaml

    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)
