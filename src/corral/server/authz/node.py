"""The node authoriser: what a node's credential (``system:node:NAME`` in ``system:nodes``) may do,
as Kubernetes' Node authoriser limits kubelets.

A node may read every Node (the scheduler-free view an agent needs is small, and Kubernetes' system:node
role reads them too), create, update and patch its own Node and its status, read and write its own
Lease in the node-lease namespace, read the pods bound to it (a list or watch only with
``fieldSelector=spec.nodeName=NAME``, a get only of a pod bound to it), write the status of those
pods, delete them once it has stopped them, create events, and get the ConfigMaps and Secrets that
pods bound to it take configuration from (as Kubernetes' graph of pods and their references). Nothing
else: not another node's objects, not pods elsewhere, not another Secret, no pod creation, no
bindings, no RBAC, no tokens. Anything it does not
allow it leaves to RBAC, which by default grants nodes nothing more.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable

from corral.api.kinds.config import references
from corral.pki import NODE_PREFIX, NODES_GROUP
from corral.server.authz.rbac import Attributes, Decision
from corral.store import EventType

__all__ = ["NodeAuthorizer", "node_name"]

READ = frozenset({"get", "list", "watch"})
PODS = "/core/pods/"


def node_name(user: str, groups: tuple[str, ...]) -> str | None:
    """The node a credential speaks for, or ``None`` when it is not a node's."""
    if NODES_GROUP in groups and user.startswith(NODE_PREFIX) and len(user) > len(NODE_PREFIX):
        return user[len(NODE_PREFIX):]
    return None


class NodeAuthorizer:
    """``authorize(a)`` → a Decision for node credentials, ``None`` (no opinion) for anyone else."""

    def __init__(self, get: Callable[[str], Any], *, lease_namespace: str, non_resource_paths: frozenset[str],
                 items: Callable[[str], Iterable[Any]] = lambda prefix: ()) -> None:
        self._get = get  # store key → Record or None: the watch cache's get
        self._items = items  # resource prefix → its current Records: the watch cache's items
        self._lease_namespace = lease_namespace
        self._paths = non_resource_paths
        # What each node's pods reference: (node, configmaps | secrets, namespace, name) → how many
        # of its pods do; kept from the watch cache's events, by pod key.
        self._granted: Counter[tuple[str, str, str, str]] = Counter()
        self._pod_refs: dict[str, tuple[tuple[str, str, str, str], ...]] = {}
        self.reload()

    def reload(self) -> None:
        """Index every pod again (the watch cache's contents were replaced)."""
        self._granted.clear()
        self._pod_refs.clear()
        for record in self._items(PODS):
            self._index(record.key, record.obj)

    def on_store_event(self, event: Any) -> None:
        """A watch cache hook: keep the index of what bound pods reference."""
        key = event.record.key
        if key.startswith(PODS):
            self._index(key, None if event.type == EventType.DELETED else event.record.obj)

    def _index(self, key: str, pod: dict[str, Any] | None) -> None:
        for ref in self._pod_refs.pop(key, ()):
            self._granted[ref] -= 1
            if not self._granted[ref]:
                del self._granted[ref]
        node = ((pod or {}).get("spec") or {}).get("nodeName")
        if not node:
            return
        namespace = (pod.get("metadata") or {}).get("namespace", "")  # type: ignore[union-attr]
        refs = tuple((node, resource, namespace, name) for resource, name in references(pod))  # type: ignore[arg-type]
        if refs:
            self._pod_refs[key] = refs
            self._granted.update(refs)

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
        if group == "" and res in ("configmaps", "secrets"):
            return a.verb == "get" and not sub and self._granted[(node, res, a.namespace, a.name)] > 0
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
