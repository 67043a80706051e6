"""``scheduling.corral.dev/v1alpha1``: PodGroup, a gang of pods scheduled all or nothing.

Pods join a group with the label ``scheduling.corral.dev/pod-group: NAME`` (in the group's
namespace), the shape scheduler-plugins' coscheduling uses. The scheduler holds the members it has
placed until ``minMember`` of them have a place, then binds them all; if that does not happen within
``scheduleTimeoutSeconds`` (300 by default) it lets every place go. Models, defaults and validation;
the scheduling is in :mod:`corral.scheduler.gang`. No I/O here.
"""

from __future__ import annotations

from typing import Any, Callable

from corral.api.models import Model, ObjectMeta

__all__ = ["PodGroup", "PodGroupSpec", "PodGroupStatus", "POD_GROUP_LABEL", "DEFAULT_SCHEDULE_TIMEOUT",
           "SCHEDULING_DEFAULTS", "SCHEDULING_CHECKS"]

POD_GROUP_LABEL = "scheduling.corral.dev/pod-group"
DEFAULT_SCHEDULE_TIMEOUT = 300
MAX_MIN_MEMBER = 100_000


class PodGroupSpec(Model):
    min_member: int | None = None
    schedule_timeout_seconds: int | None = None


class PodGroupStatus(Model):
    phase: str | None = None  # Pending | Scheduling | Scheduled
    scheduled: int | None = None  # members with a place (bound, or held for the gang)
    members: int | None = None  # members that exist
    message: str | None = None
    observed_generation: int | None = None


class PodGroup(Model, tag_field="kind", tag="PodGroup"):
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: PodGroupSpec | None = None
    status: PodGroupStatus | None = None


def _defaults(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        spec.setdefault("scheduleTimeoutSeconds", DEFAULT_SCHEDULE_TIMEOUT)


def _check(group: PodGroup) -> list:
    from corral.api.validation import REQUIRED, Cause, _invalid

    spec = group.spec or PodGroupSpec()
    causes = []
    if spec.min_member is None:
        causes.append(Cause("spec.minMember", REQUIRED, "Required value"))
    elif not 1 <= spec.min_member <= MAX_MIN_MEMBER:
        causes.append(_invalid("spec.minMember", spec.min_member, f"must be from 1 to {MAX_MIN_MEMBER}"))
    timeout = spec.schedule_timeout_seconds
    if timeout is not None and not 1 <= timeout <= 86_400:
        causes.append(_invalid("spec.scheduleTimeoutSeconds", timeout, "must be from 1 to 86400"))
    return causes


SCHEDULING_DEFAULTS: dict[str, Callable[[dict[str, Any]], None]] = {"PodGroup": _defaults}
SCHEDULING_CHECKS: dict[str, Callable[[Any], list]] = {"PodGroup": _check}
