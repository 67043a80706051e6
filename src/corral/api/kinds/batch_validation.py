"""Validation of Jobs and CronJobs, with Kubernetes' field paths and messages: counts that cannot be
negative, a pod template that ends (restartPolicy OnFailure or Never), Indexed Jobs that say how
many, a schedule and time zone that can be read, and the fields a Job keeps once created. Imported
by :mod:`corral.api.validation` alone (which it builds on). No I/O here.
"""

from __future__ import annotations

from typing import Any, Callable

from corral.api.kinds import cron
from corral.api.kinds.apps_validation import non_negative, pod_template
from corral.api.kinds.batch import CronJob, Job, JobSpec
from corral.api.validation import INVALID, REQUIRED, Cause, _invalid, _not_supported, label_selector

__all__ = ["BATCH_CHECKS", "BATCH_UPDATE_CHECKS"]

_POLICIES = ("OnFailure", "Never")
MAX_INDEXED_COMPLETIONS = 100_000  # Kubernetes' limit for an Indexed Job


def _job_spec(spec: JobSpec | None, prefix: str = "spec", *, selector_required: bool = False) -> list[Cause]:
    spec = spec or JobSpec()
    causes = non_negative(f"{prefix}.parallelism", spec.parallelism)
    causes += non_negative(f"{prefix}.completions", spec.completions)
    causes += non_negative(f"{prefix}.backoffLimit", spec.backoff_limit)
    causes += non_negative(f"{prefix}.ttlSecondsAfterFinished", spec.ttl_seconds_after_finished)
    if spec.active_deadline_seconds is not None and spec.active_deadline_seconds <= 0:
        causes.append(_invalid(f"{prefix}.activeDeadlineSeconds", spec.active_deadline_seconds,
                               "must be greater than 0"))
    mode = spec.completion_mode
    if mode not in (None, "NonIndexed", "Indexed"):
        causes.append(_not_supported(f"{prefix}.completionMode", mode, ("NonIndexed", "Indexed")))
    if mode == "Indexed":
        if spec.completions is None:
            causes.append(Cause(f"{prefix}.completions", REQUIRED, "Required value: when completion mode is Indexed"))
        elif spec.completions > MAX_INDEXED_COMPLETIONS:
            causes.append(_invalid(f"{prefix}.completions", spec.completions,
                                   f"must be less than or equal to {MAX_INDEXED_COMPLETIONS} when completion mode "
                                   "is Indexed"))
    if spec.selector is not None:
        causes += label_selector(f"{prefix}.selector", spec.selector)
    elif selector_required and spec.manual_selector:
        causes.append(Cause(f"{prefix}.selector", REQUIRED, "Required value"))
    causes += pod_template(spec.template, spec.selector, _POLICIES, f"{prefix}.template")
    return causes


def _job(job: Job) -> list[Cause]:
    return _job_spec(job.spec, selector_required=True)


def _cronjob(cj: CronJob) -> list[Cause]:
    spec = cj.spec
    if spec is None:
        return [Cause("spec", REQUIRED, "Required value")]
    causes: list[Cause] = []
    if not spec.schedule:
        causes.append(Cause("spec.schedule", REQUIRED, "Required value"))
    else:
        try:
            cron.parse(spec.schedule)
        except cron.CronError as exc:
            causes.append(_invalid("spec.schedule", spec.schedule, str(exc)))
    if spec.time_zone:
        try:
            cron.zone(spec.time_zone)
        except cron.CronError as exc:
            causes.append(_invalid("spec.timeZone", spec.time_zone, str(exc)))
    policy = spec.concurrency_policy
    if policy not in (None, "Allow", "Forbid", "Replace"):
        causes.append(_not_supported("spec.concurrencyPolicy", policy, ("Allow", "Forbid", "Replace")))
    causes += non_negative("spec.startingDeadlineSeconds", spec.starting_deadline_seconds)
    causes += non_negative("spec.successfulJobsHistoryLimit", spec.successful_jobs_history_limit)
    causes += non_negative("spec.failedJobsHistoryLimit", spec.failed_jobs_history_limit)
    if spec.job_template is None:
        causes.append(Cause("spec.jobTemplate", REQUIRED, "Required value"))
    else:
        causes += _job_spec(spec.job_template.spec, "spec.jobTemplate.spec")
    name = (cj.metadata.name if cj.metadata else None) or ""
    if len(name) > 52:  # its Jobs are named NAME-TIMESTAMP, within 63 characters
        causes.append(_invalid("metadata.name", name, "must be no more than 52 characters"))
    return causes


def _job_update(kind: str, current: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    """A Job's pods are made from what it was created with: its template, selector, completion mode
    and (but for Indexed ones) completions are fixed, as in Kubernetes."""
    old_spec, new_spec = current.get("spec") or {}, new.get("spec") or {}
    fixed = ["template", "selector", "completionMode"]
    if old_spec.get("completionMode") != "Indexed":
        fixed.append("completions")
    return [Cause(f"spec.{field}", INVALID, f"Invalid value: {field}: field is immutable")
            for field in fixed if old_spec.get(field) != new_spec.get(field)]


BATCH_CHECKS: dict[str, Callable[[Any], list[Cause]]] = {"Job": _job, "CronJob": _cronjob}
BATCH_UPDATE_CHECKS: dict[str, Callable[[str, dict[str, Any], dict[str, Any]], list[Cause]]] = {"Job": _job_update}
