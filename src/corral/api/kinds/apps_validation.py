"""Validation of the workload kinds (ReplicaSet, Deployment), with Kubernetes' field paths and
messages. Their pod template is checked as a pod is, at ``spec.template.…``. Imported by
:mod:`corral.api.validation` alone (which it builds on). No I/O here.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from corral.api import models
from corral.api.kinds import apps as workloads
from corral.api.kinds.apps import percent_or_count
from corral.api.selectors import SelectorError, label_selector_from_struct
from corral.api.validation import (FORBIDDEN, INVALID, REQUIRED, Cause, _int_or_percent, _invalid, _not_supported,
                                   _pod, label_selector, labels)

__all__ = ["WORKLOAD_CHECKS", "pod_template", "non_negative"]


def pod_template(template: workloads.PodTemplateSpec | None, selector: models.LabelSelector | None,
                 policies: tuple[str, ...] = ("Always",), prefix: str = "spec.template") -> list[Cause]:
    """The pod template at ``prefix``: present, its labels chosen by the selector, valid as a pod,
    restarted as ``policies`` allow (a Deployment's always, a Job's on failure or never)."""
    if template is None:
        return [Cause(prefix, REQUIRED, "Required value")]
    meta = template.metadata or models.ObjectMeta()
    causes = labels(f"{prefix}.metadata.labels", meta.labels)
    if selector is not None and (selector.match_labels or selector.match_expressions):
        try:
            chosen = label_selector_from_struct(msgspec.to_builtins(selector)).matches(meta.labels or {})
        except SelectorError:
            chosen = True  # the selector's own cause says what is wrong with it
        if not chosen:
            causes.append(Cause(f"{prefix}.metadata.labels", INVALID,
                                f"Invalid value: {msgspec.json.encode(meta.labels or {}).decode()}: `selector` does not match template `labels`"))
    pod_causes = _pod(models.Pod(metadata=meta, spec=template.spec))
    causes += [Cause(f"{prefix}.{c.field}", c.reason, c.message) for c in pod_causes]
    policy = template.spec.restart_policy if template.spec is not None else None
    if policy is None and "Always" not in policies:  # a Job's pods must say how they end
        listed = ", ".join(f'"{p}"' for p in policies)
        causes.append(Cause(f"{prefix}.spec.restartPolicy", REQUIRED, f"Required value: valid values: {listed}"))
    elif policy not in (None, *policies):
        causes.append(_not_supported(f"{prefix}.spec.restartPolicy", policy, policies))
    return causes


def _selector(selector: models.LabelSelector | None) -> list[Cause]:
    if selector is None:
        return [Cause("spec.selector", REQUIRED, "Required value")]
    if not selector.match_labels and not selector.match_expressions:
        return [Cause("spec.selector", INVALID, "Invalid value: empty selector is invalid for deployment")]
    return label_selector("spec.selector", selector)


def non_negative(path: str, value: int | None) -> list[Cause]:
    if value is not None and value < 0:
        return [_invalid(path, value, "must be greater than or equal to 0")]
    return []


def _replica_set(rs: workloads.ReplicaSet) -> list[Cause]:
    spec = rs.spec or workloads.ReplicaSetSpec()
    causes = non_negative("spec.replicas", spec.replicas)
    causes += non_negative("spec.minReadySeconds", spec.min_ready_seconds)
    causes += _selector(spec.selector)
    causes += pod_template(spec.template, spec.selector)
    return causes


def _strategy(strategy: workloads.DeploymentStrategy | None) -> list[Cause]:
    if strategy is None:
        return []
    kinds = ("Recreate", "RollingUpdate")
    if strategy.type not in (None, *kinds):
        return [_not_supported("spec.strategy.type", strategy.type, kinds)]
    rolling = strategy.rolling_update
    if rolling is None:
        return []
    if strategy.type == "Recreate":
        return [Cause("spec.strategy.rollingUpdate", FORBIDDEN,
                      "Forbidden: may not be specified when strategy `type` is 'Recreate'")]
    return _rolling_update("spec.strategy.rollingUpdate", rolling)


def _rolling_update(path: str, rolling: workloads.RollingUpdateDeployment | workloads.RollingUpdateDaemonSet) -> list[Cause]:
    """maxUnavailable and maxSurge: counts or percentages, not both 0 (a Deployment's or a DaemonSet's)."""
    causes = _int_or_percent(f"{path}.maxUnavailable", rolling.max_unavailable)
    surge = rolling.max_surge
    if not (surge is None or (isinstance(surge, int) and surge >= 0)
            or (isinstance(surge, str) and surge.endswith("%") and surge[:-1].isdigit())):
        causes.append(_invalid(f"{path}.maxSurge", surge, "must be a non-negative integer or a percentage"))
    if not causes and percent_or_count(rolling.max_unavailable, 100, round_up=False) == 0 \
            and percent_or_count(rolling.max_surge, 100, round_up=True) == 0:
        causes.append(_invalid(f"{path}.maxUnavailable", rolling.max_unavailable,
                               "may not be 0 when `maxSurge` is 0"))
    return causes


def _deployment(deploy: workloads.Deployment) -> list[Cause]:
    spec = deploy.spec or workloads.DeploymentSpec()
    causes = non_negative("spec.replicas", spec.replicas)
    causes += non_negative("spec.minReadySeconds", spec.min_ready_seconds)
    causes += non_negative("spec.revisionHistoryLimit", spec.revision_history_limit)
    causes += _selector(spec.selector)
    causes += pod_template(spec.template, spec.selector)
    causes += _strategy(spec.strategy)
    deadline = spec.progress_deadline_seconds
    if deadline is not None and deadline <= (spec.min_ready_seconds or 0):
        causes.append(_invalid("spec.progressDeadlineSeconds", deadline,
                               "must be greater than minReadySeconds"))
    return causes


def _daemon_set(ds: workloads.DaemonSet) -> list[Cause]:
    spec = ds.spec or workloads.DaemonSetSpec()
    causes = non_negative("spec.minReadySeconds", spec.min_ready_seconds)
    causes += non_negative("spec.revisionHistoryLimit", spec.revision_history_limit)
    causes += _selector(spec.selector)
    causes += pod_template(spec.template, spec.selector)
    strategy = spec.update_strategy
    if strategy is not None:
        if strategy.type not in (None, "RollingUpdate", "OnDelete"):
            causes.append(_not_supported("spec.updateStrategy.type", strategy.type, ("RollingUpdate", "OnDelete")))
        if strategy.rolling_update is not None:
            causes += _rolling_update("spec.updateStrategy.rollingUpdate", strategy.rolling_update)
    return causes


WORKLOAD_CHECKS: dict[str, Callable[[Any], list[Cause]]] = {
    "ReplicaSet": _replica_set,
    "Deployment": _deployment,
    "DaemonSet": _daemon_set,
}
