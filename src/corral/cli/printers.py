"""Tables and documents for the terminal: kubectl's columns, rich's layout, YAML and JSON.

Objects are plain dicts as the server returned them, so every field the user wrote is shown.
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from corral.api.quantity import QuantityError, format_bytes, format_cpu, to_milli, to_units
from corral.api.resources import ResourceType

__all__ = ["table_rows", "print_table", "dump", "age", "node_status", "pod_status"]


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.strptime(value[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """kubectl's short durations: 45s, 5m10s, 3h, 2d4h, 400d."""
    then = _parse_time(timestamp)
    if then is None:
        return "<unknown>"
    seconds = max(0, int(((now or datetime.now(timezone.utc)) - then).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    return f"{days}d{hours % 24}h" if days < 8 and hours % 24 else f"{days}d"


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def pod_status(pod: dict[str, Any]) -> str:
    if _meta(pod).get("deletionTimestamp"):
        return "Terminating"
    status = pod.get("status") or {}
    for cs in status.get("containerStatuses") or ():
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") and waiting["reason"] not in ("ContainerCreating", "PodInitializing"):
            return waiting["reason"]
    return status.get("reason") or status.get("phase") or "Unknown"


def node_status(node: dict[str, Any]) -> str:
    ready = "Unknown"
    for cond in (node.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            ready = {"True": "Ready", "False": "NotReady"}.get(cond.get("status"), "Unknown")
            if ready == "Unknown":
                ready = "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        ready += ",SchedulingDisabled"
    return ready if ready != "Unknown" else "Unknown"


def _cpu(value: Any) -> str:
    try:
        return format_cpu(to_milli(value))
    except QuantityError:
        return str(value)


def _mem(value: Any) -> str:
    try:
        return format_bytes(to_units(value))
    except QuantityError:
        return str(value)


def _ready_containers(pod: dict[str, Any]) -> str:
    total = len((pod.get("spec") or {}).get("containers") or ())
    ready = sum(1 for cs in (pod.get("status") or {}).get("containerStatuses") or () if cs.get("ready"))
    return f"{ready}/{total}"


def _restarts(pod: dict[str, Any]) -> str:
    return str(sum(cs.get("restartCount", 0) for cs in (pod.get("status") or {}).get("containerStatuses") or ()))


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


def _event_object(ev: dict[str, Any]) -> str:
    io = ev.get("involvedObject") or {}
    return f"{str(io.get('kind', '')).lower()}/{io.get('name', '')}"


Column = tuple[str, Callable[[dict[str, Any]], str]]

_COLUMNS: dict[str, list[Column]] = {
    "Pod": [
        ("NAME", lambda o: _meta(o).get("name", "")),
        ("READY", _ready_containers),
        ("STATUS", pod_status),
        ("RESTARTS", _restarts),
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
        ("LAST SEEN", lambda o: age(o.get("lastTimestamp") or o.get("eventTime") or _meta(o).get("creationTimestamp"))),
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


def columns(resource: ResourceType, wide: bool, all_namespaces: bool) -> list[Column]:
    cols = list(_COLUMNS.get(resource.kind, _DEFAULT_COLUMNS))
    if wide:
        cols += _WIDE.get(resource.kind, [("LABELS", _labels)] if resource.kind not in _COLUMNS else [])
    if all_namespaces and resource.namespaced:
        cols.insert(0, ("NAMESPACE", lambda o: _meta(o).get("namespace", "")))
    return cols


def table_rows(resource: ResourceType, objs: Iterable[dict[str, Any]], *, wide: bool = False,
               all_namespaces: bool = False) -> tuple[list[str], list[list[str]]]:
    cols = columns(resource, wide, all_namespaces)
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
