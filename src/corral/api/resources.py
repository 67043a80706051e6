"""The resource registry: which kinds exist, where they live in the URL space and in the store.

Shared by the server (routing, discovery, OpenAPI), the client (paths) and the CLI (names the user
types: ``pods``, ``pod``, ``po``). No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from corral.api import models
from corral.api.kinds import apps as workloads
from corral.api.kinds.placement import Placement
from corral.api.kinds.scheduling import PodGroup
from corral.api.kinds.batch import CronJob, Job
from corral.api.kinds.config import ConfigMap, Secret

__all__ = ["ResourceType", "RESOURCES", "by_kind", "by_plural", "lookup", "UnknownResource", "NODE_LEASE_NAMESPACE",
           "SYSTEM_NAMESPACES", "SYSTEM_PRIORITY_CLASSES", "ORPHAN_FINALIZER", "FOREGROUND_FINALIZER",
           "PROPAGATION_FINALIZERS"]

NODE_LEASE_NAMESPACE = "kube-node-lease"  # where each node's heartbeat Lease lives (Kubernetes' name)
OLD_NODE_LEASE_NAMESPACE = "corral-node-lease"  # where corral kept them before; emptied at start
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", NODE_LEASE_NAMESPACE)  # every cluster has them
# What a delete's propagationPolicy puts on an owner the garbage collector must deal with first.
ORPHAN_FINALIZER, FOREGROUND_FINALIZER = "orphan", "foregroundDeletion"
PROPAGATION_FINALIZERS = {"Orphan": ORPHAN_FINALIZER, "Foreground": FOREGROUND_FINALIZER, "Background": None}
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}


# Strategic merge patch: the lists merged item by item, by path → merge key ("" for a list of
# values merged as a set), as Kubernetes' API types declare them (patchStrategy "merge" and
# patchMergeKey in k8s.io/api). Lists not named here are replaced whole.
_META_MERGE_KEYS = {"metadata.finalizers": "", "metadata.ownerReferences": "uid"}
_CONTAINER_MERGE_KEYS = {"ports": "containerPort", "env": "name", "volumeMounts": "mountPath",
                         "volumeDevices": "devicePath"}
_POD_MERGE_KEYS = {
    **_META_MERGE_KEYS,
    **{f"spec.{kind}": "name" for kind in ("containers", "initContainers", "ephemeralContainers")},
    **{f"spec.{kind}.{field}": key for kind in ("containers", "initContainers", "ephemeralContainers")
       for field, key in _CONTAINER_MERGE_KEYS.items()},
    "spec.volumes": "name", "spec.imagePullSecrets": "name", "spec.hostAliases": "ip",
    "spec.topologySpreadConstraints": "topologyKey", "spec.schedulingGates": "name",
    "status.conditions": "type", "status.podIPs": "ip", "status.hostIPs": "ip",
}
# A workload's pod template merges as a pod does (kubectl set image, kubectl apply).
_WORKLOAD_MERGE_KEYS = {**_META_MERGE_KEYS, "status.conditions": "type",
                        **{f"spec.template.{path}": key for path, key in _POD_MERGE_KEYS.items()
                           if path.startswith(("spec.", "metadata."))}}
_NODE_MERGE_KEYS = {**_META_MERGE_KEYS, "spec.podCIDRs": "", "status.conditions": "type",
                    "status.addresses": "type"}


@dataclass(frozen=True, slots=True)
class ResourceType:
    kind: str
    plural: str
    group: str  # "" is the core group
    version: str
    namespaced: bool
    model: type[msgspec.Struct]
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    # Field selectors this kind answers, besides metadata.name and metadata.namespace.
    field_selectors: tuple[str, ...] = ()
    verbs: tuple[str, ...] = (
        "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch",
    )
    has_status: bool = field(default=False)
    merge_keys: dict[str, str] = field(default_factory=lambda: dict(_META_MERGE_KEYS), compare=False)  # see above
    # Worked out once: read for every change the watch cache hands its followers (each controller's routing).
    api_version: str = field(init=False, compare=False, repr=False)
    store_prefix: str = field(init=False, compare=False, repr=False)  # every key starts with it: ``/core/pods/``

    def __post_init__(self) -> None:
        object.__setattr__(self, "api_version", f"{self.group}/{self.version}" if self.group else self.version)
        object.__setattr__(self, "store_prefix", f"/{self.group or 'core'}/{self.plural}/")

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    def key(self, namespace: str | None, name: str) -> str:
        """The store key: ``/{group}/{plural}/{namespace}/{name}``, or without namespace."""
        if self.namespaced:
            return f"{self.store_prefix}{namespace}/{name}"
        return f"{self.store_prefix}{name}"

    def collection_path(self, namespace: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"

    def item_path(self, namespace: str | None, name: str) -> str:
        return f"{self.collection_path(namespace if self.namespaced else None)}/{name}"


RESOURCES: tuple[ResourceType, ...] = (
    ResourceType(
        "Namespace", "namespaces", "", "v1", False, models.Namespace,
        short_names=("ns",), subresources=("status",), field_selectors=("status.phase",),
        has_status=True, verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
    ),
    ResourceType(
        "Node", "nodes", "", "v1", False, models.Node,
        short_names=("no",), subresources=("status",), field_selectors=("spec.unschedulable",),
        has_status=True, merge_keys=_NODE_MERGE_KEYS,
    ),
    ResourceType(
        "Pod", "pods", "", "v1", True, models.Pod,
        short_names=("po",), subresources=("status", "binding", "log", "eviction", "exec", "attach", "portforward"),
        field_selectors=(
            "spec.nodeName", "status.phase", "spec.schedulerName", "spec.restartPolicy",
            "status.nominatedNodeName",
        ),
        has_status=True, merge_keys=_POD_MERGE_KEYS,
    ),
    ResourceType(
        "Binding", "bindings", "", "v1", True, models.Binding, verbs=("create",),
    ),
    # None exist and none can be made (no service networking yet): kubectl cluster-info lists them.
    ResourceType("Service", "services", "", "v1", True, models.Service, short_names=("svc",),
                 verbs=("get", "list", "watch")),
    ResourceType(
        "Event", "events", "", "v1", True, models.Event,
        short_names=("ev",),
        field_selectors=(
            "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
            "involvedObject.uid", "reason", "type", "source.component",
        ),
    ),
    # Configuration for pods: in their environment or as files. Secrets are encrypted at rest
    # (corral.store.encrypted) and readable only with the rights for them.
    ResourceType("ConfigMap", "configmaps", "", "v1", True, ConfigMap, short_names=("cm",)),
    ResourceType("Secret", "secrets", "", "v1", True, Secret),
    ResourceType("Lease", "leases", "coordination.k8s.io", "v1", True, models.Lease),
    ResourceType(
        "PriorityClass", "priorityclasses", "scheduling.k8s.io", "v1", False, models.PriorityClass,
        short_names=("pc",),
    ),
    # Honoured by the eviction API (kubectl drain): an eviction that would leave fewer healthy
    # pods than a budget wants is a 429.
    ResourceType(
        "PodDisruptionBudget", "poddisruptionbudgets", "policy", "v1", True, models.PodDisruptionBudget,
        short_names=("pdb",), subresources=("status",), has_status=True,
    ),
    # Kept running by their controllers (corral.controllers): N copies of a template, and rollouts.
    ResourceType(
        "ReplicaSet", "replicasets", "apps", "v1", True, workloads.ReplicaSet,
        short_names=("rs",), subresources=("status", "scale"), has_status=True, merge_keys=_WORKLOAD_MERGE_KEYS,
    ),
    ResourceType(
        "Deployment", "deployments", "apps", "v1", True, workloads.Deployment,
        short_names=("deploy",), subresources=("status", "scale"), has_status=True,
        merge_keys=_WORKLOAD_MERGE_KEYS,
    ),
    ResourceType(
        "DaemonSet", "daemonsets", "apps", "v1", True, workloads.DaemonSet,
        short_names=("ds",), subresources=("status",), has_status=True, merge_keys=_WORKLOAD_MERGE_KEYS,
    ),
    ResourceType("ControllerRevision", "controllerrevisions", "apps", "v1", True, workloads.ControllerRevision),
    # Run to completion (batch/v1): a Job's pods until enough succeed; a CronJob's Jobs on a schedule.
    ResourceType(
        "Job", "jobs", "batch", "v1", True, Job, subresources=("status",), has_status=True,
        merge_keys=_WORKLOAD_MERGE_KEYS,
    ),
    ResourceType(
        "CronJob", "cronjobs", "batch", "v1", True, CronJob, short_names=("cj",), subresources=("status",),
        has_status=True, merge_keys={**_META_MERGE_KEYS, **{f"spec.jobTemplate.{k}": v for k, v in
                                                             _WORKLOAD_MERGE_KEYS.items() if k.startswith("spec.")}},
    ),
    ResourceType("Role", "roles", "rbac.authorization.k8s.io", "v1", True, models.Role),
    ResourceType("ClusterRole", "clusterroles", "rbac.authorization.k8s.io", "v1", False, models.ClusterRole),
    ResourceType("RoleBinding", "rolebindings", "rbac.authorization.k8s.io", "v1", True, models.RoleBinding),
    ResourceType("ClusterRoleBinding", "clusterrolebindings", "rbac.authorization.k8s.io", "v1", False,
                 models.ClusterRoleBinding),
    # Questions about the asker's own rights, answered and never stored (kubectl auth can-i).
    ResourceType("SelfSubjectAccessReview", "selfsubjectaccessreviews", "authorization.k8s.io", "v1", False,
                 models.SelfSubjectAccessReview, verbs=("create",)),
    ResourceType("SelfSubjectRulesReview", "selfsubjectrulesreviews", "authorization.k8s.io", "v1", False,
                 models.SelfSubjectRulesReview, verbs=("create",)),
    # A gang of pods the scheduler places all or nothing (scheduling.corral.dev/pod-group label).
    ResourceType("PodGroup", "podgroups", "scheduling.corral.dev", "v1alpha1", True, PodGroup,
                 short_names=("pg",), subresources=("status",), has_status=True),
    # Copies of a pod template on nodes picked by a policy (PickAll, PickN, PickFixed), as Fleet places.
    ResourceType("Placement", "placements", "placement.corral.dev", "v1", True, Placement,
                 short_names=("pl",), subresources=("status",), has_status=True),
    # Bearer tokens, stored hashed: every server sharing the store accepts them (corral token ...).
    ResourceType("Token", "tokens", "auth.corral.dev", "v1", False, models.Token,
                 verbs=("create", "delete", "get", "list", "watch")),
)

_BY_KIND = {r.kind: r for r in RESOURCES}
_BY_PLURAL = {(r.group, r.plural): r for r in RESOURCES}
_BY_NAME: dict[str, ResourceType] = {}
for _r in RESOURCES:
    for _name in (_r.plural, _r.singular, _r.kind, *_r.short_names):
        _BY_NAME.setdefault(_name.lower(), _r)
    if _r.group:
        _BY_NAME.setdefault(f"{_r.plural}.{_r.group}", _r)


class UnknownResource(LookupError):
    """A kind or resource name corral does not serve."""


def by_kind(kind: str) -> ResourceType:
    try:
        return _BY_KIND[kind]
    except KeyError:
        raise UnknownResource(f'no kind "{kind}" is registered') from None


def by_plural(group: str, plural: str) -> ResourceType | None:
    return _BY_PLURAL.get((group, plural))


def lookup(name: str) -> ResourceType:
    """What a user types on the command line (``pods``, ``pod``, ``po``, ``Pod``) → the resource."""
    try:
        return _BY_NAME[name.lower()]
    except KeyError:
        known = ", ".join(sorted(r.plural for r in RESOURCES))
        raise UnknownResource(
            f'the server doesn\'t have a resource type "{name}" (known: {known})'
        ) from None


def groups() -> dict[str, list[str]]:
    """API group → its versions, for discovery."""
    out: dict[str, list[str]] = {}
    for r in RESOURCES:
        if r.group and r.version not in out.setdefault(r.group, []):
            out[r.group].append(r.version)
    return out
