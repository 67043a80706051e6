"""What the scheduler needs to know about a pod, parsed once from its API object.

A :class:`PodInfo` is built when a pod enters the queue (or the cache) and reused for every
scheduling attempt and every node: requests in integer units, selectors compiled, affinity terms
and spread constraints in a form the column plugins can evaluate directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from corral.api.quantity import QuantityError, to_milli, to_units
from corral.api.selectors import LabelSelector, Requirement, label_selector_from_struct

__all__ = [
    "PodInfo", "Requests", "AffinityTerm", "WeightedTerm", "SpreadConstraint", "NodeSelectorTerm",
    "HostPort", "label_key", "DEFAULT_MILLI_CPU_REQUEST", "DEFAULT_MEMORY_REQUEST", "pod_requests",
]

# Kubernetes scores a container that requests nothing as if it asked for this much (non-zero requests).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
_STANDARD = ("cpu", "memory", "pods", "ephemeral-storage")
# A nil labelSelector in an affinity term selects no pods (Kubernetes' semantics).
_NOTHING = Requirement("\x00corral-selects-nothing", "in", frozenset())


@dataclass(frozen=True, slots=True)
class Requests:
    cpu: int = 0  # millicores
    memory: int = 0  # bytes
    ephemeral: int = 0  # bytes
    extended: tuple[tuple[str, int], ...] = ()  # (resource name, amount in units)
    nonzero_cpu: int = DEFAULT_MILLI_CPU_REQUEST
    nonzero_memory: int = DEFAULT_MEMORY_REQUEST


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """All expressions must hold (AND); ``fields`` are matchFields on metadata.name."""

    expressions: tuple[NodeSelectorRequirement, ...]
    fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    selector: LabelSelector
    topology_key: str
    namespaces: frozenset[str]  # empty with no namespace_selector: the pod's own namespace
    namespace_selector: LabelSelector | None  # None: use ``namespaces``; empty selector: all

    def matches_namespace(self, namespace: str, ns_labels: dict[str, dict[str, str]]) -> bool:
        if namespace in self.namespaces:
            return True
        if self.namespace_selector is None:
            return False
        return self.namespace_selector.matches(ns_labels.get(namespace, {}))

    def matches(self, namespace: str, labels: dict[str, str], ns_labels: dict[str, dict[str, str]]) -> bool:
        return self.matches_namespace(namespace, ns_labels) and self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    hard: bool  # whenUnsatisfiable: DoNotSchedule
    selector: LabelSelector
    min_domains: int = 1
    honor_node_affinity: bool = True  # nodeAffinityPolicy: Honor (default)
    honor_node_taints: bool = False  # nodeTaintsPolicy: Ignore (default)


@dataclass(frozen=True, slots=True)
class HostPort:
    protocol: str
    port: int


def label_key(info: "PodInfo") -> tuple[str, tuple[tuple[str, str], ...]]:
    """(namespace, sorted labels) of a pod: how the cache groups pods (worked out once per PodInfo)."""
    key = info.memo.get("labelKey")
    if key is None:
        key = info.memo["labelKey"] = (info.namespace, tuple(sorted(info.labels.items())))
    return key


def pod_requests(spec: dict[str, Any]) -> Requests:
    """Effective requests: the sum over containers, at least the largest init container, plus overhead."""
    def container_requests(c: dict[str, Any]) -> dict[str, int]:
        res = c.get("resources") or {}
        # A limit without a request means request == limit, as Kubernetes defaults it.
        values = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        out: dict[str, int] = {}
        for name, q in values.items():
            try:
                out[name] = to_milli(q) if name == "cpu" else to_units(q)
            except QuantityError:
                continue
        return out

    total: dict[str, int] = {}
    nonzero_cpu = nonzero_mem = 0
    for c in spec.get("containers") or ():
        r = container_requests(c)
        for k, v in r.items():
            total[k] = total.get(k, 0) + v
        nonzero_cpu += r.get("cpu") or DEFAULT_MILLI_CPU_REQUEST
        nonzero_mem += r.get("memory") or DEFAULT_MEMORY_REQUEST
    for c in spec.get("initContainers") or ():
        r = container_requests(c)
        for k, v in r.items():
            total[k] = max(total.get(k, 0), v)
    for name, q in (spec.get("overhead") or {}).items():
        try:
            total[name] = total.get(name, 0) + (to_milli(q) if name == "cpu" else to_units(q))
        except QuantityError:
            continue
    extended = tuple(sorted((k, v) for k, v in total.items() if k not in _STANDARD and v > 0))
    return Requests(total.get("cpu", 0), total.get("memory", 0), total.get("ephemeral-storage", 0),
                    extended, nonzero_cpu, nonzero_mem)


def _node_term(term: dict[str, Any]) -> NodeSelectorTerm:
    def reqs(items: Any) -> tuple[NodeSelectorRequirement, ...]:
        return tuple(NodeSelectorRequirement(r.get("key", ""), r.get("operator", ""), tuple(r.get("values") or ()))
                     for r in items or ())

    return NodeSelectorTerm(reqs(term.get("matchExpressions")), reqs(term.get("matchFields")))


def _affinity_term(term: dict[str, Any], namespace: str) -> AffinityTerm:
    ns_selector = term.get("namespaceSelector")
    namespaces = frozenset(term.get("namespaces") or ())
    if not namespaces and ns_selector is None:
        namespaces = frozenset([namespace])
    return AffinityTerm(
        selector=label_selector_from_struct(term.get("labelSelector")) if term.get("labelSelector") is not None
        else LabelSelector((_NOTHING,)),
        topology_key=term.get("topologyKey", ""),
        namespaces=namespaces,
        namespace_selector=label_selector_from_struct(ns_selector) if ns_selector is not None else None,
    )


@dataclass(slots=True)
class PodInfo:
    """One pod as the scheduler sees it. Build with :meth:`from_object`."""

    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    priority: int
    scheduler_name: str
    requests: Requests
    node_name: str = ""
    node_selector: dict[str, str] = field(default_factory=dict)
    required_node_terms: tuple[NodeSelectorTerm, ...] = ()  # OR of terms; () means no requirement
    preferred_node_terms: tuple[tuple[int, NodeSelectorTerm], ...] = ()
    tolerations: tuple[dict[str, Any], ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    images: tuple[str, ...] = ()  # the containers' images, in order (one entry per container)
    init_images: tuple[str, ...] = ()  # the init containers' images, likewise
    spread: tuple[SpreadConstraint, ...] = ()
    affinity: tuple[AffinityTerm, ...] = ()
    anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()
    has_controller: bool = False
    preemption_policy: str = "PreemptLowerPriority"
    # The pod object; or, for a bound pod the scheduler process keeps, the JSON it came as (see obj).
    held: dict[str, Any] | bytes = field(default_factory=dict, repr=False)
    memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)  # e.g. its tolerations' form
    # Memos every pod of its template shares (the pods from_object built of one spec in one namespace):
    # e.g. the signatures of plugins whose TEMPLATE_SIGNATURE says they read nothing else (and labels).
    shared: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    key: str = field(init=False, repr=False, compare=False)  # "namespace/name", asked for often

    def __post_init__(self) -> None:
        self.key = f"{self.namespace}/{self.name}"

    @property
    def obj(self) -> dict[str, Any]:
        """The pod object, decoded again when it is held as JSON. The scheduler process holds each
        bound pod so: one bytes object instead of the nine dicts and lists of a decoded pod, which
        the garbage collector walks at every pass (at 50,000 pods, 0.4 s of a pass in the middle of
        a burst) and which take twice the memory. Only preemption, extenders and plans (the pods of
        a node taken out) read bound pods' objects, and they seldom."""
        held = self.held
        return _decode(held) if type(held) is bytes else held  # type: ignore[return-value]

    @classmethod
    def from_object(cls, pod: dict[str, Any]) -> "PodInfo":
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        namespace = meta.get("namespace") or "default"
        labels = dict(meta.get("labels") or {})
        parts = _spec_parts(namespace, spec)
        spread = parts.spread if parts.spread is not None else _spread(spec, labels)
        return cls(namespace, meta.get("name", ""), meta.get("uid", ""), labels, parts.priority,
                   parts.scheduler_name, parts.requests, parts.node_name, dict(parts.node_selector),
                   parts.required_node_terms, parts.preferred_node_terms, parts.tolerations, parts.host_ports,
                   parts.images, parts.init_images, spread, parts.affinity, parts.anti_affinity,
                   parts.preferred_affinity, parts.preferred_anti_affinity,
                   any(o.get("controller") for o in meta.get("ownerReferences") or ()), parts.preemption_policy,
                   pod, {}, parts.shared)


@dataclass(frozen=True, slots=True)
class _SpecParts:
    """What a :class:`PodInfo` takes from a pod's spec (and namespace): the same for every pod of
    one template, so parsed once per distinct spec (:func:`_spec_parts`)."""

    priority: int
    scheduler_name: str
    requests: Requests
    node_name: str
    node_selector: dict[str, str]
    required_node_terms: tuple[NodeSelectorTerm, ...]
    preferred_node_terms: tuple[tuple[int, NodeSelectorTerm], ...]
    tolerations: tuple[dict[str, Any], ...]
    host_ports: tuple[HostPort, ...]
    images: tuple[str, ...]
    init_images: tuple[str, ...]
    spread: tuple[SpreadConstraint, ...] | None  # None: its constraints take label values (matchLabelKeys)
    affinity: tuple[AffinityTerm, ...]
    anti_affinity: tuple[AffinityTerm, ...]
    preferred_affinity: tuple[WeightedTerm, ...]
    preferred_anti_affinity: tuple[WeightedTerm, ...]
    preemption_policy: str
    shared: dict[Any, Any] = field(default_factory=dict, compare=False)  # PodInfo.shared of its pods


# Parsed specs by (namespace, the spec's JSON): a Deployment's or a benchmark's thousands of pods share
# a handful of specs, and encoding one (~1 µs) costs a fraction of parsing it again. Emptied when full.
_SPEC_PARTS: dict[tuple[str, bytes], _SpecParts] = {}
SPEC_PARTS_LIMIT = 1024
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


def _spec_parts(namespace: str, spec: dict[str, Any]) -> _SpecParts:
    try:
        key: tuple[str, bytes] | None = (namespace, _encode(spec))
    except (TypeError, OverflowError, msgspec.EncodeError):  # not JSON (a caller's own object): parsed every time
        key = None
    parts = _SPEC_PARTS.get(key) if key is not None else None  # type: ignore[arg-type]
    if parts is None:
        parts = _parse_spec(namespace, spec)
        if key is not None:
            if len(_SPEC_PARTS) >= SPEC_PARTS_LIMIT:
                _SPEC_PARTS.clear()
            _SPEC_PARTS[key] = parts
    return parts


def _spread(spec: dict[str, Any], labels: dict[str, str]) -> tuple[SpreadConstraint, ...]:
    spread = []
    for c in spec.get("topologySpreadConstraints") or ():
        selector = label_selector_from_struct(c.get("labelSelector"))
        keys = c.get("matchLabelKeys") or ()
        if keys:
            extra = tuple(Requirement(k, "=", frozenset([labels[k]])) for k in keys if k in labels)
            selector = LabelSelector(selector.requirements + extra)
        spread.append(SpreadConstraint(
            max_skew=int(c.get("maxSkew", 1)), topology_key=c.get("topologyKey", ""),
            hard=c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule", selector=selector,
            min_domains=int(c.get("minDomains") or 1),
            honor_node_affinity=c.get("nodeAffinityPolicy", "Honor") == "Honor",
            honor_node_taints=c.get("nodeTaintsPolicy", "Ignore") == "Honor",
        ))
    return tuple(spread)


def _parse_spec(namespace: str, spec: dict[str, Any]) -> _SpecParts:
    affinity = spec.get("affinity") or {}
    node_aff = affinity.get("nodeAffinity") or {}
    required = (node_aff.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    pod_aff = affinity.get("podAffinity") or {}
    anti = affinity.get("podAntiAffinity") or {}
    req_key = "requiredDuringSchedulingIgnoredDuringExecution"
    pref_key = "preferredDuringSchedulingIgnoredDuringExecution"

    def weighted(items: Any) -> tuple[WeightedTerm, ...]:
        return tuple(WeightedTerm(int(w.get("weight", 1)), _affinity_term(w.get("podAffinityTerm") or {}, namespace))
                     for w in items or ())

    ports = []
    for c in spec.get("containers") or ():
        for p in c.get("ports") or ():
            if p.get("hostPort"):
                ports.append(HostPort(p.get("protocol", "TCP"), int(p["hostPort"])))
    constraints = spec.get("topologySpreadConstraints") or ()
    return _SpecParts(
        priority=int(spec.get("priority") or 0),
        scheduler_name=spec.get("schedulerName") or "default-scheduler",
        requests=pod_requests(spec),
        node_name=spec.get("nodeName") or "",
        node_selector=dict(spec.get("nodeSelector") or {}),
        required_node_terms=tuple(_node_term(t) for t in required or ()),
        preferred_node_terms=tuple((int(p.get("weight", 1)), _node_term(p.get("preference") or {}))
                                   for p in node_aff.get(pref_key) or ()),
        tolerations=tuple(spec.get("tolerations") or ()),
        host_ports=tuple(ports),
        images=tuple(c.get("image", "") for c in spec.get("containers") or () if c.get("image")),
        init_images=tuple(c.get("image", "") for c in spec.get("initContainers") or () if c.get("image")),
        spread=None if any(c.get("matchLabelKeys") for c in constraints) else _spread(spec, {}),
        affinity=tuple(_affinity_term(t, namespace) for t in pod_aff.get(req_key) or ()),
        anti_affinity=tuple(_affinity_term(t, namespace) for t in anti.get(req_key) or ()),
        preferred_affinity=weighted(pod_aff.get(pref_key)),
        preferred_anti_affinity=weighted(anti.get(pref_key)),
        preemption_policy=spec.get("preemptionPolicy") or "PreemptLowerPriority",
    )
