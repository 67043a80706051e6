"""Admission: checks on a client's write once its object is decoded, defaulted and merged, just
before it is stored (the last step of the request path: authenticate → decode → authorise → admit).

Components inside the server (scheduler, controllers) write without it: they are trusted code.

- **Node restriction**, as Kubernetes' NodeRestriction limits kubelets: a node's credential creates
  only its own Node and its own Lease; it never sets or changes its ``node-restriction.kubernetes.io/``
  labels, the control plane's ``node.kubernetes.io/`` taints, or its cordon (``spec.unschedulable``).
- **A pod created with spec.nodeName** skips the scheduler, so it is checked here as the scheduler
  would check it: the node's cordon, its NoSchedule and NoExecute taints, and its free cpu, memory,
  ephemeral storage, extended resources and pod slots. A pod that does not fit is answered 422.
  To place one anyway (an administrator's deliberate override) the pod carries the annotation
  ``scheduling.corral.dev/skip-fit-check: "true"`` *and* the caller holds ``create`` on
  ``pods/skip-fit-check`` (``cluster-admin`` does; no other default role).
- **Node Leases' duration** is the server's to set: a write of a Lease in ``kube-node-lease`` gets
  ``spec.leaseDurationSeconds`` = what it asked for, at most the grace period before a silent node
  becomes NotReady, scaled with the node count (``node_lease_seconds``, from
  :mod:`corral.api.kinds.coordination`): an agent renews as many times less often as its lease was
  lengthened. The one change admission makes to an object rather than refusing it.
- **No escalation through RBAC**, as Kubernetes: a Role or ClusterRole may be written only by someone
  who holds every permission it grants (where it grants them), or holds ``escalate`` on it; a binding
  only by someone who holds every permission of the role it binds, or holds ``bind`` on that role.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from corral.api.resources import NODE_LEASE_NAMESPACE, ResourceType, by_kind
from corral.pki import NODE_PREFIX
from corral.scheduler.framework.podinfo import pod_requests
from corral.scheduler.plugins.node_unschedulable import tolerates_unschedulable
from corral.scheduler.plugins.taint_toleration import tolerates
from corral.server import errors
from corral.server.authz.node import node_name
from corral.server.authz.rbac import Attributes, Decision

__all__ = ["Admission", "SKIP_FIT_ANNOTATION", "SKIP_FIT_SUBRESOURCE"]

RESTRICTED_LABEL_PREFIX = "node-restriction.kubernetes.io/"
CONTROL_PLANE_TAINT_PREFIX = "node.kubernetes.io/"
SKIP_FIT_ANNOTATION = "scheduling.corral.dev/skip-fit-check"
SKIP_FIT_SUBRESOURCE = "skip-fit-check"
RBAC_GROUP = "rbac.authorization.k8s.io"
_DONE = ("Succeeded", "Failed")


def _meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, dict) else {}


def _restricted_labels(obj: dict[str, Any] | None) -> dict[str, str]:
    return {k: v for k, v in (_meta(obj).get("labels") or {}).items() if k.startswith(RESTRICTED_LABEL_PREFIX)}


def _control_plane_taints(obj: dict[str, Any] | None) -> list[Any]:
    return [t for t in ((obj or {}).get("spec") or {}).get("taints") or ()
            if isinstance(t, dict) and str(t.get("key", "")).startswith(CONTROL_PLANE_TAINT_PREFIX)]


class Admission:
    def __init__(self, get: Callable[[str], Any], items: Callable[[str], Iterable[Any]],
                 authorize: Callable[[Attributes], Decision], *, node_lease_seconds: Callable[[object], int]) -> None:
        self._get = get  # the watch cache's get and items
        self._items = items
        self._authorize = authorize
        self._node_lease_seconds = node_lease_seconds
        self._pods = by_kind("Pod")
        self._nodes = by_kind("Node")

    def admit(self, resource: ResourceType, new: dict[str, Any], old: dict[str, Any] | None, user: Any) -> None:
        """Raise :class:`ApiError` when the write must not happen; ``old`` is None for a create."""
        node = node_name(user.name, user.groups)
        if node is not None:
            self._restrict_node(node, resource, new, old)
        if resource.kind == "Pod" and old is None and (new.get("spec") or {}).get("nodeName"):
            self._check_fit(new, user)
        if resource.group == RBAC_GROUP:
            self._check_escalation(resource, new, user)
        if resource.kind == "Lease" and _meta(new).get("namespace") == NODE_LEASE_NAMESPACE:
            spec = new.get("spec")
            if isinstance(spec, dict):
                asked = spec.get("leaseDurationSeconds")
                new["spec"] = {**spec, "leaseDurationSeconds": self._node_lease_seconds(asked)}

    # --- RBAC escalation ----------------------------------------------------------------------------------

    def _check_escalation(self, resource: ResourceType, new: dict[str, Any], user: Any) -> None:
        meta = _meta(new)
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        if resource.kind in ("Role", "ClusterRole"):
            rules, verb, target_plural, target = new.get("rules") or (), "escalate", resource.plural, name
        else:
            ref = new.get("roleRef") or {}
            target, ref_kind = ref.get("name") or "", ref.get("kind")
            target_plural = "roles" if ref_kind == "Role" else "clusterroles"
            role = self._get(f"/{RBAC_GROUP}/roles/{namespace}/{target}" if ref_kind == "Role"
                             else f"/{RBAC_GROUP}/clusterroles/{target}")
            rules, verb = (role.obj.get("rules") or ()) if role is not None else (), "bind"
        if self._authorize(Attributes(user.name, user.groups, verb, RBAC_GROUP, target_plural, "",
                                      namespace if target_plural == "roles" else "", target)).allowed:
            return
        missing = next(self._uncovered(rules, user, namespace), None)
        if missing is not None:
            raise errors.forbidden(resource, name, f'User "{user.name}" is attempting to grant RBAC permissions '
                                                   f'not currently held: it {missing.describe()}')

    def _uncovered(self, rules: Iterable[Any], user: Any, namespace: str):
        """Each permission in ``rules`` that ``user`` lacks in ``namespace`` ("" = cluster-wide)."""
        for rule in rules:
            if not isinstance(rule, dict):
                continue
            verbs = rule.get("verbs") or ()
            for url in rule.get("nonResourceURLs") or ():
                for verb in verbs:
                    a = Attributes(user.name, user.groups, verb, path=url)
                    if not self._authorize(a).allowed:
                        yield a
            for group in rule.get("apiGroups") or ():
                for res in rule.get("resources") or ():
                    base, _, sub = res.partition("/")
                    for verb in verbs:
                        for name in rule.get("resourceNames") or ("",):
                            a = Attributes(user.name, user.groups, verb, group, base, sub, namespace, name)
                            if not self._authorize(a).allowed:
                                yield a

    # --- node restriction ------------------------------------------------------------------------------

    def _restrict_node(self, node: str, resource: ResourceType, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = _meta(new).get("name") or ""
        user = NODE_PREFIX + node
        if resource.kind in ("Node", "Lease") and old is None and name != node:
            raise errors.forbidden(resource, name, f'node "{node}" may only create its own {resource.kind}, '
                                                   f'not one named "{name}"')
        if resource.kind != "Node":
            return
        if _restricted_labels(new) != _restricted_labels(old):
            raise errors.forbidden(resource, name, f'User "{user}" may not set or change the '
                                                   f'{RESTRICTED_LABEL_PREFIX}* labels of its own node')
        if _control_plane_taints(new) != _control_plane_taints(old) and old is not None:
            raise errors.forbidden(resource, name, f'User "{user}" may not add or remove the control plane\'s '
                                                   f'{CONTROL_PLANE_TAINT_PREFIX}* taints')
        if bool((new.get("spec") or {}).get("unschedulable")) != bool(((old or {}).get("spec") or {}).get("unschedulable")):
            raise errors.forbidden(resource, name, f'User "{user}" may not cordon or uncordon its own node')

    # --- pods placed by hand -------------------------------------------------------------------------------

    def _check_fit(self, pod: dict[str, Any], user: Any) -> None:
        spec = pod["spec"]
        node_name_ = spec["nodeName"]
        record = self._get(self._nodes.key(None, node_name_))
        if record is None:
            return  # no such node (yet): the pod waits for it, as in Kubernetes, and is collected if it never comes
        problems = self._misfits(pod, record.obj)
        if not problems:
            return
        name = _meta(pod).get("name") or ""
        if (_meta(pod).get("annotations") or {}).get(SKIP_FIT_ANNOTATION) == "true":
            a = Attributes(user.name, user.groups, "create", "", "pods", SKIP_FIT_SUBRESOURCE, _meta(pod).get("namespace") or "",
                           name)
            if self._authorize(a).allowed:
                return
            raise errors.forbidden(self._pods, name, f'User "{user.name}" {a.describe()}: the '
                                                     f'{SKIP_FIT_ANNOTATION} annotation needs it')
        raise errors.ApiError(422, "Invalid", f'Pod "{name}" is invalid: spec.nodeName: Invalid value: '
                              f'"{node_name_}": the pod does not fit on the node: {"; ".join(problems)}',
                              {"name": name, "kind": "Pod", "causes": [
                                  {"reason": "FieldValueInvalid", "field": "spec.nodeName", "message": p}
                                  for p in problems]})

    def _misfits(self, pod: dict[str, Any], node: dict[str, Any]) -> list[str]:
        spec, node_spec, status = pod["spec"], node.get("spec") or {}, node.get("status") or {}
        tolerations = [t for t in spec.get("tolerations") or () if isinstance(t, dict)]
        problems = []
        if node_spec.get("unschedulable") and not tolerates_unschedulable(tolerations):
            problems.append("the node is cordoned (unschedulable)")
        for taint in node_spec.get("taints") or ():
            effect = taint.get("effect", "")
            if effect in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint.get("key", ""),
                                                                        taint.get("value", ""), effect):
                problems.append(f"the pod does not tolerate the taint {taint.get('key')}:{effect}")
        free = self._free(_meta(node).get("name") or "", status)
        wanted = pod_requests(spec)
        extended = dict(wanted.extended)
        asks = {"cpu": wanted.cpu, "memory": wanted.memory, "ephemeral-storage": wanted.ephemeral, "pods": 1,
                **extended}
        for res, amount in asks.items():
            if amount > 0 and res in free and amount > free[res]:
                unit = "m" if res == "cpu" else ""
                problems.append(f"insufficient {res}: asks {amount}{unit}, {max(free[res], 0)}{unit} free")
            elif amount > 0 and res not in free and res in extended:
                problems.append(f"insufficient {res}: the node has none")
        return problems

    def _free(self, node: str, status: dict[str, Any]) -> dict[str, int]:
        """The node's allocatable less what the pods bound to it (and not finished) request."""
        from corral.api.quantity import QuantityError, to_milli, to_units

        free: dict[str, int] = {}
        for res, q in (status.get("allocatable") or status.get("capacity") or {}).items():
            try:
                free[res] = to_milli(q) if res == "cpu" else to_units(q)
            except QuantityError:
                continue
        for record in self._items(self._pods.store_prefix):
            other = record.obj
            other_spec = other.get("spec") or {}
            if other_spec.get("nodeName") != node or (other.get("status") or {}).get("phase") in _DONE:
                continue
            used = pod_requests(other_spec)
            for res, amount in (("cpu", used.cpu), ("memory", used.memory),
                                ("ephemeral-storage", used.ephemeral), ("pods", 1), *used.extended):
                if res in free:
                    free[res] -= amount
        return free

