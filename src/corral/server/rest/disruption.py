"""PodDisruptionBudgets, as the eviction API (``kubectl drain``) honours them.

A budget selects pods in its namespace and says how many must stay healthy (``minAvailable``) or
how many may be unavailable (``maxUnavailable``), as a count or a percentage of the pods it selects
(rounded up, as Kubernetes rounds). A pod is healthy when it is Ready and not being deleted.
Evicting a healthy pod that a budget selects is refused while the budget allows no more
disruptions; an unhealthy one may go if the budget is met now (``IfHealthyBudget``, the default)
or always (``AlwaysAllow``). The eviction API works the figures out from the watch cache at each
eviction, so they are never stale; the disruption controller (``corral.controllers.workloads.disruption``)
also writes them into each budget's status, for people and tools to read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from corral.api.selectors import label_selector_from_struct

__all__ = ["Budget", "budgets_for", "refusal", "budget_status"]

_TERMINAL = ("Succeeded", "Failed")


def _healthy(pod: dict[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def _scaled(value: int | str, total: int) -> int:
    if isinstance(value, str):
        return math.ceil(int(value.rstrip("%")) * total / 100)
    return value


@dataclass(frozen=True, slots=True)
class Budget:
    name: str
    expected: int  # pods it selects that have not finished
    healthy: int
    desired: int  # healthy pods it wants kept
    always_allow_unhealthy: bool

    @property
    def disruptions_allowed(self) -> int:
        return max(0, self.healthy - self.desired)


def budgets_for(pod: dict[str, Any], pdbs: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]]) -> list[Budget]:
    """The budgets among ``pdbs`` (of the pod's namespace) that select ``pod``, with their figures
    over ``pods`` (the namespace's pods)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    selected = []
    for pdb in pdbs:
        spec = pdb.get("spec") or {}
        if spec.get("selector") is None:
            continue  # Kubernetes: a budget without a selector selects nothing
        selector = label_selector_from_struct(spec["selector"])
        if selector.matches(labels):
            selected.append((pdb, selector))
    if not selected:
        return []
    pods = [p for p in pods if (p.get("status") or {}).get("phase") not in _TERMINAL]
    return [_budget(pdb, selector, pods) for pdb, selector in selected]


def _budget(pdb: dict[str, Any], selector, live_pods: list[dict[str, Any]]) -> Budget:
    spec = pdb["spec"]
    members = [p for p in live_pods if selector.matches_object(p)]
    expected, healthy = len(members), sum(1 for p in members if _healthy(p))
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    else:
        desired = _scaled(spec.get("minAvailable", 1), expected)
    return Budget(pdb["metadata"]["name"], expected, healthy, desired,
                  spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow")


def budget_status(pdb: dict[str, Any], pods: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The budget's status as Kubernetes' disruption controller writes it, over ``pods`` (its
    namespace's): what ``kubectl get pdb`` shows as ALLOWED DISRUPTIONS."""
    spec = pdb.get("spec") or {}
    if spec.get("selector") is None:
        b = Budget(pdb["metadata"]["name"], 0, 0, 0, False)
    else:
        live = [p for p in pods if (p.get("status") or {}).get("phase") not in _TERMINAL]
        b = _budget(pdb, label_selector_from_struct(spec["selector"]), live)
    return {"currentHealthy": b.healthy, "desiredHealthy": b.desired, "disruptionsAllowed": b.disruptions_allowed,
            "expectedPods": b.expected, "observedGeneration": (pdb.get("metadata") or {}).get("generation", 1)}


def refusal(pod: dict[str, Any], budgets: list[Budget]) -> str | None:
    """Why evicting ``pod`` now would break one of its budgets; None if it may go."""
    healthy = _healthy(pod)
    for b in budgets:
        if healthy and b.disruptions_allowed < 1:
            return (f"Cannot evict pod as it would violate the pod's disruption budget. The disruption budget "
                    f"{b.name} needs {b.desired} healthy pods and has {b.healthy} currently")
        if not healthy and not b.always_allow_unhealthy and b.healthy < b.desired:
            return (f"Cannot evict pod as it would violate the pod's disruption budget. The disruption budget "
                    f"{b.name} does not have enough healthy pods ({b.healthy} of {b.desired}) to let an "
                    f"unhealthy one go")
    return None
