"""Authorisation: may this user do this? RBAC (:mod:`.rbac`) with the default roles users expect
(:mod:`.bootstrap`). Pure decisions over objects the watch cache holds; no I/O."""

from corral.server.authz.rbac import Attributes, Decision, RBACAuthorizer

__all__ = ["Attributes", "Decision", "RBACAuthorizer"]
