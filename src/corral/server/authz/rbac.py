"""Kubernetes RBAC over the watch cache: Roles, ClusterRoles and their bindings.

A request is allowed when some rule of a role bound to the user (by name, by one of its groups, or
as a service account) matches its verb, API group, resource (``resource/subresource`` for a
subresource) and name, or, for a path outside the API, its URL. Only grants exist; nothing denies.
``system:masters`` is allowed everything without looking, as kube-apiserver does.

The rules for one user are gathered once and kept until any RBAC object changes (the watch cache
reports every change, and its reloads), so a request costs a dictionary lookup and a few set tests,
not a walk over every binding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from corral.pki import MASTERS_GROUP

__all__ = ["Attributes", "Decision", "RBACAuthorizer", "Rule", "RBAC_PREFIXES"]

GROUP = "rbac.authorization.k8s.io"
MAX_DECISIONS = 10_000  # remembered decisions (and users' gathered rules) before starting over
RBAC_PREFIXES = tuple(f"/{GROUP}/{plural}/" for plural in ("roles", "clusterroles", "rolebindings",
                                                          "clusterrolebindings"))


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request asks: a verb on a resource (``resource`` set) or on a URL path (``path``)."""

    user: str
    groups: tuple[str, ...]
    verb: str
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    # Exact field-selector requirements of a list or watch (``spec.nodeName`` → value).
    fields: tuple[tuple[str, str], ...] = ()

    @property
    def is_resource(self) -> bool:
        return bool(self.resource)

    def describe(self) -> str:
        """Kubernetes' words for a denial: ``cannot create resource "pods" in API group "" in the
        namespace "default"``."""
        if not self.is_resource:
            return f'cannot {self.verb} path "{self.path}"'
        res = self.resource + (f"/{self.subresource}" if self.subresource else "")
        where = f' in the namespace "{self.namespace}"' if self.namespace else " at the cluster scope"
        return f'cannot {self.verb} resource "{res}" in API group "{self.api_group}"{where}'


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Rule:
    verbs: frozenset[str]
    api_groups: frozenset[str]
    resources: frozenset[str]
    names: frozenset[str]
    urls: tuple[str, ...]

    @classmethod
    def from_obj(cls, rule: dict[str, Any]) -> "Rule":
        return cls(frozenset(rule.get("verbs") or ()), frozenset(rule.get("apiGroups") or ()),
                   frozenset(rule.get("resources") or ()), frozenset(rule.get("resourceNames") or ()),
                   tuple(rule.get("nonResourceURLs") or ()))

    def matches(self, a: Attributes) -> bool:
        if "*" not in self.verbs and a.verb not in self.verbs:
            return False
        if not a.is_resource:
            return any(u == "*" or u == a.path or (u.endswith("*") and a.path.startswith(u[:-1])) for u in self.urls)
        if "*" not in self.api_groups and a.api_group not in self.api_groups:
            return False
        if a.subresource:
            wanted = f"{a.resource}/{a.subresource}"
            if not ({"*", wanted, f"*/{a.subresource}"} & self.resources):
                return False
        elif "*" not in self.resources and a.resource not in self.resources:
            return False
        return not self.names or a.name in self.names


def _subject_matches(subject: dict[str, Any], user: str, groups: tuple[str, ...], binding_ns: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user
    if kind == "Group":
        return name in groups
    if kind == "ServiceAccount":
        return user == f"system:serviceaccount:{subject.get('namespace') or binding_ns}:{name}"
    return False


class RBACAuthorizer:
    """``authorize(attributes)`` from the RBAC objects ``items(prefix)`` yields (the watch cache's
    records). Call :meth:`invalidate` whenever one of them changes."""

    def __init__(self, items: Callable[[str], Iterable[Any]], get: Callable[[str], Any]) -> None:
        self._items = items
        self._get = get
        # (user, groups) → (cluster-wide rules, {namespace: rules}); cleared on any RBAC change.
        self._rules: dict[tuple[str, tuple[str, ...]], tuple[list[Rule], dict[str, list[Rule]]]] = {}
        # What was decided, by everything a decision depends on; cleared with the rules. A client
        # repeats the same few requests: matching them against a role's rules again cost ~7 µs each.
        self._decided: dict[tuple, Decision] = {}
        self.generation = 0  # counts the changes to RBAC objects: a decision kept elsewhere is as old as this

    def invalidate(self) -> None:
        self._rules.clear()
        self._decided.clear()
        self.generation += 1

    def on_store_event(self, event: Any) -> None:
        """A watch cache hook: forget what was gathered once an RBAC object changes."""
        if event.record.key.startswith(RBAC_PREFIXES):
            self.invalidate()

    def authorize(self, a: Attributes) -> Decision:
        if MASTERS_GROUP in a.groups:
            return Decision(True, MASTERS_GROUP)
        key = (a.user, a.groups, a.verb, a.api_group, a.resource, a.subresource, a.namespace, a.name, a.path)
        decision = self._decided.get(key)
        if decision is None:
            decision = self._decide(a)
            if len(self._decided) >= MAX_DECISIONS:  # many distinct requests: start over, never grow unbounded
                self._decided.clear()
            self._decided[key] = decision
        return decision

    def _decide(self, a: Attributes) -> Decision:
        cluster_rules, by_namespace = self._gather(a.user, a.groups)
        if any(rule.matches(a) for rule in cluster_rules):
            return Decision(True)
        if any(rule.matches(a) for rule in by_namespace.get(a.namespace, ())):
            return Decision(True)
        return Decision(False, f'User "{a.user}" {a.describe()}')

    def rules_for(self, user: str, groups: tuple[str, ...], namespace: str) -> list[Rule]:
        """Every rule that applies to ``user`` in ``namespace`` (SelfSubjectRulesReview)."""
        cluster_rules, by_namespace = self._gather(user, groups)
        return cluster_rules + list(by_namespace.get(namespace, ()))

    def _role_rules(self, kind: str, namespace: str, name: str) -> list[Rule]:
        key = f"/{GROUP}/clusterroles/{name}" if kind == "ClusterRole" else f"/{GROUP}/roles/{namespace}/{name}"
        record = self._get(key)
        if record is None:
            return []
        return [Rule.from_obj(r) for r in record.obj.get("rules") or () if isinstance(r, dict)]

    def _gather(self, user: str, groups: tuple[str, ...]) -> tuple[list[Rule], dict[str, list[Rule]]]:
        key = (user, groups)
        found = self._rules.get(key)
        if found is not None:
            return found
        cluster_rules: list[Rule] = []
        for record in self._items(f"/{GROUP}/clusterrolebindings/"):
            obj = record.obj
            if any(_subject_matches(s, user, groups, "") for s in obj.get("subjects") or ()):
                ref = obj.get("roleRef") or {}
                if ref.get("kind") == "ClusterRole":
                    cluster_rules += self._role_rules("ClusterRole", "", ref.get("name", ""))
        by_namespace: dict[str, list[Rule]] = {}
        for record in self._items(f"/{GROUP}/rolebindings/"):
            obj = record.obj
            ns = (obj.get("metadata") or {}).get("namespace") or ""
            if any(_subject_matches(s, user, groups, ns) for s in obj.get("subjects") or ()):
                ref = obj.get("roleRef") or {}
                by_namespace.setdefault(ns, []).extend(self._role_rules(ref.get("kind", ""), ns, ref.get("name", "")))
        if len(self._rules) > MAX_DECISIONS:  # many distinct users: start over rather than grow without bound
            self._rules.clear()
        self._rules[key] = (cluster_rules, by_namespace)
        return cluster_rules, by_namespace
