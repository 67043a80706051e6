"""Batch decisions for Placements (``placement.corral.dev/v1``): where copies of one pod template
go, decided for all of them at once, as Kubernetes Fleet's scheduler decides for clusters.

:mod:`.policy` reads a Placement's policy and makes the pod one copy would be; :mod:`.decide`
filters and scores every node once with a profile's plugins and picks by policy (PickAll, PickN
with topology spread, PickFixed), keeping nodes that already hold a copy. It sits beside the
per-pod cycle and uses the same framework, cache and plugins; it does no I/O.
"""

from corral.scheduler.batch.decide import BatchDecision, NodeDecision, decide
from corral.scheduler.batch.policy import Policy, decision_pod, read_policy

__all__ = ["BatchDecision", "NodeDecision", "Policy", "decide", "decision_pod", "read_policy"]
