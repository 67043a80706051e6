"""The kinds of ``batch/v1``: Job and CronJob, as Kubernetes defines them.

Models and defaults (a Job's selector and its pods' labels are made from its uid, as Kubernetes
makes them); validation is in :mod:`corral.api.kinds.batch_validation`, the controllers in
:mod:`corral.controllers.workloads.job` and :mod:`corral.controllers.workloads.cronjob`. No I/O here.
"""

from __future__ import annotations

from typing import Any

from corral.api.kinds.apps import PodTemplateSpec, WorkloadCondition
from corral.api.models import LabelSelector, Model, ObjectMeta, ObjectReference

__all__ = ["Job", "JobSpec", "JobStatus", "CronJob", "CronJobSpec", "CronJobStatus", "JobTemplateSpec",
           "BATCH_DEFAULTS", "CONTROLLER_UID", "JOB_NAME", "COMPLETION_INDEX", "DEFAULT_BACKOFF_LIMIT"]

# The labels Kubernetes puts on a Job's pods (and selects them by), and the index of an Indexed Job's pod.
CONTROLLER_UID, JOB_NAME = "batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name"
LEGACY_LABELS = ("controller-uid", "job-name")
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
DEFAULT_BACKOFF_LIMIT = 6


class JobSpec(Model):
    parallelism: int | None = None
    completions: int | None = None
    completion_mode: str | None = None  # NonIndexed (default) | Indexed
    backoff_limit: int | None = None
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    suspend: bool | None = None
    manual_selector: bool | None = None
    selector: LabelSelector | None = None
    template: PodTemplateSpec | None = None


class JobStatus(Model):
    active: int | None = None
    ready: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    terminating: int | None = None
    start_time: str | None = None
    completion_time: str | None = None
    completed_indexes: str | None = None
    failed_indexes: str | None = None
    conditions: list[WorkloadCondition] | None = None


class Job(Model, tag_field="kind", tag="Job"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: JobSpec | None = None
    status: JobStatus | None = None


class JobTemplateSpec(Model):
    metadata: ObjectMeta | None = None
    spec: JobSpec | None = None


class CronJobSpec(Model):
    schedule: str | None = None
    time_zone: str | None = None
    starting_deadline_seconds: int | None = None
    concurrency_policy: str | None = None  # Allow (default) | Forbid | Replace
    suspend: bool | None = None
    successful_jobs_history_limit: int | None = None
    failed_jobs_history_limit: int | None = None
    job_template: JobTemplateSpec | None = None


class CronJobStatus(Model):
    active: list[ObjectReference] | None = None
    last_schedule_time: str | None = None
    last_successful_time: str | None = None


class CronJob(Model, tag_field="kind", tag="CronJob"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: CronJobSpec | None = None
    status: CronJobStatus | None = None


def _job_spec_defaults(spec: dict[str, Any]) -> None:
    """As Kubernetes: neither completions nor parallelism → one pod to complete; parallelism alone →
    a work queue (no completions: done when one pod succeeded and the rest have finished)."""
    if "completions" not in spec and "parallelism" not in spec:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", DEFAULT_BACKOFF_LIMIT)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)


def _job_defaults(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    if isinstance(spec, dict):
        _job_spec_defaults(spec)


def _job_create_defaults(obj: dict[str, Any]) -> None:
    """The selector and the pods' labels, from the Job's uid (unless ``manualSelector``)."""
    _job_defaults(obj)
    spec, meta = obj.get("spec"), obj.get("metadata") or {}
    if not isinstance(spec, dict) or spec.get("manualSelector"):
        return
    labels = {CONTROLLER_UID: meta.get("uid", ""), JOB_NAME: meta.get("name", "")}
    labels.update(dict(zip(LEGACY_LABELS, labels.values())))
    spec.setdefault("selector", {"matchLabels": {CONTROLLER_UID: meta.get("uid", "")}})
    template = spec.setdefault("template", {})
    if isinstance(template, dict):
        tmeta = template.setdefault("metadata", {})
        if isinstance(tmeta, dict):
            tmeta["labels"] = {**(tmeta.get("labels") or {}), **labels}


def _cronjob_defaults(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    job = (spec.get("jobTemplate") or {}).get("spec")
    if isinstance(job, dict):
        _job_spec_defaults(job)


# Applied on every write (create ones on create only), by corral.api.defaults, which defaults the
# pod template as it does a pod.
BATCH_DEFAULTS = {"Job": _job_defaults, "CronJob": _cronjob_defaults}
BATCH_CREATE_DEFAULTS = {"Job": _job_create_defaults}
