"""Authorisation: may this user do this? The node authoriser (:mod:`.node`) for nodes' own
credentials, then RBAC (:mod:`.rbac`) with the default roles users expect (:mod:`.bootstrap`), over
what a request asks (:mod:`.request`). Pure decisions over objects the watch cache holds; no I/O."""

from __future__ import annotations

from corral.server import errors
from corral.server.authz.node import NodeAuthorizer
from corral.server.authz.rbac import Attributes, Decision, RBACAuthorizer
from corral.server.authz.request import RememberedAttributes, request_attributes

__all__ = ["Attributes", "Decision", "NodeAuthorizer", "RBACAuthorizer", "forbidden", "request_attributes",
           "RememberedAttributes"]


def forbidden(a: Attributes, reason: str = "") -> errors.ApiError:
    """Kubernetes' 403: ``pods "web" is forbidden: User "jane" cannot delete resource "pods" in API
    group "" in the namespace "default"``; outside the core group ``deployments.apps "web" is ...``."""
    why = reason or f'User "{a.user}" {a.describe()}'
    if not a.is_resource:
        return errors.ApiError(403, "Forbidden", f"forbidden: {why}")
    what = a.resource + (f".{a.api_group}" if a.api_group else "")  # Kubernetes' GroupResource, as it prints it
    subject = f'{what} "{a.name}"' if a.name else what
    details = {"kind": a.resource, **({"name": a.name} if a.name else {}),
               **({"group": a.api_group} if a.api_group else {})}
    return errors.ApiError(403, "Forbidden", f"{subject} is forbidden: {why}", details)
