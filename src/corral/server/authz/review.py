"""``SelfSubjectAccessReview`` and ``SelfSubjectRulesReview``: what ``kubectl auth can-i`` asks.

An access review is judged exactly as a request with those attributes would be (the same
authorisers in the same order), so "can I?" never disagrees with "did it work?". A rules review
lists the RBAC rules that apply to the asker in one namespace; a node's rights come from the node
authoriser, which has no rules to list, so its answer says it is incomplete.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from corral.api import validation
from corral.api.resources import by_kind
from corral.server import errors
from corral.server.authz.node import node_name
from corral.server.authz.rbac import Attributes, Decision, RBACAuthorizer

__all__ = ["Reviews"]

GROUP_VERSION = "authorization.k8s.io/v1"


def _strings(value: Any, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise errors.ApiError(422, "Invalid", f"{field}: Invalid value: must be a string",
                              {"causes": [{"reason": "FieldValueInvalid", "field": field}]})
    return value


class Reviews:
    def __init__(self, authorize: Callable[[Attributes], Decision], rbac: RBACAuthorizer) -> None:
        self._authorize = authorize
        self._rbac = rbac

    def answer(self, kind: str, body: Any, user: str, groups: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request(f"the request body must be a JSON object (a {kind})")
        spec = body.get("spec")
        if not isinstance(spec, dict):
            raise errors.ApiError(422, "Invalid", f"{kind}.authorization.k8s.io is invalid: spec: Required value",
                                  {"causes": [{"reason": "FieldValueRequired", "field": "spec"}]})
        status = self._access(spec, user, groups) if kind == "SelfSubjectAccessReview" else \
            self._rules(spec, user, groups)
        # The metadata asked with is answered back as Kubernetes does, typed: a field of the wrong
        # type is a 422, a field ObjectMeta does not have is dropped (it used to be echoed as sent).
        typed, causes = validation.type_check(by_kind(kind), {"metadata": body.get("metadata")})
        if causes:
            raise errors.invalid(by_kind(kind), None, causes)
        meta = msgspec.to_builtins(typed.metadata) if typed.metadata is not None else {}  # type: ignore[union-attr]
        return {"kind": kind, "apiVersion": GROUP_VERSION, "metadata": {**meta, "creationTimestamp": None},
                "spec": spec, "status": status}

    def _access(self, spec: dict[str, Any], user: str, groups: tuple[str, ...]) -> dict[str, Any]:
        res, non = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if (res is None) == (non is None) or not isinstance(res or non, dict):
            raise errors.ApiError(422, "Invalid", "SelfSubjectAccessReview.authorization.k8s.io is invalid: "
                                  "spec.resourceAttributes: Invalid value: exactly one of resourceAttributes "
                                  "and nonResourceAttributes must be given",
                                  {"causes": [{"reason": "FieldValueInvalid", "field": "spec.resourceAttributes"}]})
        if res is not None:
            p = "spec.resourceAttributes."
            a = Attributes(user, groups, _strings(res.get("verb"), p + "verb"), _strings(res.get("group"), p + "group"),
                           _strings(res.get("resource"), p + "resource"),
                           _strings(res.get("subresource"), p + "subresource"),
                           _strings(res.get("namespace"), p + "namespace"), _strings(res.get("name"), p + "name"))
            if not a.resource:
                raise errors.ApiError(422, "Invalid", "SelfSubjectAccessReview.authorization.k8s.io is invalid: "
                                      "spec.resourceAttributes.resource: Required value",
                                      {"causes": [{"reason": "FieldValueRequired", "field": p + "resource"}]})
        else:
            p = "spec.nonResourceAttributes."
            a = Attributes(user, groups, _strings(non.get("verb"), p + "verb"), path=_strings(non.get("path"), p + "path"))
        decision = self._authorize(a)
        if decision.allowed:
            return {"allowed": True, **({"reason": decision.reason} if decision.reason else {})}
        return {"allowed": False, "reason": decision.reason or f'User "{user}" {a.describe()}'}

    def _rules(self, spec: dict[str, Any], user: str, groups: tuple[str, ...]) -> dict[str, Any]:
        namespace = _strings(spec.get("namespace"), "spec.namespace")
        resource_rules, url_rules = [], []
        for rule in self._rbac.rules_for(user, groups, namespace):
            if rule.urls:
                url_rules.append({"verbs": sorted(rule.verbs), "nonResourceURLs": list(rule.urls)})
            else:
                entry: dict[str, Any] = {"verbs": sorted(rule.verbs), "apiGroups": sorted(rule.api_groups),
                                         "resources": sorted(rule.resources)}
                if rule.names:
                    entry["resourceNames"] = sorted(rule.names)
                resource_rules.append(entry)
        status: dict[str, Any] = {"resourceRules": resource_rules, "nonResourceRules": url_rules,
                                  "incomplete": False}
        if node_name(user, groups) is not None:
            status["incomplete"] = True
            status["evaluationError"] = "a node's rights come from the node authoriser, which has no rules to list"
        return status
