"""The node authoriser: what a node's credential (``system:node:NAME`` in ``system:nodes``) may do,
as Kubernetes' Node authoriser limits kubelets.

A node may read every Node (the scheduler-free view an agent needs is small, and Kubernetes' system:node
role reads them too), create, update and patch its own Node and its status, read and write its own
Lease in the node-lease namespace, read the pods bound to it (a list or watch only with
``fieldSelector=spec.nodeName=NAME``, a get only of a pod bound to it), write the status of those
pods, delete them once it has stopped them, and create events. Nothing else: not another node's
objects, not pods elsewhere, no pod creation, no bindings, no RBAC, no tokens. Anything it does not
allow it leaves to RBAC, which by default grants nodes nothing more.
"""

from __future__ import annotations

from typing import Any, Callable

from corral.pki import NODE_PREFIX, NODES_GROUP
from corral.server.authz.rbac import Attributes, Decision

__all__ = ["NodeAuthorizer", "node_name"]

READ = frozenset({"get", "list", "watch"})


def node_name(user: str, groups: tuple[str, ...]) -> str | None:
    """The node a credential speaks for, or ``None`` when it is not a node's."""
    if NODES_GROUP in groups and user.startswith(NODE_PREFIX) and len(user) > len(NODE_PREFIX):
        return user[len(NODE_PREFIX):]
    return None


class NodeAuthorizer:
    """``authorize(a)`` → a Decision for node credentials, ``None`` (no opinion) for anyone else."""

    def __init__(self, get: Callable[[str], Any], *, lease_namespace: str, non_resource_paths: frozenset[str]) -> None:
        self._get = get  # store key → Record or None: the watch cache's get
        self._lease_namespace = lease_namespace
        self._paths = non_resource_paths

    def authorize(self, a: Attributes) -> Decision | None:
        node = node_name(a.user, a.groups)
        if node is None:
            return None
        allowed = self._allows(node, a)
        return Decision(True) if allowed else None

    def _allows(self, node: str, a: Attributes) -> bool:
        if not a.is_resource:
            return a.verb in ("get", "post") and a.path in self._paths
        group, res, sub = a.api_group, a.resource, a.subresource
        # A create names its object only in the body, which is read after authorisation: the
        # node-restriction admission step checks that it is the node's own Node or Lease.
        if group == "" and res == "nodes":
            if not sub and (a.verb in READ or a.verb == "create"):
                return True
            return a.name == node and a.verb in ("get", "update", "patch") and sub in ("", "status")
        if group == "coordination.k8s.io" and res == "leases":
            if a.namespace != self._lease_namespace:
                return False
            return a.verb == "create" or (a.name == node and a.verb in ("get", "update", "patch"))
        if group == "" and res == "events":
            return a.verb in ("create", "patch", "update")
        if group == "" and res == "pods":
            if a.verb in ("list", "watch") and not sub:
                return ("spec.nodeName", node) in a.fields
            if sub == "status" and a.verb in ("get", "update", "patch"):
                return self._bound_here(node, a)
            if not sub and a.verb in ("get", "delete"):
                return self._bound_here(node, a)
        return False

    def _bound_here(self, node: str, a: Attributes) -> bool:
        record = self._get(f"/core/pods/{a.namespace}/{a.name}") if a.namespace and a.name else None
        return record is not None and (record.obj.get("spec") or {}).get("nodeName") == node
