"""``corral describe``: an object in kubectl's describe layout, followed by its recent events."""

from __future__ import annotations

from typing import Any

from corral.cli.printers import age, event_seen, node_status, pod_status, print_table

__all__ = ["describe_text", "events_table"]


def _kv(lines: list[str], key: str, value: Any, indent: int = 0) -> None:
    lines.append(f"{' ' * indent}{key + ':':<{max(18 - indent, len(key) + 2)}}{value}")


def _mapping(values: dict[str, str] | None) -> list[str]:
    return [f"{k}={v}" for k, v in sorted((values or {}).items())] or ["<none>"]


def _block(lines: list[str], key: str, values: list[str], indent: int = 0) -> None:
    _kv(lines, key, values[0], indent)
    for v in values[1:]:
        lines.append(" " * 18 + v)


def _resources(lines: list[str], res: dict[str, Any] | None, indent: int) -> None:
    for kind in ("limits", "requests"):
        values = (res or {}).get(kind)
        if values:
            lines.append(f"{' ' * indent}{kind.capitalize()}:")
            for k, v in values.items():
                _kv(lines, k, v, indent + 2)


def _container_state(state: dict[str, Any] | None) -> str:
    state = state or {}
    if "running" in state:
        return f"Running (since {state['running'].get('startedAt', '?')})"
    if "terminated" in state:
        t = state["terminated"]
        return f"Terminated: {t.get('reason', '')} (exit code {t.get('exitCode', '?')})"
    if "waiting" in state:
        w = state["waiting"]
        return f"Waiting: {w.get('reason', '')}" + (f" ({w['message']})" if w.get("message") else "")
    return "Waiting"


def _conditions(lines: list[str], conditions: list[dict[str, Any]] | None) -> None:
    lines.append("Conditions:")
    if not conditions:
        lines.append("  <none>")
        return
    lines.append(f"  {'Type':<16}{'Status':<9}{'Reason':<20}Message")
    for c in conditions:
        lines.append(f"  {c.get('type', ''):<16}{c.get('status', ''):<9}{c.get('reason', '') or '':<20}"
                     f"{c.get('message', '') or ''}")


def _describe_pod(pod: dict[str, Any], lines: list[str]) -> None:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    _kv(lines, "Priority", spec.get("priority", 0))
    if spec.get("priorityClassName"):
        _kv(lines, "Priority Class", spec["priorityClassName"])
    _kv(lines, "Scheduler", spec.get("schedulerName", ""))
    _kv(lines, "Node", spec.get("nodeName") or "<none>")
    _kv(lines, "Status", pod_status(pod))
    if status.get("reason"):
        _kv(lines, "Reason", status["reason"])
    if status.get("message"):
        _kv(lines, "Message", status["message"])
    _kv(lines, "IP", status.get("podIP") or "<none>")
    _kv(lines, "QoS Class", status.get("qosClass", ""))
    statuses = {cs.get("name"): cs for cs in status.get("containerStatuses") or ()}
    lines.append("Containers:")
    for c in spec.get("containers") or ():
        lines.append(f"  {c.get('name')}:")
        _kv(lines, "Image", c.get("image", ""), 4)
        if c.get("command"):
            _kv(lines, "Command", " ".join(c["command"]), 4)
        if c.get("args"):
            _kv(lines, "Args", " ".join(c["args"]), 4)
        for p in c.get("ports") or ():
            host = f" (host {p['hostPort']})" if p.get("hostPort") else ""
            _kv(lines, "Port", f"{p.get('containerPort')}/{p.get('protocol', 'TCP')}{host}", 4)
        cs = statuses.get(c.get("name"))
        _kv(lines, "State", _container_state(cs.get("state") if cs else None), 4)
        if cs and cs.get("lastState"):
            _kv(lines, "Last State", _container_state(cs["lastState"]), 4)
        _kv(lines, "Restart Count", cs.get("restartCount", 0) if cs else 0, 4)
        _resources(lines, c.get("resources"), 4)
    _conditions(lines, status.get("conditions"))
    _block(lines, "Node-Selectors", _mapping(spec.get("nodeSelector")))
    tols = [f"{t.get('key', '')}{'=' + t['value'] if t.get('value') else ''}"
            f"{':' + t['effect'] if t.get('effect') else ''} op={t.get('operator', 'Equal')}"
            for t in spec.get("tolerations") or ()]
    _block(lines, "Tolerations", tols or ["<none>"])


def _describe_node(node: dict[str, Any], lines: list[str], pods: list[dict[str, Any]]) -> None:
    spec, status = node.get("spec") or {}, node.get("status") or {}
    taints = [f"{t.get('key')}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect')}"
              for t in spec.get("taints") or ()]
    _block(lines, "Taints", taints or ["<none>"])
    _kv(lines, "Unschedulable", "true" if spec.get("unschedulable") else "false")
    _kv(lines, "Status", node_status(node))
    _conditions(lines, status.get("conditions"))
    lines.append("Addresses:")
    for a in status.get("addresses") or ():
        _kv(lines, a.get("type", ""), a.get("address", ""), 2)
    for name in ("capacity", "allocatable"):
        lines.append(f"{name.capitalize()}:")
        for k, v in (status.get(name) or {}).items():
            _kv(lines, k, v, 2)
    info = status.get("nodeInfo") or {}
    if info:
        lines.append("System Info:")
        for k, v in info.items():
            _kv(lines, k, v, 2)
    tp = ((status.get("network") or {}).get("throughput")) or {}
    if tp:
        lines.append("Network Throughput:")
        for k in ("download", "upload", "lastTestTime"):
            if k in tp:
                _kv(lines, k, tp[k], 2)
    lines.append(f"Non-terminated Pods: ({len(pods)} in total)")
    for p in pods:
        m = p.get("metadata") or {}
        lines.append(f"  {m.get('namespace', ''):<16}{m.get('name', ''):<32}{pod_status(p)}")


def _describe_placement(placement: dict[str, Any], lines: list[str]) -> None:
    spec, status = placement.get("spec") or {}, placement.get("status") or {}
    policy = spec.get("policy") or {}
    kind = policy.get("placementType", "PickAll")
    _kv(lines, "Placement Type", kind)
    if kind == "PickN":
        _kv(lines, "Number Of Nodes", policy.get("numberOfNodes", 0))
    if kind == "PickFixed":
        _block(lines, "Node Names", list(policy.get("nodeNames") or ()) or ["<none>"])
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    _kv(lines, "Strategy", f"RollingUpdate: maxUnavailable {rolling.get('maxUnavailable', '25%')}, maxSurge "
                           f"{rolling.get('maxSurge', '25%')}, available after {rolling.get('unavailablePeriodSeconds', 60)}s")
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or ()
    _block(lines, "Images", [c.get("image", "") for c in containers] or ["<none>"])
    _kv(lines, "Copies", f"{status.get('desired', 0)} desired | {status.get('scheduled', 0)} scheduled | "
                         f"{status.get('bound', 0)} bound | {status.get('available', 0)} available")
    if status.get("policySnapshot"):
        _kv(lines, "Policy Snapshot", f"{status['policySnapshot']} (ControllerRevision)")
    _conditions(lines, status.get("conditions"))
    decisions = status.get("decisions") or ()
    lines.append("Decisions:" + ("" if decisions else "  <none yet: the scheduler has not decided>"))
    if decisions:
        import io

        def why(d: dict[str, Any]) -> str:
            scores = "  ".join(f"{k}={v:g}" for k, v in (d.get("scores") or {}).items())
            reason = d.get("reason") or ""
            snapshot = f" [snapshot {d['policySnapshot']}]" if d.get("policySnapshot") else ""
            return (f"{reason}; {scores}" if reason and scores else reason or scores) + snapshot

        rows = [[d.get("nodeName", ""), "yes" if d.get("selected") else "no", d.get("state") or "-",
                 f"{d['score']:g}" if d.get("score") is not None else "-", why(d)] for d in decisions]
        buf = io.StringIO()
        print_table(["Node", "Selected", "State", "Score", "Reason / Score By Plugin"], rows, out=buf)
        lines.extend(f"  {line}" for line in buf.getvalue().splitlines())
    if status.get("message"):
        _kv(lines, "Summary", status["message"])


def describe_text(kind: str, obj: dict[str, Any], *, node_pods: list[dict[str, Any]] | None = None) -> str:
    meta = obj.get("metadata") or {}
    lines: list[str] = []
    _kv(lines, "Name", meta.get("name", ""))
    if meta.get("namespace"):
        _kv(lines, "Namespace", meta["namespace"])
    _block(lines, "Labels", _mapping(meta.get("labels")))
    _block(lines, "Annotations", _mapping(meta.get("annotations")))
    _kv(lines, "Created", f"{meta.get('creationTimestamp', '')} ({age(meta.get('creationTimestamp'))} ago)")
    if meta.get("deletionTimestamp"):
        _kv(lines, "Deleting", f"by {meta['deletionTimestamp']}")
    if kind == "Pod":
        _describe_pod(obj, lines)
    elif kind == "Node":
        _describe_node(obj, lines, node_pods or [])
    elif kind == "Placement":
        _describe_placement(obj, lines)
    else:
        import yaml

        rest = {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}
        if rest:
            lines.append(yaml.safe_dump(rest, sort_keys=False).rstrip())
    return "\n".join(lines) + "\n"


def events_table(events: list[dict[str, Any]], out) -> None:
    out.write("Events:\n")
    if not events:
        out.write("  <none>\n")
        return
    rows = [[e.get("type") or "Normal", e.get("reason") or "",
             event_seen(e),
             str((e.get("source") or {}).get("component") or e.get("reportingComponent") or ""),
             e.get("message") or ""] for e in events]
    import io

    buf = io.StringIO()
    print_table(["Type", "Reason", "Age", "From", "Message"], rows, out=buf)
    out.write("".join(f"  {line}\n" for line in buf.getvalue().splitlines()))
