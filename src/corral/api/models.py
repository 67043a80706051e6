"""The API objects corral acts on, as msgspec structs (camelCase on the wire).

These types are the *schema of what corral understands*: the server converts every incoming object
to them to check types (errors carry the JSON path of the bad field), the OpenAPI document is
generated from them, and the REST client decodes into them. Fields that are not declared here are
not lost: the server stores objects as the JSON the user wrote, and merely warns that corral does not
act on the extra fields (``fieldValidation=Strict`` rejects them instead).

Every field is optional with a ``None`` default so that partial objects (patches, status updates)
decode; the validation module says which fields are required. No I/O here.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec
from msgspec import field

Quantity = Union[str, int, float]
ResourceList = dict[str, Quantity]


class Model(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """Base of every API struct: camelCase names, unset fields omitted when encoding."""


# --- metadata -------------------------------------------------------------------------------------


class OwnerReference(Model):
    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(Model):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None


class ListMeta(Model):
    resource_version: str | None = None
    # "continue" is a Python keyword, hence the explicit wire name.
    continue_: str | None = field(default=None, name="continue")
    remaining_item_count: int | None = None


class ObjectReference(Model):
    api_version: str | None = None
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


class LabelSelectorRequirement(Model):
    key: str | None = None
    operator: str | None = None
    values: list[str] | None = None


class LabelSelector(Model):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


# --- scheduling terms ------------------------------------------------------------------------------


class NodeSelectorRequirement(Model):
    key: str | None = None
    operator: str | None = None
    values: list[str] | None = None


class NodeSelectorTerm(Model):
    match_expressions: list[NodeSelectorRequirement] | None = None
    match_fields: list[NodeSelectorRequirement] | None = None


class NodeSelector(Model):
    node_selector_terms: list[NodeSelectorTerm] | None = None


class PreferredSchedulingTerm(Model):
    weight: int | None = None
    preference: NodeSelectorTerm | None = None


class NodeAffinity(Model):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] | None = None


class PodAffinityTerm(Model):
    label_selector: LabelSelector | None = None
    namespaces: list[str] | None = None
    namespace_selector: LabelSelector | None = None
    topology_key: str | None = None
    match_label_keys: list[str] | None = None
    mismatch_label_keys: list[str] | None = None


class WeightedPodAffinityTerm(Model):
    weight: int | None = None
    pod_affinity_term: PodAffinityTerm | None = None


class PodAffinity(Model):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = None
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = None


class Affinity(Model):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class Toleration(Model):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class Taint(Model):
    key: str | None = None
    value: str | None = None
    effect: str | None = None
    time_added: str | None = None


class TopologySpreadConstraint(Model):
    max_skew: int | None = None
    topology_key: str | None = None
    when_unsatisfiable: str | None = None
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] | None = None


# --- pods ------------------------------------------------------------------------------------------


class ObjectKeySelector(Model):
    """One key of a ConfigMap or Secret (``configMapKeyRef``, ``secretKeyRef``)."""

    name: str | None = None
    key: str | None = None
    optional: bool | None = None


class ObjectFieldSelector(Model):
    api_version: str | None = None
    field_path: str | None = None


class ResourceFieldSelector(Model):
    container_name: str | None = None
    resource: str | None = None
    divisor: str | int | None = None


class EnvVarSource(Model):
    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: ResourceFieldSelector | None = None
    config_map_key_ref: ObjectKeySelector | None = None
    secret_key_ref: ObjectKeySelector | None = None


class EnvVar(Model):
    name: str | None = None
    value: str | None = None
    value_from: EnvVarSource | None = None


class OptionalReference(Model):
    """A whole ConfigMap or Secret (``envFrom``'s ``configMapRef`` and ``secretRef``)."""

    name: str | None = None
    optional: bool | None = None


class EnvFromSource(Model):
    prefix: str | None = None
    config_map_ref: OptionalReference | None = None
    secret_ref: OptionalReference | None = None


class KeyToPath(Model):
    key: str | None = None
    path: str | None = None
    mode: int | None = None


class ConfigMapVolumeSource(Model):
    name: str | None = None
    items: list[KeyToPath] | None = None
    default_mode: int | None = None
    optional: bool | None = None


class SecretVolumeSource(Model):
    secret_name: str | None = None
    items: list[KeyToPath] | None = None
    default_mode: int | None = None
    optional: bool | None = None


class EmptyDirVolumeSource(Model):
    medium: str | None = None
    size_limit: str | int | None = None


class Volume(Model):
    """The volumes corral provides; any other source is kept as written, with a warning."""

    name: str | None = None
    config_map: ConfigMapVolumeSource | None = None
    secret: SecretVolumeSource | None = None
    empty_dir: EmptyDirVolumeSource | None = None


class HTTPHeader(Model):
    name: str | None = None
    value: str | None = None


class ProbeHandler(Model):
    """What a probe does: run a command, GET a URL, open a TCP connection, or ask gRPC's health."""

    command: list[str] | None = None  # exec
    path: str | None = None  # httpGet
    port: int | str | None = None  # httpGet, tcpSocket, grpc: a number or a named containerPort
    host: str | None = None
    scheme: str | None = None
    http_headers: list[HTTPHeader] | None = None
    service: str | None = None  # grpc


class Probe(Model):
    exec: ProbeHandler | None = None
    http_get: ProbeHandler | None = None
    tcp_socket: ProbeHandler | None = None
    grpc: ProbeHandler | None = None
    initial_delay_seconds: int | None = None
    period_seconds: int | None = None
    timeout_seconds: int | None = None
    success_threshold: int | None = None
    failure_threshold: int | None = None
    termination_grace_period_seconds: int | None = None


class VolumeMount(Model):
    name: str | None = None
    mount_path: str | None = None
    read_only: bool | None = None
    sub_path: str | None = None


class ContainerPort(Model):
    name: str | None = None
    container_port: int | None = None
    host_port: int | None = None
    host_ip: str | None = field(default=None, name="hostIP")
    protocol: str | None = None


class ResourceRequirements(Model):
    requests: ResourceList | None = None
    limits: ResourceList | None = None


class Container(Model):
    name: str | None = None
    image: str | None = None
    image_pull_policy: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    working_dir: str | None = None
    env: list[EnvVar] | None = None
    env_from: list[EnvFromSource] | None = None
    ports: list[ContainerPort] | None = None
    resources: ResourceRequirements | None = None
    volume_mounts: list[VolumeMount] | None = None
    liveness_probe: Probe | None = None
    readiness_probe: Probe | None = None
    startup_probe: Probe | None = None
    stdin: bool | None = None  # keep stdin open for `kubectl attach -i`
    tty: bool | None = None  # a terminal for the container (docker runtime)


class PodSpec(Model):
    containers: list[Container] | None = None
    init_containers: list[Container] | None = None
    volumes: list[Volume] | None = None
    node_name: str | None = None
    node_selector: dict[str, str] | None = None
    affinity: Affinity | None = None
    tolerations: list[Toleration] | None = None
    topology_spread_constraints: list[TopologySpreadConstraint] | None = None
    priority: int | None = None
    priority_class_name: str | None = None
    preemption_policy: str | None = None
    scheduler_name: str | None = None
    restart_policy: str | None = None
    termination_grace_period_seconds: int | None = None
    overhead: ResourceList | None = None


class PodCondition(Model):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    last_probe_time: str | None = None
    last_transition_time: str | None = None


class ContainerStateWaiting(Model):
    reason: str | None = None
    message: str | None = None


class ContainerStateRunning(Model):
    started_at: str | None = None


class ContainerStateTerminated(Model):
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    message: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    container_id: str | None = field(default=None, name="containerID")


class ContainerState(Model):
    waiting: ContainerStateWaiting | None = None
    running: ContainerStateRunning | None = None
    terminated: ContainerStateTerminated | None = None


class ContainerStatus(Model):
    name: str | None = None
    image: str | None = None
    image_id: str | None = field(default=None, name="imageID")
    container_id: str | None = field(default=None, name="containerID")
    ready: bool | None = None
    started: bool | None = None
    restart_count: int | None = None
    state: ContainerState | None = None
    last_state: ContainerState | None = None


class PodIP(Model):
    ip: str | None = None


class PodStatus(Model):
    phase: str | None = None
    conditions: list[PodCondition] | None = None
    message: str | None = None
    reason: str | None = None
    host_ip: str | None = field(default=None, name="hostIP")
    pod_ip: str | None = field(default=None, name="podIP")
    pod_ips: list[PodIP] | None = field(default=None, name="podIPs")
    start_time: str | None = None
    nominated_node_name: str | None = None
    container_statuses: list[ContainerStatus] | None = None
    init_container_statuses: list[ContainerStatus] | None = None
    qos_class: str | None = None


class Pod(Model, tag_field="kind", tag="Pod"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None
    status: PodStatus | None = None


# --- nodes -----------------------------------------------------------------------------------------


class NodeSpec(Model):
    unschedulable: bool | None = None
    taints: list[Taint] | None = None
    pod_cidr: str | None = field(default=None, name="podCIDR")
    provider_id: str | None = field(default=None, name="providerID")


class NodeCondition(Model):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    last_heartbeat_time: str | None = None
    last_transition_time: str | None = None


class NodeAddress(Model):
    type: str | None = None
    address: str | None = None


class NodeSystemInfo(Model):
    machine_id: str | None = field(default=None, name="machineID")
    system_uuid: str | None = field(default=None, name="systemUUID")
    boot_id: str | None = field(default=None, name="bootID")
    kernel_version: str | None = None
    os_image: str | None = None
    container_runtime_version: str | None = None
    kubelet_version: str | None = None
    kube_proxy_version: str | None = None
    operating_system: str | None = None
    architecture: str | None = None


class ContainerImage(Model):
    names: list[str] | None = None
    size_bytes: int | None = None


class NetworkThroughput(Model):
    """corral extension: throughput measured by the agent against the server."""

    download: str | None = None
    upload: str | None = None
    last_test_time: str | None = None


class NodeNetwork(Model):
    throughput: NetworkThroughput | None = None


class DaemonEndpoint(Model):
    port: int | None = field(default=None, name="Port")


class NodeDaemonEndpoints(Model):
    kubelet_endpoint: DaemonEndpoint | None = None


class NodeStatus(Model):
    capacity: ResourceList | None = None
    allocatable: ResourceList | None = None
    conditions: list[NodeCondition] | None = None
    addresses: list[NodeAddress] | None = None
    node_info: NodeSystemInfo | None = None
    images: list[ContainerImage] | None = None
    daemon_endpoints: NodeDaemonEndpoints | None = None
    network: NodeNetwork | None = None


class Node(Model, tag_field="kind", tag="Node"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


# --- the others --------------------------------------------------------------------------------------


class Service(Model, tag_field="kind", tag="Service"):
    """Read-only, and none exist: corral has no service networking yet. Listed so that clients that
    look for Services (kubectl cluster-info) get an empty answer instead of an error."""

    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: dict[str, Any] | None = None
    status: dict[str, Any] | None = None


class NamespaceSpec(Model):
    finalizers: list[str] | None = None


class NamespaceStatus(Model):
    phase: str | None = None


class Namespace(Model, tag_field="kind", tag="Namespace"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: NamespaceSpec | None = None
    status: NamespaceStatus | None = None


class Binding(Model, tag_field="kind", tag="Binding"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    target: ObjectReference | None = None


class EventSource(Model):
    component: str | None = None
    host: str | None = None


class Event(Model, tag_field="kind", tag="Event"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    involved_object: ObjectReference | None = None
    reason: str | None = None
    message: str | None = None
    source: EventSource | None = None
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    event_time: str | None = None
    count: int | None = None
    type: str | None = None
    action: str | None = None
    reporting_component: str | None = None
    reporting_instance: str | None = None


class LeaseSpec(Model):
    holder_identity: str | None = None
    lease_duration_seconds: int | None = None
    acquire_time: str | None = None
    renew_time: str | None = None
    lease_transitions: int | None = None


class Lease(Model, tag_field="kind", tag="Lease"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: LeaseSpec | None = None


class PodDisruptionBudgetSpec(Model):
    """How many of the pods ``selector`` matches must stay (minAvailable) or may go (maxUnavailable)
    at once through evictions: a count or a percentage of the matching pods."""

    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    selector: LabelSelector | None = None
    unhealthy_pod_eviction_policy: str | None = None


class PodDisruptionBudgetStatus(Model):
    current_healthy: int | None = None
    desired_healthy: int | None = None
    disruptions_allowed: int | None = None
    expected_pods: int | None = None
    observed_generation: int | None = None


class PodDisruptionBudget(Model, tag_field="kind", tag="PodDisruptionBudget"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: PodDisruptionBudgetSpec | None = None
    status: PodDisruptionBudgetStatus | None = None


class PriorityClass(Model, tag_field="kind", tag="PriorityClass"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    value: int | None = None
    global_default: bool | None = None
    preemption_policy: str | None = None
    description: str | None = None


class TokenSpec(Model):
    """A bearer token's owner and purpose; the secret itself is kept only as a hash."""

    user: str | None = None
    groups: list[str] | None = None
    purpose: str | None = None  # "authentication" (a user's) or "join" (exchanged by an agent for its node credential)
    expiration_timestamp: str | None = None  # RFC 3339; none: never expires
    secret_hash: str | None = None  # "sha256:<hex>" of the secret part
    description: str | None = None


class Token(Model, tag_field="kind", tag="Token"):
    """``auth.corral.dev/v1`` Token: named by the token's public id (``<id>.<secret>``)."""

    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: TokenSpec | None = None


class ResourceAttributes(Model):
    namespace: str | None = None
    verb: str | None = None
    group: str | None = None
    version: str | None = None
    resource: str | None = None
    subresource: str | None = None
    name: str | None = None


class NonResourceAttributes(Model):
    path: str | None = None
    verb: str | None = None


class SelfSubjectAccessReviewSpec(Model):
    resource_attributes: ResourceAttributes | None = None
    non_resource_attributes: NonResourceAttributes | None = None


class SubjectAccessReviewStatus(Model):
    allowed: bool | None = None
    denied: bool | None = None
    reason: str | None = None
    evaluation_error: str | None = None


class SelfSubjectAccessReview(Model, tag_field="kind", tag="SelfSubjectAccessReview"):
    """``authorization.k8s.io/v1``: may I? (``kubectl auth can-i``). Answered, never stored."""

    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: SelfSubjectAccessReviewSpec | None = None
    status: SubjectAccessReviewStatus | None = None


class SelfSubjectRulesReviewSpec(Model):
    namespace: str | None = None


class SelfSubjectRulesReview(Model, tag_field="kind", tag="SelfSubjectRulesReview"):
    """``authorization.k8s.io/v1``: what may I do in a namespace? (``kubectl auth can-i --list``)."""

    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: SelfSubjectRulesReviewSpec | None = None
    status: dict[str, Any] | None = None


class PolicyRule(Model):
    verbs: list[str] | None = None
    api_groups: list[str] | None = None
    resources: list[str] | None = None
    resource_names: list[str] | None = None
    non_resource_urls: list[str] | None = msgspec.field(default=None, name="nonResourceURLs")


class Role(Model, tag_field="kind", tag="Role"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    rules: list[PolicyRule] | None = None


class ClusterRole(Model, tag_field="kind", tag="ClusterRole"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    rules: list[PolicyRule] | None = None
    aggregation_rule: dict[str, Any] | None = None  # kept as written; corral does not aggregate


class Subject(Model):
    kind: str | None = None  # User | Group | ServiceAccount
    api_group: str | None = None
    name: str | None = None
    namespace: str | None = None


class RoleRef(Model):
    api_group: str | None = None
    kind: str | None = None  # Role | ClusterRole
    name: str | None = None


class RoleBinding(Model, tag_field="kind", tag="RoleBinding"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    subjects: list[Subject] | None = None
    role_ref: RoleRef | None = None


class ClusterRoleBinding(Model, tag_field="kind", tag="ClusterRoleBinding"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    subjects: list[Subject] | None = None
    role_ref: RoleRef | None = None


class DeleteOptions(Model, tag_field="kind", tag="DeleteOptions"):
    api_version: str | None = None
    grace_period_seconds: int | None = None
    propagation_policy: str | None = None
    preconditions: dict[str, Any] | None = None
    dry_run: list[str] | None = None


class StatusCause(Model):
    reason: str | None = None
    message: str | None = None
    field: str | None = None


class StatusDetails(Model):
    name: str | None = None
    group: str | None = None
    kind: str | None = None
    uid: str | None = None
    causes: list[StatusCause] | None = None
    retry_after_seconds: int | None = None


class Status(Model, tag_field="kind", tag="Status"):
    """The error (and sometimes success) answer of every API call."""

    api_version: str = "v1"
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    status: str | None = None
    message: str | None = None
    reason: str | None = None
    details: StatusDetails | None = None
    code: int | None = None


APIObject = Union[Pod, Node, Namespace, Binding, Event, Lease, PriorityClass, Token, Role, ClusterRole,
                  RoleBinding, ClusterRoleBinding]
