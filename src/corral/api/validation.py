"""Validation of API objects, with a Kubernetes field path for every problem. No I/O here.

:func:`validate` first converts the object dict to its typed model (so a wrong type is reported at
its JSON path), then checks what types cannot say: names, label syntax, ports, quantities,
requests ≤ limits, operators. It returns the typed object and every cause found, so one round trip
tells the user everything that is wrong, as the Kubernetes API server does.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Iterable, Sequence

import msgspec

from corral.api import models
from corral.api.quantity import QuantityError, parse_quantity
from corral.api.resources import ResourceType

__all__ = ["Cause", "type_check", "validate", "validate_name"]

# Reasons of Kubernetes' field.ErrorType, as they appear in Status.details.causes[].reason.
REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
DUPLICATE = "FieldValueDuplicate"
NOT_SUPPORTED = "FieldValueNotSupported"
TOO_LONG = "FieldValueTooLong"
TYPE_INVALID = "FieldValueTypeInvalid"
FORBIDDEN = "FieldValueForbidden"


@dataclass(frozen=True, slots=True)
class Cause:
    field: str
    reason: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


# --- names and labels --------------------------------------------------------------------------------

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_IANA_SVC_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")


def _invalid(path: str, value: Any, why: str) -> Cause:
    return Cause(path, INVALID, f"Invalid value: {_show(value)}: {why}")


def _show(value: Any) -> str:
    return msgspec.json.encode(value).decode() if not isinstance(value, str) else f'"{value}"'


def dns1123_label(path: str, value: str) -> list[Cause]:
    if len(value) > 63:
        return [Cause(path, TOO_LONG, f"Too long: may not be more than 63 bytes (got {len(value)})")]
    if not _DNS1123_LABEL.match(value):
        return [_invalid(path, value, "a lowercase RFC 1123 label must consist of lower case "
                         "alphanumeric characters or '-', and must start and end with an "
                         "alphanumeric character (e.g. 'my-name', or '123-abc')")]
    return []


def dns1123_subdomain(path: str, value: str) -> list[Cause]:
    if len(value) > 253:
        return [Cause(path, TOO_LONG, f"Too long: may not be more than 253 bytes (got {len(value)})")]
    if not _DNS1123_SUBDOMAIN.match(value):
        return [_invalid(path, value, "a lowercase RFC 1123 subdomain must consist of lower case "
                         "alphanumeric characters, '-' or '.', and must start and end with an "
                         "alphanumeric character (e.g. 'example.com')")]
    return []


def qualified_name(path: str, value: str) -> list[Cause]:
    """A label or annotation key: an optional DNS subdomain prefix and a name of ≤ 63 characters."""
    prefix, slash, name = value.rpartition("/")
    causes = []
    if slash and not prefix:
        causes.append(_invalid(path, value, "prefix part must be non-empty"))
    elif prefix:
        causes += [Cause(path, c.reason, c.message) for c in dns1123_subdomain(path, prefix)]
    if not name:
        causes.append(_invalid(path, value, "name part must be non-empty"))
    elif len(name) > 63:
        causes.append(_invalid(path, value, "name part must be no more than 63 characters"))
    elif not _QUALIFIED_NAME.match(name):
        causes.append(_invalid(path, value, "name part must consist of alphanumeric characters, "
                               "'-', '_' or '.', and must start and end with an alphanumeric "
                               "character (e.g. 'MyName', or 'my.name', or '123-abc')"))
    return causes


def label_value(path: str, value: str) -> list[Cause]:
    if len(value) > 63:
        return [_invalid(path, value, "must be no more than 63 characters")]
    if not _LABEL_VALUE.match(value):
        return [_invalid(path, value, "a valid label must be an empty string or consist of "
                         "alphanumeric characters, '-', '_' or '.', and must start and end with an "
                         "alphanumeric character (e.g. 'MyValue', or 'my_value', or '12345')")]
    return []


def labels(path: str, values: dict[str, str] | None) -> list[Cause]:
    causes: list[Cause] = []
    for key, value in (values or {}).items():
        causes += qualified_name(path, key)
        causes += label_value(f"{path}[{key}]", value)
    return causes


def validate_name(resource: ResourceType, name: str | None, path: str = "metadata.name") -> list[Cause]:
    if not name:
        return [Cause(path, REQUIRED, "Required value: name or generateName is required")]
    if resource.kind == "Namespace":
        return dns1123_label(path, name)
    if resource.group == "rbac.authorization.k8s.io":
        return path_segment_name(path, name)
    return dns1123_subdomain(path, name)


def path_segment_name(path: str, value: str) -> list[Cause]:
    """What RBAC objects may be called (``system:kube-scheduler``): anything a URL path segment can
    hold, as Kubernetes' ValidatePathSegmentName."""
    if value in (".", ".."):
        return [_invalid(path, value, f"may not be '{value}'")]
    for bad in ("/", "%"):
        if bad in value:
            return [_invalid(path, value, f"may not contain '{bad}'")]
    if len(value) > 253:
        return [Cause(path, TOO_LONG, f"Too long: may not be more than 253 bytes (got {len(value)})")]
    return []


# --- quantities ---------------------------------------------------------------------------------------


MAX_QUANTITY = Fraction(2**63 - 1, 1000)  # Kubernetes counts quantities in milli-units, in an int64
MAX_QUANTITY_TEXT = f"{2**63 - 1}m"


def _greater(a: Fraction, b: Fraction) -> bool:
    """``a > b`` in integers: a third cheaper than Fraction's comparison, which checks types first."""
    return a.numerator * b.denominator > b.numerator * a.denominator


def _quantities(path: str, values: dict[str, Any] | None) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    for key, raw in (values or {}).items():
        try:
            parsed[key] = parse_quantity(raw)
        except QuantityError as exc:
            parsed[key] = _invalid(f"{path}[{key}]", raw, str(exc))
            continue
        if parsed[key].numerator < 0:  # a Fraction's sign (its denominator is positive); < 0 costs 20× as much
            parsed[key] = _invalid(f"{path}[{key}]", raw, "must be greater than or equal to 0")
        elif _greater(parsed[key], MAX_QUANTITY):
            parsed[key] = _invalid(f"{path}[{key}]", raw, f"must be less than or equal to {MAX_QUANTITY_TEXT} "
                                   "(quantities are counted in thousandths in 64 bits)")
    return parsed


def resources(path: str, req: models.ResourceRequirements | None) -> list[Cause]:
    """The causes against a container's requests and limits. Pods repeat a handful of these blocks
    (every replica the same), so the answer is remembered by the block's contents: parsing and
    comparing its quantities was about half of a pod's validation."""
    if req is None:
        return []
    # Quantities are strings or numbers, so the block's items are a key as they are.
    return list(_resource_causes(path, tuple((req.requests or {}).items()), tuple((req.limits or {}).items())))


@functools.lru_cache(maxsize=4096)
def _resource_causes(path: str, requested: tuple, limited: tuple) -> tuple[Cause, ...]:
    raw_requests, raw_limits = dict(requested), dict(limited)
    requests = _quantities(f"{path}.requests", raw_requests)
    limits = _quantities(f"{path}.limits", raw_limits)
    causes = [v for v in (*requests.values(), *limits.values()) if isinstance(v, Cause)]
    for key, request in requests.items():
        limit = limits.get(key)
        if isinstance(request, Cause) or limit is None or isinstance(limit, Cause):
            continue
        if _greater(request, limit):
            causes.append(_invalid(f"{path}.requests[{key}]", raw_requests[key],
                                   f"must be less than or equal to {key} limit of {raw_limits[key]}"))
    return tuple(causes)


# --- pods -----------------------------------------------------------------------------------------------

_PROTOCOLS = ("TCP", "UDP", "SCTP")
_RESTART = ("Always", "OnFailure", "Never")
_PULL = ("Always", "IfNotPresent", "Never")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_NODE_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_LABEL_OPS = ("In", "NotIn", "Exists", "DoesNotExist")


def _not_supported(path: str, value: Any, allowed: Iterable[str]) -> Cause:
    listed = ", ".join(f'"{a}"' for a in allowed)
    return Cause(path, NOT_SUPPORTED, f"Unsupported value: {_show(value)}: supported values: {listed}")


def unique_label(path: str, name: str | None, seen: set[str]) -> list[Cause]:
    """A required name (``path``) that is a DNS label, unique among ``seen`` (which it joins): a
    container's among the pod's, a volume's among its volumes."""
    if not name:
        return [Cause(path, REQUIRED, "Required value")]
    causes = dns1123_label(path, name)
    if name in seen:
        causes.append(Cause(path, DUPLICATE, f'Duplicate value: "{name}"'))
    seen.add(name)
    return causes


def _container(path: str, c: models.Container, seen_names: set[str], host_ports: set) -> list[Cause]:
    causes = unique_label(f"{path}.name", c.name, seen_names)
    if not c.image:
        causes.append(Cause(f"{path}.image", REQUIRED, "Required value"))
    if c.image_pull_policy is not None and c.image_pull_policy not in _PULL:
        causes.append(_not_supported(f"{path}.imagePullPolicy", c.image_pull_policy, _PULL))
    for i, env in enumerate(c.env or ()):
        if not env.name:
            causes.append(Cause(f"{path}.env[{i}].name", REQUIRED, "Required value"))
    port_names: set[str] = set()
    for i, port in enumerate(c.ports or ()):
        p = f"{path}.ports[{i}]"
        if port.container_port is None:
            causes.append(Cause(f"{p}.containerPort", REQUIRED, "Required value"))
        elif not 1 <= port.container_port <= 65535:
            causes.append(_invalid(f"{p}.containerPort", port.container_port,
                                   "must be between 1 and 65535, inclusive"))
        if port.host_port is not None and not 0 <= port.host_port <= 65535:
            causes.append(_invalid(f"{p}.hostPort", port.host_port,
                                   "must be between 0 and 65535, inclusive"))
        protocol = port.protocol or "TCP"
        if protocol not in _PROTOCOLS:
            causes.append(_not_supported(f"{p}.protocol", port.protocol, _PROTOCOLS))
        if port.name:
            if len(port.name) > 15 or not _IANA_SVC_NAME.match(port.name):
                causes.append(_invalid(f"{p}.name", port.name,
                                       "must be no more than 15 lowercase alphanumeric characters or '-'"))
            elif port.name in port_names:
                causes.append(Cause(f"{p}.name", DUPLICATE, f'Duplicate value: "{port.name}"'))
            port_names.add(port.name)
        if port.host_port:
            slot = (port.host_port, protocol, port.host_ip or "")
            if slot in host_ports:
                causes.append(Cause(f"{p}.hostPort", DUPLICATE,
                                    f'Duplicate value: "{port.host_port}/{protocol}"'))
            host_ports.add(slot)
    causes += resources(f"{path}.resources", c.resources)
    causes += probe_causes(path, c)
    return causes


def _node_selector_requirements(path: str, reqs: list[models.NodeSelectorRequirement] | None,
                                *, fields: bool = False) -> list[Cause]:
    causes: list[Cause] = []
    for i, r in enumerate(reqs or ()):
        p = f"{path}[{i}]"
        if not r.key:
            causes.append(Cause(f"{p}.key", REQUIRED, "Required value"))
        elif fields and r.key != "metadata.name":
            causes.append(_not_supported(f"{p}.key", r.key, ["metadata.name"]))
        elif not fields:
            causes += qualified_name(f"{p}.key", r.key)
        if r.operator not in _NODE_OPS:
            causes.append(_not_supported(f"{p}.operator", r.operator, _NODE_OPS))
            continue
        values = r.values or []
        if r.operator in ("In", "NotIn") and not values:
            causes.append(Cause(f"{p}.values", REQUIRED,
                                "Required value: must be specified when `operator` is 'In' or 'NotIn'"))
        elif r.operator in ("Exists", "DoesNotExist") and values:
            causes.append(Cause(f"{p}.values", FORBIDDEN,
                                "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        elif r.operator in ("Gt", "Lt"):
            if len(values) != 1 or not re.fullmatch(r"-?[0-9]+", values[0]):
                causes.append(_invalid(f"{p}.values", values,
                                       "must be specified single value when `operator` is 'Lt' or 'Gt'"
                                       " and it must be an integer"))
    return causes


def _node_selector_term(path: str, term: models.NodeSelectorTerm | None) -> list[Cause]:
    if term is None:
        return []
    return (_node_selector_requirements(f"{path}.matchExpressions", term.match_expressions)
            + _node_selector_requirements(f"{path}.matchFields", term.match_fields, fields=True))


def required_node_selector(path: str, required: models.NodeSelector | None) -> list[Cause]:
    """Required node affinity (a pod's, a Placement policy's): at least one term, each valid."""
    if required is None:
        return []
    causes: list[Cause] = []
    if not required.node_selector_terms:
        causes.append(Cause(f"{path}.nodeSelectorTerms", REQUIRED, "Required value: must have at least one node selector term"))
    for i, term in enumerate(required.node_selector_terms or ()):
        causes += _node_selector_term(f"{path}.nodeSelectorTerms[{i}]", term)
    return causes


def label_selector(path: str, sel: models.LabelSelector | None) -> list[Cause]:
    if sel is None:
        return []
    causes = labels(f"{path}.matchLabels", sel.match_labels)
    for i, r in enumerate(sel.match_expressions or ()):
        p = f"{path}.matchExpressions[{i}]"
        if not r.key:
            causes.append(Cause(f"{p}.key", REQUIRED, "Required value"))
        else:
            causes += qualified_name(f"{p}.key", r.key)
        if r.operator not in _LABEL_OPS:
            causes.append(_not_supported(f"{p}.operator", r.operator, _LABEL_OPS))
        elif r.operator in ("In", "NotIn") and not r.values:
            causes.append(Cause(f"{p}.values", REQUIRED,
                                "Required value: must be specified when `operator` is 'In' or 'NotIn'"))
        elif r.operator in ("Exists", "DoesNotExist") and r.values:
            causes.append(Cause(f"{p}.values", FORBIDDEN,
                                "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    return causes


def _pod_affinity(path: str, aff: models.PodAffinity | None) -> list[Cause]:
    if aff is None:
        return []
    causes: list[Cause] = []

    def term(p: str, t: models.PodAffinityTerm | None) -> None:
        if t is None:
            causes.append(Cause(p, REQUIRED, "Required value"))
            return
        if not t.topology_key:
            causes.append(Cause(f"{p}.topologyKey", REQUIRED, "Required value: can not be empty"))
        else:
            causes.extend(qualified_name(f"{p}.topologyKey", t.topology_key))
        causes.extend(label_selector(f"{p}.labelSelector", t.label_selector))
        causes.extend(label_selector(f"{p}.namespaceSelector", t.namespace_selector))

    req = "requiredDuringSchedulingIgnoredDuringExecution"
    pref = "preferredDuringSchedulingIgnoredDuringExecution"
    for i, t in enumerate(aff.required_during_scheduling_ignored_during_execution or ()):
        term(f"{path}.{req}[{i}]", t)
    for i, w in enumerate(aff.preferred_during_scheduling_ignored_during_execution or ()):
        p = f"{path}.{pref}[{i}]"
        if w.weight is None or not 1 <= w.weight <= 100:
            causes.append(_invalid(f"{p}.weight", w.weight, "must be in the range 1-100"))
        term(f"{p}.podAffinityTerm", w.pod_affinity_term)
    return causes


def _affinity(path: str, aff: models.Affinity | None) -> list[Cause]:
    if aff is None:
        return []
    causes: list[Cause] = []
    na = aff.node_affinity
    if na is not None:
        causes += required_node_selector(f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                                         na.required_during_scheduling_ignored_during_execution)
        p = f"{path}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        for i, w in enumerate(na.preferred_during_scheduling_ignored_during_execution or ()):
            if w.weight is None or not 1 <= w.weight <= 100:
                causes.append(_invalid(f"{p}[{i}].weight", w.weight, "must be in the range 1-100"))
            causes += _node_selector_term(f"{p}[{i}].preference", w.preference)
    causes += _pod_affinity(f"{path}.podAffinity", aff.pod_affinity)
    causes += _pod_affinity(f"{path}.podAntiAffinity", aff.pod_anti_affinity)
    return causes


def _tolerations(path: str, tols: list[models.Toleration] | None) -> list[Cause]:
    causes: list[Cause] = []
    for i, t in enumerate(tols or ()):
        p = f"{path}[{i}]"
        op = t.operator or "Equal"
        if op not in ("Equal", "Exists"):
            causes.append(_not_supported(f"{p}.operator", t.operator, ("Equal", "Exists")))
        if t.key:
            causes += qualified_name(f"{p}.key", t.key)
        elif op != "Exists":
            causes.append(_invalid(f"{p}.operator", op,
                                   "operator must be Exists when `key` is empty, which means "
                                   "\"match all values and all keys\""))
        if op == "Exists" and t.value:
            causes.append(_invalid(f"{p}.operator", t.value,
                                   "value must be empty when `operator` is 'Exists'"))
        if t.effect and t.effect not in _EFFECTS:
            causes.append(_not_supported(f"{p}.effect", t.effect, _EFFECTS))
        if t.toleration_seconds is not None and t.effect != "NoExecute":
            causes.append(_invalid(f"{p}.effect", t.effect,
                                   "effect must be 'NoExecute' when `tolerationSeconds` is set"))
    return causes


def _spread(path: str, constraints: list[models.TopologySpreadConstraint] | None) -> list[Cause]:
    causes: list[Cause] = []
    for i, c in enumerate(constraints or ()):
        p = f"{path}[{i}]"
        if c.max_skew is None or c.max_skew <= 0:
            causes.append(_invalid(f"{p}.maxSkew", c.max_skew, "must be greater than zero"))
        if not c.topology_key:
            causes.append(Cause(f"{p}.topologyKey", REQUIRED, "Required value: can not be empty"))
        if c.when_unsatisfiable not in ("DoNotSchedule", "ScheduleAnyway"):
            causes.append(_not_supported(f"{p}.whenUnsatisfiable", c.when_unsatisfiable,
                                         ("DoNotSchedule", "ScheduleAnyway")))
        if c.min_domains is not None:
            if c.min_domains <= 0:
                causes.append(_invalid(f"{p}.minDomains", c.min_domains, "must be greater than 0"))
            elif c.when_unsatisfiable != "DoNotSchedule":
                causes.append(_invalid(f"{p}.minDomains", c.min_domains,
                                       "can only use minDomains if whenUnsatisfiable=DoNotSchedule"))
        for name, value in (("nodeAffinityPolicy", c.node_affinity_policy),
                            ("nodeTaintsPolicy", c.node_taints_policy)):
            if value is not None and value not in ("Honor", "Ignore"):
                causes.append(_not_supported(f"{p}.{name}", value, ("Honor", "Ignore")))
        causes += label_selector(f"{p}.labelSelector", c.label_selector)
    return causes


MAX_GRACE_SECONDS = 10 * 365 * 86400  # longer could not be written as a deletion time


def _pod(pod: models.Pod) -> list[Cause]:
    """The causes of a pod's spec (they depend on nothing else of the pod)."""
    if pod.spec is None:
        return [Cause("spec", REQUIRED, "Required value")]
    return _pod_spec(pod.spec)


def _pod_spec(spec: models.PodSpec) -> list[Cause]:
    causes: list[Cause] = []
    if not spec.containers:
        causes.append(Cause("spec.containers", REQUIRED, "Required value"))
    names: set[str] = set()
    host_ports: set = set()
    for i, c in enumerate(spec.init_containers or ()):
        causes += _container(f"spec.initContainers[{i}]", c, names, set())
    for i, c in enumerate(spec.containers or ()):
        causes += _container(f"spec.containers[{i}]", c, names, host_ports)
    if spec.restart_policy is not None and spec.restart_policy not in _RESTART:
        causes.append(_not_supported("spec.restartPolicy", spec.restart_policy, _RESTART))
    grace = spec.termination_grace_period_seconds
    if grace is not None and not 0 <= grace <= MAX_GRACE_SECONDS:
        causes.append(_invalid("spec.terminationGracePeriodSeconds", grace,
                               f"must be between 0 and {MAX_GRACE_SECONDS} (ten years)"))
    if spec.node_name:
        causes += dns1123_subdomain("spec.nodeName", spec.node_name)
    if spec.scheduler_name:
        causes += dns1123_subdomain("spec.schedulerName", spec.scheduler_name)
    causes += labels("spec.nodeSelector", spec.node_selector)
    causes += _affinity("spec.affinity", spec.affinity)
    causes += _tolerations("spec.tolerations", spec.tolerations)
    causes += _spread("spec.topologySpreadConstraints", spec.topology_spread_constraints)
    if spec.preemption_policy is not None and spec.preemption_policy not in ("PreemptLowerPriority", "Never"):
        causes.append(_not_supported("spec.preemptionPolicy", spec.preemption_policy,
                                     ("PreemptLowerPriority", "Never")))
    causes += [c for c in _quantities("spec.overhead", spec.overhead).values() if isinstance(c, Cause)]
    causes += pod_configuration(spec)
    return causes


def _node(node: models.Node) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[tuple[str, str]] = set()
    for i, t in enumerate((node.spec.taints if node.spec else None) or ()):
        p = f"spec.taints[{i}]"
        if not t.key:
            causes.append(Cause(f"{p}.key", REQUIRED, "Required value"))
        else:
            causes += qualified_name(f"{p}.key", t.key)
        if t.value:
            causes += label_value(f"{p}.value", t.value)
        if not t.effect:
            causes.append(Cause(f"{p}.effect", REQUIRED, "Required value"))
        elif t.effect not in _EFFECTS:
            causes.append(_not_supported(f"{p}.effect", t.effect, _EFFECTS))
        if (t.key or "", t.effect or "") in seen:
            causes.append(Cause(p, DUPLICATE, "Duplicate value: taints must be unique by key and effect pair"))
        seen.add((t.key or "", t.effect or ""))
    if node.status is not None:
        for name, values in (("capacity", node.status.capacity), ("allocatable", node.status.allocatable)):
            causes += [c for c in _quantities(f"status.{name}", values).values() if isinstance(c, Cause)]
    return causes


def _event(event: models.Event) -> list[Cause]:
    if event.involved_object is None:
        return [Cause("involvedObject", REQUIRED, "Required value")]
    return []


def _lease(lease: models.Lease) -> list[Cause]:
    spec = lease.spec
    if spec and spec.lease_duration_seconds is not None and spec.lease_duration_seconds <= 0:
        return [_invalid("spec.leaseDurationSeconds", spec.lease_duration_seconds, "must be greater than 0")]
    return []


def _priority_class(pc: models.PriorityClass) -> list[Cause]:
    causes: list[Cause] = []
    if pc.value is None:
        causes.append(Cause("value", REQUIRED, "Required value"))
    elif pc.value > 1_000_000_000 and not (pc.metadata and (pc.metadata.name or "").startswith("system-")):
        causes.append(_invalid("value", pc.value, "maximum allowed value of a user defined priority is 1000000000"))
    if pc.preemption_policy is not None and pc.preemption_policy not in ("PreemptLowerPriority", "Never"):
        causes.append(_not_supported("preemptionPolicy", pc.preemption_policy, ("PreemptLowerPriority", "Never")))
    return causes


TOKEN_ID = re.compile(r"^[a-z0-9]{6}$")
TOKEN_PURPOSES = ("authentication", "join")
_SECRET_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")


def _token(token: models.Token) -> list[Cause]:
    causes: list[Cause] = []
    name = (token.metadata.name if token.metadata else None) or ""
    if name and not TOKEN_ID.match(name):
        causes.append(_invalid("metadata.name", name, "a token id is 6 characters, lowercase letters and digits"))
    spec = token.spec or models.TokenSpec()
    if not spec.user:
        causes.append(Cause("spec.user", REQUIRED, "Required value"))
    if spec.purpose not in TOKEN_PURPOSES:
        causes.append(_not_supported("spec.purpose", spec.purpose, TOKEN_PURPOSES))
    if not spec.secret_hash or not _SECRET_HASH.match(spec.secret_hash):
        causes.append(_invalid("spec.secretHash", spec.secret_hash, "must be sha256: and 64 lowercase hex digits"))
    if spec.expiration_timestamp is not None and _parse_time(spec.expiration_timestamp) is None:
        causes.append(_invalid("spec.expirationTimestamp", spec.expiration_timestamp, "must be an RFC 3339 time"))
    return causes


def _parse_time(text: str):
    import datetime as dt

    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


_SUBJECT_KINDS = ("User", "Group", "ServiceAccount")


def _rules(rules: list[models.PolicyRule] | None) -> list[Cause]:
    causes: list[Cause] = []
    for i, rule in enumerate(rules or ()):
        p = f"rules[{i}]"
        if not rule.verbs:
            causes.append(Cause(f"{p}.verbs", REQUIRED, "Required value: verbs must contain at least one value"))
        if rule.non_resource_urls and (rule.resources or rule.api_groups):
            causes.append(_invalid(f"{p}.nonResourceURLs", rule.non_resource_urls,
                                   "rules cannot apply to API resources and non-resource URLs at once"))
        if not rule.non_resource_urls and not rule.resources:
            causes.append(Cause(f"{p}.resources", REQUIRED, "Required value: resource rules must supply at least "
                                                              "one resource"))
    return causes


def _role(role: models.Role | models.ClusterRole) -> list[Cause]:
    return _rules(role.rules)


def _role_binding(b: models.RoleBinding | models.ClusterRoleBinding) -> list[Cause]:
    causes: list[Cause] = []
    allowed_refs = ("ClusterRole",) if isinstance(b, models.ClusterRoleBinding) else ("Role", "ClusterRole")
    ref = b.role_ref or models.RoleRef()
    if not ref.name:
        causes.append(Cause("roleRef.name", REQUIRED, "Required value"))
    if ref.kind not in allowed_refs:
        causes.append(_not_supported("roleRef.kind", ref.kind, allowed_refs))
    if ref.api_group not in (None, "rbac.authorization.k8s.io"):
        causes.append(_not_supported("roleRef.apiGroup", ref.api_group, ("rbac.authorization.k8s.io",)))
    for i, subject in enumerate(b.subjects or ()):
        if subject.kind not in _SUBJECT_KINDS:
            causes.append(_not_supported(f"subjects[{i}].kind", subject.kind, _SUBJECT_KINDS))
        if not subject.name:
            causes.append(Cause(f"subjects[{i}].name", REQUIRED, "Required value"))
        if subject.kind == "ServiceAccount" and not subject.namespace and isinstance(b, models.ClusterRoleBinding):
            causes.append(Cause(f"subjects[{i}].namespace", REQUIRED, "Required value"))
    return causes


def _binding(b: models.Binding) -> list[Cause]:
    if b.target is None or not b.target.name:
        return [Cause("target.name", REQUIRED, "Required value")]
    if b.target.kind not in (None, "", "Node"):
        return [_not_supported("target.kind", b.target.kind, ("Node",))]
    return []


def _int_or_percent(path: str, value: int | str | None) -> list[Cause]:
    if value is None or (isinstance(value, int) and value >= 0):
        return []
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit() and int(value[:-1]) <= 100:
        return []
    return [_invalid(path, value, "must be a non-negative integer or a percentage from 0% to 100%")]


def _pod_disruption_budget(pdb: models.PodDisruptionBudget) -> list[Cause]:
    spec = pdb.spec or models.PodDisruptionBudgetSpec()
    causes = _int_or_percent("spec.minAvailable", spec.min_available)
    causes += _int_or_percent("spec.maxUnavailable", spec.max_unavailable)
    if spec.min_available is not None and spec.max_unavailable is not None:
        causes.append(Cause("spec", INVALID, "Invalid value: minAvailable and maxUnavailable cannot both be set"))
    causes += label_selector("spec.selector", spec.selector)
    policy = spec.unhealthy_pod_eviction_policy
    if policy not in (None, "IfHealthyBudget", "AlwaysAllow"):
        causes.append(_not_supported("spec.unhealthyPodEvictionPolicy", policy, ("IfHealthyBudget", "AlwaysAllow")))
    return causes


_KIND_CHECKS: dict[str, Callable[[Any], Sequence[Cause]]] = {
    "PodDisruptionBudget": _pod_disruption_budget,
    "Pod": _pod,
    "Node": _node,
    "Event": _event,
    "Lease": _lease,
    "PriorityClass": _priority_class,
    "Binding": _binding,
    "Token": _token,
    "Role": _role,
    "ClusterRole": _role,
    "RoleBinding": _role_binding,
    "ClusterRoleBinding": _role_binding,
}

_TYPE_ERROR = re.compile(r"^(?P<msg>.*?)(?: - at `\$\.?(?P<path>[^`]*)`)?$", re.S)


def type_check(resource: ResourceType, obj: Any) -> tuple[msgspec.Struct | None, list[Cause]]:
    """Convert ``obj`` to its model; a wrong type is one cause at its JSON path."""
    try:
        return msgspec.convert(obj, resource.model), []
    except msgspec.ValidationError as exc:
        m = _TYPE_ERROR.match(str(exc))
        path = (m["path"] if m and m["path"] else "") or "<root>"
        return None, [Cause(path, TYPE_INVALID, m["msg"] if m else str(exc))]


def validate(resource: ResourceType, obj: dict[str, Any]) -> tuple[msgspec.Struct | None, list[Cause]]:
    """Type-check and validate ``obj`` (a decoded JSON object) as ``resource``.

    Returns the typed object (``None`` when the types are wrong) and the list of causes; an empty
    list means valid. Pure: ``obj`` is not modified.
    """
    typed, causes = type_check(resource, obj)
    if typed is None:
        return None, causes
    causes = _metadata_causes(resource, typed)
    check = _KIND_CHECKS.get(resource.kind)
    if check is not None:
        causes += check(typed)
    return typed, causes


def _metadata_causes(resource: ResourceType, typed: Any) -> list[Cause]:
    meta = typed.metadata or models.ObjectMeta()
    causes: list[Cause] = []
    if resource.kind != "Binding" and not meta.generate_name:
        causes += validate_name(resource, meta.name)
    elif meta.name:
        causes += validate_name(resource, meta.name)
    causes += labels("metadata.labels", meta.labels)
    for key in meta.annotations or {}:
        causes += qualified_name("metadata.annotations", key)
    if meta.annotations and sum(len(k) + len(v) for k, v in meta.annotations.items()) > 256 * 1024:
        causes.append(Cause("metadata.annotations", TOO_LONG, "Too long: must have at most 262144 bytes"))
    causes += owner_references("metadata.ownerReferences", meta.owner_references)
    for finalizer in meta.finalizers or ():
        causes += qualified_name("metadata.finalizers", finalizer)
    return causes


def owner_references(path: str, refs: list[models.OwnerReference] | None) -> list[Cause]:
    """What the garbage collector needs of each owner reference, as Kubernetes requires it (its
    causes name the list, not the element): a version, a kind, a name and a uid; one controller."""
    causes: list[Cause] = []
    controller = ""
    for ref in refs or ():
        group_version = ref.api_version or ""
        parts = group_version.split("/")  # "v1" or "group/v1"
        if len(parts) > 2 or not parts[-1]:
            causes.append(_invalid(f"{path}.apiVersion", group_version, "version must not be empty"))
        for name, value in (("kind", ref.kind), ("name", ref.name), ("uid", ref.uid)):
            if not value:
                causes.append(_invalid(f"{path}.{name}", value or "", f"{name} must not be empty"))
        if ref.controller:
            this = f"{ref.kind}/{ref.name}"
            if controller:
                causes.append(_invalid(path, controller, "Only one reference can have Controller set to true. "
                                                         f'Found "true" in references for {controller} and {this}'))
            else:
                controller = this
    return causes


def update_causes(resource: ResourceType, current: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    """What a kind's update rules refuse in replacing ``current`` by ``new`` (fields fixed once set)."""
    check = _UPDATE_CHECKS.get(resource.kind)
    return check(resource.kind, current, new) if check is not None else []


# The other kinds' checks build on the ones above: their modules are imported here, last.
from corral.api.kinds.apps_validation import WORKLOAD_CHECKS  # noqa: E402
from corral.api.kinds.config_validation import CONFIG_CHECKS, CONFIG_UPDATE_CHECKS, pod_configuration  # noqa: E402
from corral.api.kinds.batch_validation import BATCH_CHECKS, BATCH_UPDATE_CHECKS  # noqa: E402
from corral.api.kinds.probe_validation import probe_causes  # noqa: E402
from corral.api.kinds.scheduling import SCHEDULING_CHECKS  # noqa: E402
from corral.api.kinds.placement import PLACEMENT_CHECKS, PLACEMENT_UPDATE_CHECKS  # noqa: E402

_KIND_CHECKS.update({**WORKLOAD_CHECKS, **CONFIG_CHECKS, **BATCH_CHECKS, **SCHEDULING_CHECKS, **PLACEMENT_CHECKS})
_UPDATE_CHECKS = {**CONFIG_UPDATE_CHECKS, **BATCH_UPDATE_CHECKS, **PLACEMENT_UPDATE_CHECKS}
