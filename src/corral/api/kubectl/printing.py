"""What ``kubectl get`` shows for each kind: Kubernetes' printed columns, computed from the objects.

The server answers ``Accept: application/json;as=Table;...`` with these (see
:mod:`corral.server.http.tables`); corral's own CLI prints its statuses and ages with the same functions,
so the two never disagree. Each kind's columns and cells follow Kubernetes' printers (names, types,
priorities, the status a pod's containers add up to, ages as ``HumanDuration`` writes them); every
column is always computed, and clients hide the ``priority: 1`` ones unless asked for ``-o wide``.
Objects are plain dicts as stored; a field that is missing prints as Kubernetes prints it
(``<none>``, ``<unknown>``), never as an error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from corral.api.selectors import selector_string

__all__ = ["Column", "columns_for", "own_columns", "row_cells", "row_conditions", "human_duration", "age", "pod_status",
           "pod_ready", "pod_restarts", "node_status", "node_roles"]

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str  # string | integer | number | boolean | date
    cell: Callable[[Obj, float], Any]  # (object, now as epoch seconds) → the cell's value
    description: str = ""
    format: str = ""  # "name" for the object's name column, "date" for a timestamp
    priority: int = 0  # 1: shown with -o wide only

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "format": self.format,
                "description": self.description, "priority": self.priority}


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def _status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def _epoch(value: Any) -> float | None:
    """An RFC 3339 timestamp (seconds or micro, 'Z' or an offset) as epoch seconds; None if absent or bad."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00")).timestamp()
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """Kubernetes' ``duration.HumanDuration``: 45s, 5m10s, 3h20m, 2d4h, 400d, 3y20d."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    if hours < 24 * 365 * 8:
        return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
    return f"{days // 365}y"


def age(timestamp: Any, now: float | None = None) -> str:
    """The time since ``timestamp`` as kubectl prints it; ``<unknown>`` without one."""
    then = _epoch(timestamp)
    if then is None:
        return "<unknown>"
    return human_duration((time.time() if now is None else now) - then)


# --- pods ----------------------------------------------------------------------------------------------

_NODE_UNREACHABLE = "NodeLost"  # the pod reason Kubernetes' node controller sets for an unreachable node


def _pod_summary(pod: Obj) -> tuple[str, int, int, float | None]:
    """(status, ready containers, restarts, last restart as epoch seconds), as Kubernetes' printPod."""
    spec, status = _spec(pod), _status(pod)
    reason = status.get("reason") or status.get("phase") or ""
    for cond in status.get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    restarts = ready = 0
    last_restart: float | None = None
    init_specs = spec.get("initContainers") or ()
    initializing = False
    for i, cs in enumerate(status.get("initContainerStatuses") or ()):
        restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        term, waiting = state.get("terminated"), state.get("waiting")
        if term is not None and not term.get("exitCode"):
            continue
        initializing = True
        if term is not None:
            reason = ("Init:" + term["reason"] if term.get("reason") else
                      f"Init:Signal:{term['signal']}" if term.get("signal") else f"Init:ExitCode:{term.get('exitCode')}")
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        break
    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True"
                      for c in status.get("conditions") or ())
    if not initializing or initialized:
        restarts = 0
        has_running = False
        for cs in reversed(status.get("containerStatuses") or ()):
            restarts += int(cs.get("restartCount") or 0)
            finished = _epoch(((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
            if finished is not None and (last_restart is None or finished > last_restart):
                last_restart = finished
            state = cs.get("state") or {}
            waiting, term = state.get("waiting"), state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif term is not None and term.get("reason"):
                reason = term["reason"]
            elif term is not None:
                reason = f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode')}"
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            pod_ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                            for c in status.get("conditions") or ())
            reason = "Running" if pod_ready else "NotReady"
    if _meta(pod).get("deletionTimestamp"):
        if status.get("reason") == _NODE_UNREACHABLE:
            reason = "Unknown"
        elif status.get("phase") not in ("Succeeded", "Failed"):
            reason = "Terminating"
    return reason or "Unknown", ready, restarts, last_restart


def pod_status(pod: Obj) -> str:
    """STATUS as kubectl shows it: a container's waiting or terminated reason, Init:1/2, Terminating, or the phase."""
    return _pod_summary(pod)[0]


def pod_ready(pod: Obj) -> str:
    return f"{_pod_summary(pod)[1]}/{len(_spec(pod).get('containers') or ())}"


def pod_restarts(pod: Obj, now: float | None = None) -> str:
    _, _, restarts, last = _pod_summary(pod)
    if restarts and last is not None:
        return f"{restarts} ({human_duration((time.time() if now is None else now) - last)} ago)"
    return str(restarts)


def _pod_ip(pod: Obj, _now: float) -> str:
    ips = _status(pod).get("podIPs") or ()
    return (ips[0].get("ip") if ips else None) or _status(pod).get("podIP") or "<none>"


def _readiness_gates(pod: Obj, _now: float) -> str:
    gates = _spec(pod).get("readinessGates") or ()
    if not gates:
        return "<none>"
    true = {c.get("type") for c in _status(pod).get("conditions") or () if c.get("status") == "True"}
    return f"{sum(1 for g in gates if g.get('conditionType') in true)}/{len(gates)}"


# --- nodes ---------------------------------------------------------------------------------------------


def node_status(node: Obj) -> str:
    """Ready / NotReady / Unknown (no Ready condition), with ,SchedulingDisabled when cordoned."""
    parts = []
    for cond in _status(node).get("conditions") or ():
        if cond.get("type") == "Ready":
            parts.append("Ready" if cond.get("status") == "True" else "NotReady")
            break
    if not parts:
        parts.append("Unknown")
    if _spec(node).get("unschedulable"):
        parts.append("SchedulingDisabled")
    return ",".join(parts)


def node_roles(node: Obj) -> str:
    roles = set()
    for key, value in (_meta(node).get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/"):
            roles.add(key.removeprefix("node-role.kubernetes.io/"))
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return ",".join(sorted(r for r in roles if r)) or "<none>"


def _node_address(kind: str) -> Callable[[Obj, float], str]:
    def cell(node: Obj, _now: float) -> str:
        for a in _status(node).get("addresses") or ():
            if a.get("type") == kind:
                return a.get("address") or "<none>"
        return "<none>"
    return cell


def _node_info(field: str) -> Callable[[Obj, float], str]:
    return lambda node, _now: (_status(node).get("nodeInfo") or {}).get(field) or "<unknown>"


# --- events --------------------------------------------------------------------------------------------


def _event_times(ev: Obj, now: float) -> tuple[str, str]:
    first = age(ev.get("firstTimestamp") or ev.get("eventTime"), now)
    last = age(ev["lastTimestamp"], now) if ev.get("lastTimestamp") else first
    series = ev.get("series") or {}
    if series.get("lastObservedTime"):
        last = age(series["lastObservedTime"], now)
    return first, last


def _event_count(ev: Obj, _now: float) -> int:
    series = ev.get("series") or {}
    return int(series.get("count") or 0) if series else int(ev.get("count") or 0) or 1


def _event_object(ev: Obj, _now: float) -> str:
    io = ev.get("involvedObject") or {}
    kind = str(io.get("kind") or "").lower()
    return f"{kind}/{io['name']}" if io.get("name") else kind


def _event_source(ev: Obj, _now: float) -> str:
    src = ev.get("source") or {}
    component, host = src.get("component") or "", src.get("host") or ""
    if not component and not host:
        component, host = ev.get("reportingComponent") or "", ev.get("reportingInstance") or ""
    return f"{component}, {host}" if host else component


# --- columns per kind ----------------------------------------------------------------------------------

_NAME_DESC = "Name must be unique within a namespace."
_AGE_DESC = ("CreationTimestamp is a timestamp representing the server time when this object was created. "
             "Represented in RFC3339 form and is in UTC.")


def _name(obj: Obj, _now: float) -> str:
    return _meta(obj).get("name", "")


def _age(obj: Obj, now: float) -> str:
    return age(_meta(obj).get("creationTimestamp"), now)


def _created_at(obj: Obj, _now: float) -> str:
    then = _epoch(_meta(obj).get("creationTimestamp"))
    return "<unknown>" if then is None else datetime.fromtimestamp(then, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


NAME = Column("Name", "string", _name, _NAME_DESC, "name")
AGE = Column("Age", "string", _age, _AGE_DESC)
_DEFAULT = [NAME, Column("Created At", "date", _created_at, _AGE_DESC)]


def _binding_subjects(kind: str) -> Callable[[Obj, float], str]:
    def cell(binding: Obj, _now: float) -> str:
        names = []
        for s in binding.get("subjects") or ():
            if s.get("kind") == kind:
                names.append(f"{s.get('namespace')}/{s.get('name')}" if kind == "ServiceAccount" else s.get("name", ""))
        return ", ".join(names)
    return cell


_BINDING = [
    NAME,
    Column("Role", "string", lambda o, _n: f"{(o.get('roleRef') or {}).get('kind', '')}/{(o.get('roleRef') or {}).get('name', '')}",
           "RoleRef references a Role or a ClusterRole."),
    AGE,
    Column("Users", "string", _binding_subjects("User"), "Users in the binding.", priority=1),
    Column("Groups", "string", _binding_subjects("Group"), "Groups in the binding.", priority=1),
    Column("ServiceAccounts", "string", _binding_subjects("ServiceAccount"), "ServiceAccounts in the binding.",
           priority=1),
]

def _job_spec(obj: Obj) -> Obj:
    """A workload's spec, or the spec of the Jobs a CronJob makes."""
    spec = _spec(obj)
    return ((spec.get("jobTemplate") or {}).get("spec") or {}) if "jobTemplate" in spec else spec


def _containers(field: str) -> Callable[[Obj, float], str]:
    def cell(obj: Obj, _now: float) -> str:
        spec = ((_job_spec(obj).get("template") or {}).get("spec")) or {}
        return ",".join(str(c.get(field) or "") for c in spec.get("containers") or ())
    return cell


def _job_state(job: Obj, _now: float) -> str:
    """Kubernetes' STATUS column of a Job: its finished or suspended condition, else Running."""
    held = {c.get("type") for c in _status(job).get("conditions") or () if c.get("status") == "True"}
    for kind in ("Failed", "Complete", "Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if kind in held:
            return {"FailureTarget": "Failing", "SuccessCriteriaMet": "Complete"}.get(kind, kind)
    return "Running"


def _job_completions(job: Obj, _now: float) -> str:
    spec, done = _spec(job), int(_status(job).get("succeeded") or 0)
    if spec.get("completions") is not None:
        return f"{done}/{spec['completions']}"
    parallelism = int(spec.get("parallelism") or 0)
    return f"{done}/1 of {parallelism}" if parallelism > 1 else f"{done}/1"


def _job_duration(job: Obj, now: float) -> str:
    start = _epoch(_status(job).get("startTime"))
    if start is None:
        return ""
    end = _epoch(_status(job).get("completionTime"))
    return human_duration((end if end is not None else now) - start)


def _last_schedule(cj: Obj, now: float) -> str:
    return age(_status(cj).get("lastScheduleTime"), now) if _status(cj).get("lastScheduleTime") else "<none>"


def _selector(obj: Obj, _now: float) -> str:
    return selector_string(_spec(obj).get("selector")) or "<none>"


def _count(source: Callable[[Obj], Obj], field: str) -> Callable[[Obj, float], int]:
    return lambda o, _n: int(source(o).get(field) or 0)


_WORKLOAD_WIDE = [
    Column("Containers", "string", _containers("name"), "Names of each container in the template.", priority=1),
    Column("Images", "string", _containers("image"), "Images referenced by each container in the template.",
           priority=1),
    Column("Selector", "string", _selector, "Label selector for pods. Existing pods selected by it are adopted.",
           priority=1),
]

_COLUMNS: dict[str, list[Column]] = {
    "Pod": [
        NAME,
        Column("Ready", "string", lambda o, _n: pod_ready(o), "The aggregate readiness state of this pod for accepting traffic."),
        Column("Status", "string", lambda o, _n: pod_status(o), "The aggregate status of the containers in this pod."),
        Column("Restarts", "string", pod_restarts,
               "The number of times the containers in this pod have been restarted and when the last container "
               "in this pod has restarted."),
        AGE,
        Column("IP", "string", _pod_ip, "IP address allocated to the pod.", priority=1),
        Column("Node", "string", lambda o, _n: _spec(o).get("nodeName") or "<none>",
               "Name of the Node this pod is running on.", priority=1),
        Column("Nominated Node", "string", lambda o, _n: _status(o).get("nominatedNodeName") or "<none>",
               "Name of the Node where this pod is nominated to run once the pods it preempts are gone.",
               priority=1),
        Column("Readiness Gates", "string", _readiness_gates, "Readiness gates of the pod that are true.",
               priority=1),
    ],
    "Node": [
        NAME,
        Column("Status", "string", lambda o, _n: node_status(o), "The status of the node."),
        Column("Roles", "string", lambda o, _n: node_roles(o), "The roles of the node."),
        AGE,
        Column("Version", "string", lambda o, _n: (_status(o).get("nodeInfo") or {}).get("kubeletVersion") or "",
               "Kubelet Version reported by the node."),
        Column("Internal-IP", "string", _node_address("InternalIP"), "List of internal IPs for the node.", priority=1),
        Column("External-IP", "string", _node_address("ExternalIP"), "List of external IPs for this node.", priority=1),
        Column("OS-Image", "string", _node_info("osImage"), "OS image reported by the node.", priority=1),
        Column("Kernel-Version", "string", _node_info("kernelVersion"), "Kernel version reported by the node.",
               priority=1),
        Column("Container-Runtime", "string", _node_info("containerRuntimeVersion"),
               "Container runtime and version reported by the node.", priority=1),
    ],
    "Event": [
        Column("Last Seen", "string", lambda o, n: _event_times(o, n)[1], "The time the event was last seen."),
        Column("Type", "string", lambda o, _n: o.get("type") or "", "Type of this event (Normal, Warning)."),
        Column("Reason", "string", lambda o, _n: o.get("reason") or "", "The reason for the transition into the object's current status."),
        Column("Object", "string", _event_object, "The object that this event is about."),
        Column("Subobject", "string", lambda o, _n: (o.get("involvedObject") or {}).get("fieldPath") or "",
               "The subobject (a container's field path) that this event is about.", priority=1),
        Column("Source", "string", _event_source, "The component reporting this event.", priority=1),
        Column("Message", "string", lambda o, _n: (o.get("message") or "").strip(), "A description of the status of this operation."),
        Column("First Seen", "string", lambda o, n: _event_times(o, n)[0], "The time the event was first seen.",
               priority=1),
        Column("Count", "integer", _event_count, "The number of times this event has occurred.", priority=1),
        Column("Name", "string", _name, _NAME_DESC, "name", priority=1),
    ],
    "Namespace": [
        NAME,
        Column("Status", "string", lambda o, _n: _status(o).get("phase") or "Active", "The status of the namespace."),
        AGE,
    ],
    "Lease": [
        NAME,
        Column("Holder", "string", lambda o, _n: _spec(o).get("holderIdentity") or "",
               "The holder of the lease."),
        AGE,
    ],
    "PodGroup": [
        NAME,
        Column("Min Member", "integer", lambda o, _n: int(_spec(o).get("minMember") or 0),
               "How many members must have a place before any is bound."),
        Column("Scheduled", "integer", lambda o, _n: int(_status(o).get("scheduled") or 0),
               "Members with a place: bound, or held for the gang."),
        Column("Phase", "string", lambda o, _n: _status(o).get("phase") or "Pending",
               "Pending, Scheduling (places held, waiting for the rest) or Scheduled."),
        AGE,
    ],
    "Placement": [
        NAME,
        Column("Type", "string", lambda o, _n: (_spec(o).get("policy") or {}).get("placementType") or "PickAll",
               "PickAll, PickN or PickFixed."),
        Column("Desired", "integer", lambda o, _n: int(_status(o).get("desired") or 0),
               "Copies the policy asks for (PickAll: the eligible nodes)."),
        Column("Scheduled", "integer", lambda o, _n: int(_status(o).get("scheduled") or 0),
               "Nodes selected for a copy."),
        Column("Available", "integer", lambda o, _n: int(_status(o).get("available") or 0),
               "Copies running for unavailablePeriodSeconds."),
        AGE,
    ],
    "PriorityClass": [
        NAME,
        Column("Value", "integer", lambda o, _n: int(o.get("value") or 0),
               "The integer value of this priority class: pods of a higher value are placed first and may preempt."),
        Column("Global-Default", "boolean", lambda o, _n: bool(o.get("globalDefault")),
               "Whether this is the priority class of pods that name none."),
        AGE,
        Column("PreemptionPolicy", "string", lambda o, _n: o.get("preemptionPolicy") or "PreemptLowerPriority",
               "The policy for preempting pods of lower priority."),
    ],
    "PodDisruptionBudget": [
        NAME,
        Column("Min Available", "string", lambda o, _n: str(_spec(o).get("minAvailable", "N/A")),
               "The minimum number of pods that must be available."),
        Column("Max Unavailable", "string", lambda o, _n: str(_spec(o).get("maxUnavailable", "N/A")),
               "The maximum number of pods that may be unavailable."),
        Column("Allowed Disruptions", "integer",
               lambda o, _n: int((o.get("status") or {}).get("disruptionsAllowed") or 0),
               "How many more pods may be evicted now (the disruption controller's figure)."),
        AGE,
    ],
    "ReplicaSet": [
        NAME,
        Column("Desired", "integer", lambda o, _n: int(_spec(o).get("replicas", 1)), "Number of desired pods."),
        Column("Current", "integer", _count(_status, "replicas"), "Number of actual replicas."),
        Column("Ready", "integer", _count(_status, "readyReplicas"), "The number of ready replicas."),
        AGE,
        *_WORKLOAD_WIDE,
    ],
    "Deployment": [
        NAME,
        Column("Ready", "string", lambda o, _n: f"{int(_status(o).get('readyReplicas') or 0)}/{int(_spec(o).get('replicas', 1))}",
               "Number of the pod with ready state"),
        Column("Up-to-date", "string", lambda o, _n: str(int(_status(o).get("updatedReplicas") or 0)),
               "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
        Column("Available", "string", lambda o, _n: str(int(_status(o).get("availableReplicas") or 0)),
               "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
        AGE,
        *_WORKLOAD_WIDE,
    ],
    "ConfigMap": [
        NAME,
        Column("Data", "integer", lambda o, _n: len(o.get("data") or {}) + len(o.get("binaryData") or {}),
               "The number of keys (data and binaryData)."),
        AGE,
    ],
    "Secret": [
        NAME,
        Column("Type", "string", lambda o, _n: o.get("type") or "Opaque", "The type of the secret."),
        Column("Data", "integer", lambda o, _n: len(o.get("data") or {}), "The number of keys."),
        AGE,
    ],
    "DaemonSet": [
        NAME,
        Column("Desired", "integer", _count(_status, "desiredNumberScheduled"),
               "The number of nodes that should be running the daemon pod."),
        Column("Current", "integer", _count(_status, "currentNumberScheduled"),
               "The number of nodes running at least one daemon pod and are supposed to."),
        Column("Ready", "integer", _count(_status, "numberReady"),
               "The number of nodes that should be running the daemon pod and have one or more of the daemon pod "
               "running and ready."),
        Column("Up-to-date", "integer", _count(_status, "updatedNumberScheduled"),
               "The total number of nodes that are running updated daemon pod."),
        Column("Available", "integer", _count(_status, "numberAvailable"),
               "The number of nodes that should be running the daemon pod and have one or more of the daemon pod "
               "running and available (ready for at least spec.minReadySeconds)."),
        Column("Node Selector", "string", lambda o, _n: ",".join(
            f"{k}={v}" for k, v in sorted((((_spec(o).get("template") or {}).get("spec") or {}).get("nodeSelector")
                                           or {}).items())) or "<none>",
               "NodeSelector is a selector which must be true for the pod to fit on a node."),
        AGE,
        *_WORKLOAD_WIDE,
    ],
    "Job": [
        NAME,
        Column("Status", "string", _job_state, "Status of the job."),
        Column("Completions", "string", _job_completions, "The desired number of successfully finished pods the "
               "job should be run with."),
        Column("Duration", "string", _job_duration, "Time required to complete the job."),
        AGE,
        *_WORKLOAD_WIDE,
    ],
    "CronJob": [
        NAME,
        Column("Schedule", "string", lambda o, _n: _spec(o).get("schedule", ""), "The schedule in Cron format."),
        Column("Timezone", "string", lambda o, _n: _spec(o).get("timeZone") or "<none>", "The time zone name for "
               "the given schedule."),
        Column("Suspend", "boolean", lambda o, _n: bool(_spec(o).get("suspend")), "Whether it is suspended."),
        Column("Active", "integer", lambda o, _n: len(_status(o).get("active") or ()), "The number of running jobs."),
        Column("Last Schedule", "string", _last_schedule, "The last time the job was successfully scheduled."),
        AGE,
        *_WORKLOAD_WIDE,
    ],
    "Role": _DEFAULT,
    "ClusterRole": _DEFAULT,
    "RoleBinding": _BINDING,
    "ClusterRoleBinding": _BINDING,
}


def own_columns(kind: str) -> list[Column] | None:
    """The kind's own columns, None for a kind shown with the default ones."""
    return _COLUMNS.get(kind)


def columns_for(kind: str) -> list[Column]:
    """The kind's columns; a kind without its own: NAME and CREATED AT, as Kubernetes' default."""
    return _COLUMNS.get(kind, _DEFAULT)


def row_cells(columns: list[Column], obj: Obj, now: float) -> list[Any]:
    return [c.cell(obj, now) for c in columns]


def row_conditions(kind: str, obj: Obj) -> list[Obj] | None:
    """A finished pod's row is marked Completed, as Kubernetes marks it (clients may hide such rows)."""
    if kind == "Pod" and _status(obj).get("phase") in ("Succeeded", "Failed"):
        phase = _status(obj)["phase"]
        return [{"type": "Completed", "status": "True", "reason": phase,
                 "message": "The pod has completed successfully." if phase == "Succeeded" else "The pod failed."}]
    return None
