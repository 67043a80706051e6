"""RBAC decisions, table-driven: what each binding grants, and what it must not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from corral.server.authz.bootstrap import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES
from corral.server.authz.rbac import Attributes, RBACAuthorizer

G = "rbac.authorization.k8s.io"


@dataclass
class FakeRecord:
    key: str
    obj: dict[str, Any]


class Objects:
    """What the watch cache would hold: records by key."""

    def __init__(self, *objs: dict[str, Any]) -> None:
        self.by_key: dict[str, FakeRecord] = {}
        for obj in objs:
            self.put(obj)

    def put(self, obj: dict[str, Any]) -> FakeRecord:
        plural = {"Role": "roles", "ClusterRole": "clusterroles", "RoleBinding": "rolebindings",
                  "ClusterRoleBinding": "clusterrolebindings"}[obj["kind"]]
        ns = obj["metadata"].get("namespace")
        key = f"/{G}/{plural}/" + (f"{ns}/" if ns else "") + obj["metadata"]["name"]
        record = self.by_key[key] = FakeRecord(key, obj)
        return record

    def items(self, prefix: str):
        return [r for k, r in self.by_key.items() if k.startswith(prefix)]

    def get(self, key: str):
        return self.by_key.get(key)


def role(name, rules, ns=None, kind=None):
    meta = {"name": name, **({"namespace": ns} if ns else {})}
    return {"kind": kind or ("Role" if ns else "ClusterRole"), "metadata": meta, "rules": rules}


def binding(name, role_kind, role_name, subjects, ns=None):
    meta = {"name": name, **({"namespace": ns} if ns else {})}
    return {"kind": "RoleBinding" if ns else "ClusterRoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": G, "kind": role_kind, "name": role_name}, "subjects": subjects}


def user(name):
    return {"kind": "User", "name": name}


def group(name):
    return {"kind": "Group", "name": name}


WORLD = Objects(
    *CLUSTER_ROLES, *CLUSTER_ROLE_BINDINGS,
    binding("alice-edit", "ClusterRole", "edit", [user("alice")], ns="team-a"),
    binding("viewers", "ClusterRole", "view", [group("auditors")]),
    role("cm-reader", [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"],
                        "verbs": ["get"]}], ns="team-b"),
    binding("bob-cm", "Role", "cm-reader", [user("bob")], ns="team-b"),
    role("pod-logs", [{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}], ns="team-b"),
    binding("carol-logs", "Role", "pod-logs", [user("carol")], ns="team-b"),
    role("pod-reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}], ns="team-c"),
    binding("erin-pods", "Role", "pod-reader", [user("erin")], ns="team-c"),
    binding("robot", "ClusterRole", "view", [{"kind": "ServiceAccount", "name": "robot", "namespace": "ci"}]),
)

AUTH = ("system:authenticated",)


def ask(who, groups=AUTH, **attrs) -> bool:
    return RBACAuthorizer(WORLD.items, WORLD.get).authorize(Attributes(who, groups, **attrs)).allowed


@pytest.mark.parametrize("who, groups, attrs, allowed", [
    pytest.param("root", ("system:masters",), dict(verb="delete", resource="nodes"), True,
                 id="system:masters may do anything"),
    pytest.param("alice", AUTH, dict(verb="create", resource="pods", namespace="team-a"), True,
                 id="an editor creates pods in her namespace"),
    pytest.param("alice", AUTH, dict(verb="create", resource="pods", namespace="team-b"), False,
                 id="an editor of one namespace cannot create pods in another"),
    pytest.param("alice", AUTH, dict(verb="list", resource="pods"), False,
                 id="a namespaced editor cannot list pods of every namespace"),
    pytest.param("alice", AUTH, dict(verb="create", api_group=G, resource="rolebindings", namespace="team-a"), False,
                 id="an editor cannot grant roles"),
    pytest.param("alice", AUTH, dict(verb="delete", resource="nodes"), False, id="an editor cannot delete nodes"),
    pytest.param("alice", AUTH, dict(verb="create", api_group="example.com", resource="pods", namespace="team-a"),
                 False, id="a rule for one API group does not cover a same-named resource of another"),
    pytest.param("alice", AUTH, dict(verb="create", resource="pods", subresource="eviction", namespace="team-a"),
                 True, id="edit covers the eviction subresource it names"),
    pytest.param("alice", AUTH, dict(verb="create", resource="pods", subresource="binding", namespace="team-a"),
                 False, id="edit does not bind pods: only the scheduler does"),
    pytest.param("alice", AUTH, dict(verb="patch", api_group="apps", resource="deployments", subresource="scale",
                                     namespace="team-a"), True, id="an editor scales deployments"),
    pytest.param("alice", AUTH, dict(verb="update", api_group="apps", resource="deployments", subresource="status",
                                     namespace="team-a"), False,
                 id="an editor cannot rewrite a deployment's status: its controller reports it"),
    pytest.param("alice", AUTH, dict(verb="patch", resource="pods", subresource="status", namespace="team-a"), False,
                 id="an editor cannot mark a pod Running: its node reports that"),
    pytest.param("alice", AUTH, dict(verb="get", api_group="apps", resource="deployments", subresource="status",
                                     namespace="team-a"), True, id="an editor reads a deployment's status"),
    pytest.param("alice", AUTH, dict(verb="get", resource="pods", subresource="log", namespace="team-a"), True,
                 id="an editor reads pod logs"),
    pytest.param("alice", AUTH, dict(verb="delete", resource="pods", subresource="log", namespace="team-a"), False,
                 id="logs are a view: not written through the role"),
    pytest.param("dave", ("auditors", *AUTH), dict(verb="patch", api_group="apps", resource="deployments",
                                                   subresource="scale", namespace="x"), False,
                 id="view cannot scale deployments"),
    pytest.param("dave", ("auditors", *AUTH), dict(verb="update", api_group="apps", resource="replicasets",
                                                   namespace="x"), False, id="view cannot change replica sets"),
    pytest.param("dave", ("auditors", *AUTH), dict(verb="get", api_group="apps", resource="replicasets",
                                                   subresource="scale", namespace="x"), True,
                 id="view reads a replica set's scale"),
    pytest.param("dave", ("auditors", *AUTH), dict(verb="list", resource="pods"), True,
                 id="a group bound to view lists pods everywhere"),
    pytest.param("dave", ("auditors", *AUTH), dict(verb="create", resource="pods", namespace="x"), False,
                 id="view cannot create"),
    pytest.param("dave", ("auditors", *AUTH), dict(verb="get", resource="secrets", namespace="x"), False,
                 id="view cannot read secrets"),
    pytest.param("dave", ("auditors", *AUTH), dict(verb="get", resource="pods", subresource="status",
                                                   namespace="x"), True, id="view reads pod status"),
    pytest.param("bob", AUTH, dict(verb="get", resource="configmaps", namespace="team-b", name="settings"), True,
                 id="a rule with resource names allows the named object"),
    pytest.param("bob", AUTH, dict(verb="get", resource="configmaps", namespace="team-b", name="other"), False,
                 id="a rule with resource names allows no other object"),
    pytest.param("bob", AUTH, dict(verb="list", resource="configmaps", namespace="team-b"), False,
                 id="a rule with resource names does not allow listing"),
    pytest.param("carol", AUTH, dict(verb="get", resource="pods", subresource="log", namespace="team-b"), True,
                 id="a subresource rule allows that subresource"),
    pytest.param("carol", AUTH, dict(verb="get", resource="pods", namespace="team-b"), False,
                 id="a subresource rule does not allow the resource itself"),
    pytest.param("erin", AUTH, dict(verb="get", resource="pods", subresource="log", namespace="team-c"), False,
                 id="a resource rule does not allow its subresources"),
    pytest.param("erin", AUTH, dict(verb="get", resource="pods", namespace="team-c"), True,
                 id="a namespaced role allows its resource in its namespace"),
    pytest.param("system:serviceaccount:ci:robot", AUTH, dict(verb="get", resource="pods", namespace="a"), True,
                 id="a service account is matched by namespace and name"),
    pytest.param("system:serviceaccount:other:robot", AUTH, dict(verb="get", resource="pods", namespace="a"), False,
                 id="a service account of the same name in another namespace is not"),
    pytest.param("anyone", AUTH, dict(verb="get", path="/version"), True, id="every user reads /version"),
    pytest.param("anyone", AUTH, dict(verb="get", path="/apis/apps/v1"), True, id="every user reads discovery"),
    pytest.param("anyone", AUTH, dict(verb="get", path="/metrics"), False, id="metrics are not for everyone"),
    pytest.param("anyone", AUTH, dict(verb="get", path="/apiserver-debug"), False,
                 id="a URL without a star is matched exactly, not as a prefix"),
    pytest.param("anyone", AUTH, dict(verb="create", api_group="authorization.k8s.io",
                                      resource="selfsubjectaccessreviews"), True, id="everyone may ask can-i"),
    pytest.param("anyone", AUTH, dict(verb="list", resource="pods", namespace="default"), False,
                 id="an authenticated user with no binding reads nothing"),
    pytest.param("anyone", AUTH, dict(verb="get", resource="configmaps", namespace="team-b", name="settings"), False,
                 id="another user's role binding grants nothing to others"),
    pytest.param("system:kube-scheduler", AUTH, dict(verb="create", resource="pods", subresource="binding",
                                                     namespace="a"), True, id="the scheduler binds pods"),
    pytest.param("system:kube-scheduler", AUTH, dict(verb="delete", resource="pods", namespace="a"), True,
                 id="the scheduler deletes pods it preempts, as Kubernetes' scheduler role allows"),
    pytest.param("system:kube-scheduler", AUTH, dict(verb="create", resource="pods", namespace="a"), False,
                 id="the scheduler cannot create pods"),
    pytest.param("system:kube-scheduler", AUTH, dict(verb="delete", resource="nodes"), False,
                 id="the scheduler cannot delete nodes"),
    pytest.param("system:kube-scheduler", AUTH, dict(verb="update", resource="nodes"), False,
                 id="the scheduler cannot change nodes"),
])
def test_rbac_grants_what_is_bound_and_nothing_else(who, groups, attrs, allowed):
    assert ask(who, groups, **attrs) is allowed


def test_a_denial_names_the_user_the_verb_and_the_resource():
    decision = RBACAuthorizer(WORLD.items, WORLD.get).authorize(
        Attributes("alice", AUTH, verb="create", resource="pods", namespace="team-b"))
    assert decision.reason == 'User "alice" cannot create resource "pods" in API group "" in the namespace "team-b"'


def test_system_masters_needs_no_binding():
    nothing = Objects()
    authz = RBACAuthorizer(nothing.items, nothing.get)
    assert authz.authorize(Attributes("root", ("system:masters",), verb="delete", resource="nodes")).allowed
    assert not authz.authorize(Attributes("root", AUTH, verb="delete", resource="nodes")).allowed


def test_a_binding_to_a_role_that_does_not_exist_grants_nothing():
    objs = Objects(binding("x", "ClusterRole", "missing", [user("eve")]))
    authz = RBACAuthorizer(objs.items, objs.get)
    assert not authz.authorize(Attributes("eve", AUTH, verb="get", resource="pods", namespace="a")).allowed


def test_a_change_to_a_role_or_binding_counts_once_the_cache_reports_it():
    objs = Objects(role("r", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]),
                   binding("b", "ClusterRole", "r", [user("eve")]))
    authz = RBACAuthorizer(objs.items, objs.get)
    get_pod = Attributes("eve", AUTH, verb="get", resource="pods", namespace="a")
    assert authz.authorize(get_pod).allowed
    record = objs.put(binding("b", "ClusterRole", "r", [user("someone-else")]))

    class Event:
        pass

    event = Event()
    event.record = record
    authz.on_store_event(event)
    assert not authz.authorize(get_pod).allowed


def test_remembered_decisions_are_bounded_and_each_still_right(monkeypatch):
    import corral.server.authz.rbac as rbac

    monkeypatch.setattr(rbac, "MAX_DECISIONS", 3)
    objs = Objects(role("r", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["p1"]}]),
                   binding("b", "ClusterRole", "r", [user("eve")]))
    authz = RBACAuthorizer(objs.items, objs.get)
    for _ in range(2):  # decided, then remembered: the same answers
        got = [authz.authorize(Attributes("eve", AUTH, verb="get", resource="pods", namespace="a", name=f"p{i}")).allowed
               for i in range(10)]
        assert got == [i == 1 for i in range(10)]
    assert len(authz._decided) <= 3  # a client asking for endless names cannot grow the server


@pytest.mark.parametrize("obj, field", [
    pytest.param(binding("b", "Role", "r", [user("u")]), "roleRef.kind",
                 id="a cluster role binding refers to a ClusterRole, never a Role"),
    pytest.param(binding("b", "Secret", "r", [user("u")], ns="a"), "roleRef.kind", id="a binding refers to a role"),
    pytest.param({**binding("b", "ClusterRole", "", [user("u")])}, "roleRef.name", id="a role is named"),
    pytest.param(binding("b", "ClusterRole", "r", [{"kind": "Robot", "name": "x"}]), "subjects[0].kind",
                 id="subjects are users, groups or service accounts"),
    pytest.param(binding("b", "ClusterRole", "r", [{"kind": "User"}]), "subjects[0].name", id="a subject is named"),
    pytest.param(role("r", [{"apiGroups": [""], "resources": ["pods"]}]), "rules[0].verbs", id="a rule has verbs"),
    pytest.param(role("r", [{"verbs": ["get"]}]), "rules[0].resources", id="a rule names resources or URLs"),
    pytest.param(role("r", [{"verbs": ["get"], "resources": ["pods"], "nonResourceURLs": ["/x"]}]),
                 "rules[0].nonResourceURLs", id="a rule is for resources or for URLs, not both"),
])
def test_rbac_objects_that_cannot_work_are_invalid_at_the_field(obj, field):
    from corral.api.resources import by_kind
    from corral.api.validation import validate

    obj = {**obj, "apiVersion": "rbac.authorization.k8s.io/v1"}
    _, causes = validate(by_kind(obj["kind"]), obj)
    assert [c.field for c in causes] == [field]


def test_the_default_roles_and_bindings_are_valid():
    from corral.api.resources import by_kind
    from corral.api.validation import validate

    for obj in CLUSTER_ROLES + CLUSTER_ROLE_BINDINGS:
        assert validate(by_kind(obj["kind"]), obj)[1] == [], obj["metadata"]["name"]


@pytest.mark.parametrize("name, ok", [("system:kube-scheduler", True), ("a/b", False), ("50%", False), ("..", False)])
def test_rbac_names_may_hold_colons_but_nothing_that_breaks_a_url_path(name, ok):
    from corral.api.resources import by_kind
    from corral.api.validation import validate

    obj = {"apiVersion": "rbac.authorization.k8s.io/v1", **role(name, [{"verbs": ["get"], "resources": ["pods"],
                                                                         "apiGroups": [""]}])}
    assert (validate(by_kind("ClusterRole"), obj)[1] == []) is ok
