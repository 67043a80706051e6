"""Defaulting of new objects, applied to the object dict before it is stored. No I/O here.

What Kubernetes users expect to find filled in: uid, creationTimestamp, generation, namespace; for
pods the scheduler name, restart policy, grace period, image pull policy, port protocols, toleration
operators, QoS class and phase Pending; for nodes allocatable = capacity when it is not given.
Priority from a PriorityClass needs a lookup and is done by the server (see ``server.admission``).
"""

from __future__ import annotations

import random
import secrets
import time
from datetime import datetime, timezone
from typing import Any

import msgspec

from corral.api.resources import ResourceType
from corral.api.kinds.apps import WORKLOAD_DEFAULTS
from corral.api.kinds.batch import BATCH_CREATE_DEFAULTS, BATCH_DEFAULTS
from corral.api.kinds.placement import PLACEMENT_DEFAULTS
from corral.api.kinds.scheduling import SCHEDULING_DEFAULTS
from corral.api.kinds.config import CONFIG_DEFAULTS
from corral.api.kinds.probes import probe_defaults

__all__ = ["now_rfc3339", "now_micro_rfc3339", "rfc3339", "apply_create_defaults", "apply_update_defaults", "generate_name", "DEFAULT_SCHEDULER"]

DEFAULT_SCHEDULER = "default-scheduler"
DEFAULT_GRACE_SECONDS = 30
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


_last_stamp: tuple[int, str] = (0, "")


def rfc3339(t: float) -> str:
    """``t`` (seconds since the epoch) as Kubernetes writes timestamps."""
    return datetime.fromtimestamp(int(t), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro_rfc3339(t: float | None = None) -> str:
    """Kubernetes' MicroTime (a Lease's ``renewTime`` and ``acquireTime``): microseconds, always six
    digits, which kubectl requires when it reads one (``describe node`` fails on a Lease without)."""
    t = time.time() if t is None else t
    second = int(t)
    return f"{rfc3339(second)[:-1]}.{int((t - second) * 1e6):06d}Z"


def now_rfc3339() -> str:
    """The current time as Kubernetes writes timestamps: second precision, UTC, ``Z``."""
    global _last_stamp
    second = int(time.time())
    if _last_stamp[0] != second:  # formatted once per second: it is on every write's path
        _last_stamp = (second, rfc3339(second))
    return _last_stamp[1]


_UUID_KEEP = ~(0xF000 << 64 | 0xC000 << 48)  # the version nibble and the variant bits cleared...
_UUID_SET = 0x4000 << 64 | 0x8000 << 48  # ...and set: version 4, RFC 4122 variant


def new_uid() -> str:
    """A random (version 4) UUID; from Python's fast generator, as uids need uniqueness, not secrecy.
    Formatted by hand: ``str(uuid.UUID(...))`` costs 2.5 times as much, on every create."""
    h = f"{random.getrandbits(128) & _UUID_KEEP | _UUID_SET:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def generate_name(prefix: str) -> str:
    """``generateName`` → a name with five random characters appended, as Kubernetes does."""
    return prefix + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))


def _pod_spec_defaults(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
    for container in (*spec.get("initContainers", ()), *spec.get("containers", ())):
        image = container.get("image") or ""
        tag = image.rsplit("/", 1)[-1]
        latest = ":" not in tag or tag.endswith(":latest")
        container.setdefault("imagePullPolicy", "Always" if latest and "@" not in tag else "IfNotPresent")
        for port in container.get("ports") or ():
            port.setdefault("protocol", "TCP")
        probe_defaults(container)
    for toleration in spec.get("tolerations") or ():
        if toleration.get("key") and "operator" not in toleration:
            toleration["operator"] = "Equal"


def _pod_defaults(obj: dict[str, Any]) -> None:
    _pod_spec_defaults(obj)
    spec = obj["spec"]
    status = obj.setdefault("status", {})
    status["qosClass"] = qos_class(spec)
    if spec.get("nodeName"):
        # Created already bound: no scheduler will touch it.
        status.setdefault("phase", "Scheduled")
        status.setdefault("conditions", [{
            "type": "PodScheduled", "status": "True", "lastTransitionTime": obj["metadata"]["creationTimestamp"],
        }])
    else:
        status.setdefault("phase", "Pending")


def qos_class(spec: dict[str, Any]) -> str:
    """Kubernetes' QoS class: Guaranteed, Burstable or BestEffort (from cpu and memory)."""
    containers = spec.get("containers") or ()
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        for name in ("cpu", "memory"):
            if name in requests or name in limits:
                any_set = True
            limit = limits.get(name)
            if limit is None or str(requests.get(name, limit)) != str(limit):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _node_defaults(obj: dict[str, Any]) -> None:
    status = obj.get("status")
    if isinstance(status, dict) and status.get("capacity") and not status.get("allocatable"):
        status["allocatable"] = dict(status["capacity"])


def _namespace_defaults(obj: dict[str, Any]) -> None:
    obj["status"] = {"phase": "Active"}


def _with_template(defaults):
    """A workload's defaults, and its pod template's as a pod's (ports' protocol, pull policy, ...),
    at ``spec.template`` (a CronJob's at ``spec.jobTemplate.spec.template``)."""
    def apply(obj: dict[str, Any]) -> None:
        defaults(obj)
        spec = obj.get("spec") or {}
        if isinstance(spec, dict) and "jobTemplate" in spec:
            spec = (spec.get("jobTemplate") or {}).get("spec") or {}
        template = spec.get("template") if isinstance(spec, dict) else None
        if isinstance(template, dict) and isinstance(template.setdefault("spec", {}), dict):
            _pod_spec_defaults(template)
    return apply


_WORKLOAD_DEFAULTS = {kind: _with_template(defaults) for kind, defaults in {**WORKLOAD_DEFAULTS, **BATCH_DEFAULTS}.items()}
_KIND_DEFAULTS = {"Pod": _pod_defaults, "Node": _node_defaults, "Namespace": _namespace_defaults, **_WORKLOAD_DEFAULTS,
                  **CONFIG_DEFAULTS, **{kind: _with_template(d) for kind, d in BATCH_CREATE_DEFAULTS.items()},
                  **SCHEDULING_DEFAULTS, **{kind: _with_template(d) for kind, d in PLACEMENT_DEFAULTS.items()}}
_SPEC_DEFAULTS = {"Pod": _pod_spec_defaults, **_WORKLOAD_DEFAULTS, **CONFIG_DEFAULTS, **SCHEDULING_DEFAULTS,
                  **{kind: _with_template(d) for kind, d in PLACEMENT_DEFAULTS.items()}}


def drop_nulls(obj: Any) -> None:
    """Remove every field whose value is a JSON null from ``obj``: Kubernetes reads a null as a field
    left out, so a ``replicas: null`` (a template rendered with nothing) is defaulted as if it were
    absent rather than stored for every reader to trip over. The encoded check costs well under a
    microsecond; the walk runs only when it finds one."""
    if b"null" in msgspec.json.encode(obj):
        _drop_nulls(obj)


def _drop_nulls(obj: Any) -> None:
    if isinstance(obj, dict):
        for key in [k for k, v in obj.items() if v is None]:
            del obj[key]
        children = obj.values()
    elif isinstance(obj, list):  # its null items stay: the type check refuses them where they matter
        children = obj
    else:
        return
    for child in children:
        if isinstance(child, (dict, list)):
            _drop_nulls(child)


def apply_update_defaults(resource: ResourceType, obj: dict[str, Any]) -> None:
    """Defaults that every write of the main resource gets (so re-applying a manifest that omits
    them is not a change). Mutates ``obj``."""
    drop_nulls(obj)
    spec_defaults = _SPEC_DEFAULTS.get(resource.kind)
    if spec_defaults is not None:
        spec_defaults(obj)


def apply_create_defaults(resource: ResourceType, obj: dict[str, Any], namespace: str | None) -> None:
    """Fill in what the server sets on create. Mutates ``obj``, which the caller owns."""
    drop_nulls(obj)
    obj["apiVersion"] = resource.api_version
    obj["kind"] = resource.kind
    meta = obj.setdefault("metadata", {})
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = generate_name(meta["generateName"])
    if resource.namespaced:
        meta["namespace"] = namespace or meta.get("namespace") or "default"
    else:
        meta.pop("namespace", None)
    meta["uid"] = new_uid()
    meta["creationTimestamp"] = now_rfc3339()
    meta["generation"] = 1
    for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
        meta.pop(key, None)
    kind_defaults = _KIND_DEFAULTS.get(resource.kind)
    if kind_defaults is not None:
        kind_defaults(obj)
