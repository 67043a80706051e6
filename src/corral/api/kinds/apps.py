"""The workload kinds of ``apps/v1``: ReplicaSet, Deployment and DaemonSet, as Kubernetes defines them.

Models only (the fields corral acts on; anything else a manifest carries is kept as written, with a
warning), with their defaults. Validation is in :mod:`corral.api.kinds.apps_validation`; the
controllers that act on them in :mod:`corral.controllers`. No I/O here.
"""

from __future__ import annotations

from typing import Any

from corral.api.models import LabelSelector, Model, ObjectMeta, PodSpec

__all__ = ["ControllerRevision", "DaemonSet", "PodTemplateSpec", "ReplicaSet", "ReplicaSetSpec", "ReplicaSetStatus", "Deployment", "DeploymentSpec",
           "DeploymentStatus", "DeploymentStrategy", "RollingUpdateDeployment", "WorkloadCondition",
           "WORKLOAD_DEFAULTS", "percent_or_count", "DEFAULT_SURGE", "DEFAULT_UNAVAILABLE"]

DEFAULT_SURGE = DEFAULT_UNAVAILABLE = "25%"  # a Deployment's rolling update, as Kubernetes defaults it
DEFAULT_HISTORY = 10  # old ReplicaSets a Deployment keeps for `kubectl rollout undo`
DEFAULT_PROGRESS_DEADLINE = 600  # seconds without progress before a rollout is reported stuck


def percent_or_count(value: int | str | None, total: int, *, round_up: bool) -> int:
    """An int-or-percent field (maxSurge, maxUnavailable) as a count of ``total`` pods, rounded as
    Kubernetes rounds it: surge up, unavailability down."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    percent = int(value[:-1])
    whole, rest = divmod(percent * total, 100)
    return whole + (1 if round_up and rest else 0)


class PodTemplateSpec(Model):
    """The pods a controller makes: their metadata (labels matching the selector) and spec."""

    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None


class WorkloadCondition(Model):
    type: str | None = None
    status: str | None = None
    last_update_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class ReplicaSetSpec(Model):
    replicas: int | None = None
    min_ready_seconds: int | None = None
    selector: LabelSelector | None = None
    template: PodTemplateSpec | None = None


class ReplicaSetStatus(Model):
    replicas: int | None = None
    fully_labeled_replicas: int | None = None
    ready_replicas: int | None = None
    available_replicas: int | None = None
    terminating_replicas: int | None = None
    observed_generation: int | None = None
    conditions: list[WorkloadCondition] | None = None


class ReplicaSet(Model, tag_field="kind", tag="ReplicaSet"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: ReplicaSetSpec | None = None
    status: ReplicaSetStatus | None = None


class RollingUpdateDeployment(Model):
    max_unavailable: int | str | None = None
    max_surge: int | str | None = None


class DeploymentStrategy(Model):
    type: str | None = None  # RollingUpdate (default) | Recreate
    rolling_update: RollingUpdateDeployment | None = None


class DeploymentSpec(Model):
    replicas: int | None = None
    selector: LabelSelector | None = None
    template: PodTemplateSpec | None = None
    strategy: DeploymentStrategy | None = None
    min_ready_seconds: int | None = None
    revision_history_limit: int | None = None
    paused: bool | None = None
    progress_deadline_seconds: int | None = None


class DeploymentStatus(Model):
    observed_generation: int | None = None
    replicas: int | None = None
    updated_replicas: int | None = None
    ready_replicas: int | None = None
    available_replicas: int | None = None
    unavailable_replicas: int | None = None
    terminating_replicas: int | None = None
    conditions: list[WorkloadCondition] | None = None
    collision_count: int | None = None


class Deployment(Model, tag_field="kind", tag="Deployment"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: DeploymentSpec | None = None
    status: DeploymentStatus | None = None


class RollingUpdateDaemonSet(Model):
    max_unavailable: int | str | None = None
    max_surge: int | str | None = None


class DaemonSetUpdateStrategy(Model):
    type: str | None = None  # RollingUpdate (default) | OnDelete
    rolling_update: RollingUpdateDaemonSet | None = None


class DaemonSetSpec(Model):
    selector: LabelSelector | None = None
    template: PodTemplateSpec | None = None
    update_strategy: DaemonSetUpdateStrategy | None = None
    min_ready_seconds: int | None = None
    revision_history_limit: int | None = None


class DaemonSetStatus(Model):
    current_number_scheduled: int | None = None
    number_misscheduled: int | None = None
    desired_number_scheduled: int | None = None
    number_ready: int | None = None
    observed_generation: int | None = None
    updated_number_scheduled: int | None = None
    number_available: int | None = None
    number_unavailable: int | None = None
    collision_count: int | None = None
    conditions: list[WorkloadCondition] | None = None


class DaemonSet(Model, tag_field="kind", tag="DaemonSet"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: DaemonSetSpec | None = None
    status: DaemonSetStatus | None = None


class ControllerRevision(Model, tag_field="kind", tag="ControllerRevision"):
    """A DaemonSet's template as it was at one revision (``kubectl rollout history|undo``): ``data``
    is the patch that brings it back."""

    api_version: str | None = None
    metadata: ObjectMeta | None = None
    data: Any = None
    revision: int | None = None


def _daemon_set_defaults(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("minReadySeconds", 0)
    spec.setdefault("revisionHistoryLimit", DEFAULT_HISTORY)
    strategy = spec.setdefault("updateStrategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            if isinstance(rolling, dict):
                rolling.setdefault("maxUnavailable", 1)
                rolling.setdefault("maxSurge", 0)


def _controller_revision_defaults(obj: dict[str, Any]) -> None:
    if obj.get("revision") is None:  # Kubernetes' revision is a plain int64: 0 when omitted
        obj["revision"] = 0


def _replica_set_defaults(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    if isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        spec.setdefault("minReadySeconds", 0)


def _deployment_defaults(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("replicas", 1)
    spec.setdefault("minReadySeconds", 0)
    spec.setdefault("revisionHistoryLimit", DEFAULT_HISTORY)
    spec.setdefault("progressDeadlineSeconds", DEFAULT_PROGRESS_DEADLINE)
    strategy = spec.setdefault("strategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            if isinstance(rolling, dict):
                rolling.setdefault("maxUnavailable", DEFAULT_UNAVAILABLE)
                rolling.setdefault("maxSurge", DEFAULT_SURGE)


# Applied on create and on every write of the main resource (so re-applying a manifest that omits
# them is not a change), by corral.api.defaults, which defaults the pod template as it does a pod.
WORKLOAD_DEFAULTS = {"ReplicaSet": _replica_set_defaults, "Deployment": _deployment_defaults,
                     "DaemonSet": _daemon_set_defaults, "ControllerRevision": _controller_revision_defaults}
