"""Who may do what, over HTTPS against the real server: each role, and what it must not be able to do.

Users authenticate with client certificates of the cluster CA (CN = user, O = groups), as
``corral token`` users and agents would; the administrator grants rights with RBAC objects."""

from __future__ import annotations

import json

import pytest

from corral.client import ApiError, Client
from corral.testing import running_server
from corral.testing.builders import NodeBuilder, PodBuilder

RBAC = "rbac.authorization.k8s.io/v1"


@pytest.fixture
async def server(tmp_path):
    async with running_server(str(tmp_path / "authz"), scheduler=False, controllers=False) as s:
        yield s


def as_user(server, user: str, *groups: str) -> Client:
    return Client(credentials=server.issue_credentials(user, list(groups)))


def binding(name: str, role: str, group: str, namespace: str | None = None) -> dict:
    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": RBAC, "kind": kind, "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]}


async def refused(call, code: int = 403) -> ApiError:
    with pytest.raises(ApiError) as err:
        await call
    assert err.value.code == code, err.value.message
    return err.value


async def test_a_view_user_reads_and_is_refused_every_write_with_a_status_naming_user_verb_and_resource(server):
    async with server.client() as admin:
        await admin.create(binding("dev-view", "view", "dev", "default"), raw=True)
        await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}, raw=True)
        await admin.create(PodBuilder("web").obj, raw=True)
        await admin.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "default"},
                            "stringData": {"password": "p"}}, raw=True)
        await admin.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app", "namespace": "default"},
                            "data": {"mode": "fast"}}, raw=True)
    async with as_user(server, "vera", "dev") as vera:
        assert [p["metadata"]["name"] for p in (await vera.list("pods", "default", raw=True)).items] == ["web"]
        await vera.get("pods", "web", "default", raw=True)
        await vera.request("GET", "/api")  # discovery, for every authenticated user
        err = await refused(vera.create(PodBuilder("sneaky").obj, raw=True))
        assert err.status == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden",
            "code": 403, "details": {"kind": "pods"},
            "message": 'pods is forbidden: User "vera" cannot create resource "pods" in API group "" in the '
                       'namespace "default"'}
        err = await refused(vera.delete("pods", "web", "default"))
        assert err.message == ('pods "web" is forbidden: User "vera" cannot delete resource "pods" in API group "" '
                               'in the namespace "default"')
        await refused(vera.patch("pods", "web", {"metadata": {"labels": {"x": "y"}}}, "default", raw=True))
        await refused(vera.list("pods", "other", raw=True))  # the binding is for default only
        await refused(vera.request("GET", "/api/v1/namespaces/default/secrets"))  # view does not read Secrets
        await refused(vera.get("secrets", "db", "default", raw=True))
        await refused(vera.request("GET", "/api/v1/namespaces/default/secrets?watch=1"))
        assert [c["metadata"]["name"] for c in (await vera.list("configmaps", "default", raw=True)).items] == ["app"]
        # Nor run commands in a pod or reach its ports: a WebSocket upgrade is a GET, judged as create.
        err = await refused(vera.request("GET", "/api/v1/namespaces/default/pods/web/exec?command=id"))
        assert err.message == ('pods "web" is forbidden: User "vera" cannot create resource "pods/exec" in API group '
                               '"" in the namespace "default"')
        await refused(vera.request("GET", "/api/v1/namespaces/default/pods/web/portforward"))
        await refused(vera.list("nodes", raw=True))
        await refused(vera.list("tokens", raw=True))
        await refused(vera.create(binding("escalate", "cluster-admin", "dev"), raw=True))
        err = await refused(vera.request("GET", "/metrics"))
        assert err.message == 'forbidden: User "vera" cannot get path "/metrics"'
    async with server.client() as admin:  # nothing the refused requests asked for happened
        pod = await admin.get("pods", "web", "default", raw=True)
        assert "x" not in (pod["metadata"].get("labels") or {})
        assert [p["metadata"]["name"] for p in (await admin.list("pods", None, raw=True)).items] == ["web"]
        assert not any(b["metadata"]["name"] == "escalate"
                       for b in (await admin.list("clusterrolebindings", raw=True)).items)


async def test_an_edit_user_runs_workloads_in_its_namespace_but_cannot_grant_rights_or_touch_nodes(server):
    async with server.client() as admin:
        await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}, raw=True)
        await admin.create(binding("team-edit", "edit", "team-devs", "team"), raw=True)
        await admin.create(NodeBuilder("n1").obj, raw=True)
    async with as_user(server, "eddie", "team-devs") as eddie:
        await eddie.create(PodBuilder("app", "team").obj, raw=True)
        await eddie.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": "team"},
                            "stringData": {"token": "t"}}, raw=True)
        assert (await eddie.get("secrets", "token", "team", raw=True))["data"] == {"token": "dA=="}
        # May exec (authorised: what it lacks is a node for the pod, not the right).
        err = await refused(eddie.request("GET", "/api/v1/namespaces/team/pods/app/exec?command=id"), 400)
        assert err.message == 'pod "app" is not on a node yet'
        await eddie.delete("pods", "app", "team")
        await refused(eddie.create(PodBuilder("app").obj, raw=True))  # default is not its namespace
        await refused(eddie.create(binding("me-admin", "admin", "team-devs", "team"), raw=True))
        await refused(eddie.patch("nodes", "n1", {"spec": {"unschedulable": True}}, raw=True))
        await refused(eddie.request("POST", "/apis/auth.corral.dev/v1/tokens", body={
            "apiVersion": "auth.corral.dev/v1", "kind": "Token", "metadata": {"name": "abcdef"},
            "spec": {"user": "root", "groups": ["system:masters"], "purpose": "authentication"}}))


async def test_a_rule_for_list_does_not_allow_watch(server):
    async with server.client() as admin:
        await admin.create({"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "lister", "namespace": "default"},
                            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}, raw=True)
        await admin.create({**binding("listers", "lister", "listers", "default"),
                            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "lister"}},
                           raw=True)
    async with as_user(server, "lee", "listers") as lee:
        await lee.list("pods", "default", raw=True)
        for word in ("true", "t", "1", "yes", "TRUE"):  # every spelling the watch handler takes as a watch
            err = await refused(lee.request("GET", "/api/v1/namespaces/default/pods",
                                            params={"watch": word, "timeoutSeconds": 1}))
            assert 'cannot watch resource "pods"' in err.message, word


async def test_a_binding_counts_the_moment_it_is_created_and_stops_the_moment_it_is_deleted(server):
    async with as_user(server, "carl", "ops") as carl:
        await refused(carl.list("pods", "default", raw=True))
        async with server.client() as admin:
            await admin.create(binding("ops-view", "view", "ops"), raw=True)
            await carl.list("pods", "default", raw=True)
            await admin.delete("clusterrolebindings", "ops-view")
        await refused(carl.list("pods", "default", raw=True))


async def test_a_node_reads_and_writes_only_what_its_own_pods_need(server):
    async with server.client() as admin:
        for name in ("n1", "n2"):
            await admin.create(NodeBuilder(name).obj, raw=True)
        await admin.create(PodBuilder("mine").node("n1").obj, raw=True)
        await admin.create(PodBuilder("theirs").node("n2").obj, raw=True)
    async with Client(credentials=server.node_credentials("n1")) as n1:
        # What it may do: its own Node, Lease and pods.
        await n1.patch("nodes", "n1", {"status": {"conditions": []}}, subresource="status", raw=True)
        await n1.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                         "metadata": {"name": "n1", "namespace": "kube-node-lease"},
                         "spec": {"holderIdentity": "n1"}}, raw=True)
        await n1.patch("leases", "n1", {"spec": {"leaseDurationSeconds": 40}}, "kube-node-lease", raw=True)
        mine = await n1.list("pods", None, field_selector="spec.nodeName=n1", raw=True)
        assert [p["metadata"]["name"] for p in mine.items] == ["mine"]
        await n1.get("pods", "mine", "default", raw=True)
        await n1.patch("pods", "mine", {"status": {"phase": "Running"}}, "default", subresource="status", raw=True)
        # What it must not: another node's objects, other pods, creating or binding pods, anything else.
        await refused(n1.patch("nodes", "n2", {"status": {"conditions": []}}, subresource="status", raw=True))
        await refused(n1.patch("nodes", "n2", {"metadata": {"labels": {"x": "y"}}}, raw=True))
        await refused(n1.create(NodeBuilder("n3").obj, raw=True))
        await refused(n1.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                 "metadata": {"name": "n2", "namespace": "kube-node-lease"}, "spec": {}}, raw=True))
        await refused(n1.patch("leases", "n2", {"spec": {}}, "kube-node-lease", raw=True))
        await refused(n1.get("pods", "theirs", "default", raw=True))
        await refused(n1.patch("pods", "theirs", {"status": {"phase": "Failed"}}, "default", subresource="status",
                               raw=True))
        await refused(n1.list("pods", None, raw=True))
        await refused(n1.list("pods", None, field_selector="spec.nodeName=n2", raw=True))
        await refused(n1.create(PodBuilder("new").node("n1").obj, raw=True))
        await refused(n1.request("POST", "/api/v1/namespaces/default/pods/theirs/binding", body={
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "theirs"},
            "target": {"kind": "Node", "name": "n1"}}))
        await refused(n1.list("tokens", raw=True))
        await refused(n1.list("clusterrolebindings", raw=True))
        # Nor run commands in pods, even its own, or reach any agent through the server.
        await refused(n1.request("GET", "/api/v1/namespaces/default/pods/mine/exec?command=id"))
        await refused(n1.request("GET", "/api/v1/namespaces/default/pods/mine/portforward"))
        await refused(n1.request("GET", "/api/v1/nodes/n1/proxy/metrics"))
        await refused(n1.request("GET", "/apis/metrics.k8s.io/v1beta1/nodes"))
        # Nor may it lift what the control plane put on its own node.
        await refused(n1.patch("nodes", "n1", {"metadata": {"labels": {
            "node-restriction.kubernetes.io/trusted": "yes"}}}, raw=True))
    async with server.client() as admin:
        await admin.patch("nodes", "n1", {"spec": {"unschedulable": True, "taints": [
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]}}, raw=True)
    async with Client(credentials=server.node_credentials("n1")) as n1:
        await refused(n1.patch("nodes", "n1", {"spec": {"unschedulable": False}}, raw=True))
        await refused(n1.patch("nodes", "n1", {"spec": {"taints": []}}, raw=True))
        await n1.patch("nodes", "n1", {"metadata": {"labels": {"disk": "ssd"}}}, raw=True)  # its own labels: yes
    async with server.client() as admin:
        theirs = await admin.get("pods", "theirs", "default", raw=True)
        assert theirs["status"]["phase"] != "Failed"
        n1 = await admin.get("nodes", "n1", raw=True)
        assert n1["spec"]["unschedulable"] is True and n1["metadata"]["labels"]["disk"] == "ssd"
        assert (await admin.list("nodes", raw=True)).items.__len__() == 2


async def test_can_i_answers_as_the_request_itself_would_be_judged(server):
    async with server.client() as admin:
        await admin.create(binding("dev-view", "view", "dev", "default"), raw=True)

    def review(verb: str, resource: str, namespace: str = "default") -> dict:
        return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": namespace}}}

    async with as_user(server, "vera", "dev") as vera:
        path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        yes = json.loads(await vera.request("POST", path, body=review("list", "pods")))
        assert yes["status"]["allowed"] is True
        no = json.loads(await vera.request("POST", path, body=review("create", "pods")))
        assert no["status"] == {"allowed": False, "reason": 'User "vera" cannot create resource "pods" in API group '
                                                            '"" in the namespace "default"'}
        rules = json.loads(await vera.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                                              body={"apiVersion": "authorization.k8s.io/v1",
                                                    "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}}))
        pods_rule = next(r for r in rules["status"]["resourceRules"] if "pods" in r["resources"])
        assert pods_rule["verbs"] == ["get", "list", "watch"]
        err = await refused(vera.request("POST", path, body={"kind": "SelfSubjectAccessReview", "spec": {}}), 422)
        assert "exactly one of resourceAttributes and nonResourceAttributes" in err.message
        # The metadata asked with comes back typed: what ObjectMeta lacks is dropped, a wrong type refused.
        asked = {**review("list", "pods"), "metadata": {"name": "q", "labels": {"a": "b"}, "junk\n": [1]}}
        answered = json.loads(await vera.request("POST", path, body=asked))["metadata"]
        assert answered == {"name": "q", "labels": {"a": "b"}, "creationTimestamp": None}
        err = await refused(vera.request("POST", path, body={**asked, "metadata": {"generation": True}}), 422)
        assert "metadata.generation" in err.message
    async with server.client() as admin:  # asked, never stored: nothing to list, even for the administrator
        await refused(admin.request("GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"), 405)


async def test_collection_deletes_only_where_served_and_never_of_what_every_cluster_needs(server):
    async with server.client() as admin:
        await admin.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                            "metadata": {"name": "batch"}, "value": 10}, raw=True)
        await refused(admin.request("DELETE", "/api/v1/namespaces"), 405)
        await refused(admin.request("DELETE", "/apis/auth.corral.dev/v1/tokens"), 405)
        err = await refused(admin.request("DELETE", "/apis/scheduling.k8s.io/v1/priorityclasses"))
        assert err.message == ('priorityclasses "system-cluster-critical" is forbidden: this is a system priority '
                               "class: it may not be deleted")  # the first, by name, refuses them all
        err = await refused(admin.delete("priorityclasses", "system-node-critical"))
        assert err.message == ('priorityclasses "system-node-critical" is forbidden: this is a system priority '
                               "class: it may not be deleted")
        assert err.status["details"] == {"name": "system-node-critical", "group": "scheduling.k8s.io",
                                         "kind": "priorityclasses"}
        await admin.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "system-node-critical"}},
                           "default", raw=True)
        await admin.delete("configmaps", "system-node-critical", "default")  # only the priority class is kept
        names = {c["metadata"]["name"] for c in (await admin.list("priorityclasses", raw=True)).items}
        assert names == {"batch", "system-cluster-critical", "system-node-critical"}  # all or nothing
        await refused(admin.delete("namespaces", "kube-node-lease"))
        token = (await admin.list("tokens", raw=True)).items[0]["metadata"]["name"]
        await refused(admin.patch("tokens", token, {"spec": {"user": "someone-else"}}, raw=True), 405)


def _node(name: str, **extra) -> dict:
    node = NodeBuilder(name).capacity(cpu="2", memory="4Gi", pods="3").obj
    node["spec"].update(extra)
    return node


async def test_a_pod_placed_by_hand_is_checked_as_the_scheduler_would_check_it(server):
    async with server.client() as admin:
        await admin.create(_node("small"), raw=True)
        await admin.create(_node("tainted", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]), raw=True)
        await admin.create(_node("cordoned", unschedulable=True), raw=True)
        await admin.create(_node("draining", taints=[{"key": "maintenance", "effect": "NoExecute"}]), raw=True)
        await admin.create(PodBuilder("done").node("small").requests(cpu="1").obj, raw=True)
        await admin.patch("pods", "done", {"status": {"phase": "Succeeded"}}, "default", subresource="status", raw=True)
        await admin.create(PodBuilder("half").node("small").requests(cpu="1").obj, raw=True)  # "done" counts no more
        err = await refused(admin.create(PodBuilder("huge").node("small").requests(cpu="5000").obj, raw=True), 422)
        assert err.message == ('Pod "huge" is invalid: spec.nodeName: Invalid value: "small": the pod does not fit on '
                               'the node: insufficient cpu: asks 5000000m, 1000m free')
        assert err.status["details"]["causes"][0]["field"] == "spec.nodeName"
        await refused(admin.create(PodBuilder("second-half").node("small").requests(cpu="1001m").obj, raw=True), 422)
        await admin.create(PodBuilder("rest").node("small").requests(cpu="1").obj, raw=True)  # exactly what is left
        err = await refused(admin.create(PodBuilder("t").node("tainted").obj, raw=True), 422)
        assert "does not tolerate the taint gpu:NoSchedule" in err.message
        await admin.create(PodBuilder("t").node("tainted").toleration("gpu", "yes", "NoSchedule").obj, raw=True)
        err = await refused(admin.create(PodBuilder("c").node("cordoned").obj, raw=True), 422)
        assert "cordoned" in err.message
        err = await refused(admin.create(PodBuilder("d").node("draining").obj, raw=True), 422)
        assert "does not tolerate the taint maintenance:NoExecute" in err.message
        await admin.create(PodBuilder("ghost").node("not-yet").obj, raw=True)  # no such node: waits, as in Kubernetes
        names = {p["metadata"]["name"] for p in (await admin.list("pods", None, raw=True)).items}
        assert names == {"done", "half", "rest", "t", "ghost"}
        # The override: the annotation, and the right to use it (the administrator has it, an editor not).
        forced = PodBuilder("forced").node("cordoned").obj
        forced["metadata"]["annotations"] = {"scheduling.corral.dev/skip-fit-check": "true"}
        await admin.create({**forced, "metadata": {**forced["metadata"], "name": "forced-by-admin"}}, raw=True)
        await admin.create(binding("devs-edit", "edit", "devs", "default"), raw=True)
    async with as_user(server, "eddie", "devs") as eddie:
        err = await refused(eddie.create(forced, raw=True))
        assert 'cannot create resource "pods/skip-fit-check"' in err.message
        err = await refused(eddie.create(PodBuilder("p").node("cordoned").obj, raw=True), 422)


async def test_a_namespace_admin_grants_what_it_holds_and_nothing_more(server):
    async with server.client() as admin:
        await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}, raw=True)
        await admin.create(binding("leads-admin", "admin", "leads", "team"), raw=True)
    async with as_user(server, "ada", "leads") as ada:
        await ada.create(binding("devs-edit", "edit", "devs", "team"), raw=True)  # admin holds all of edit
        err = await refused(ada.create(binding("devs-root", "cluster-admin", "devs", "team"), raw=True))
        assert 'attempting to grant RBAC permissions not currently held' in err.message
        await ada.create({"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "reader", "namespace": "team"},
                          "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}, raw=True)
        err = await refused(ada.create({"apiVersion": RBAC, "kind": "Role",
                                        "metadata": {"name": "placer", "namespace": "team"},
                                        "rules": [{"apiGroups": [""], "resources": ["pods/skip-fit-check"],
                                                   "verbs": ["create"]}]}, raw=True))
        assert 'cannot create resource "pods/skip-fit-check"' in err.message
        # A binding keeps the role it was made for: change it by deleting and creating again.
        err = await refused(ada.patch("rolebindings", "devs-edit", {"roleRef": {"name": "view"}}, "team", raw=True),
                            422)
        assert "cannot change roleRef" in err.message
        # Its subjects may change, the role stays.
        more = {"subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"},
                             {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "testers"}]}
        changed = await ada.patch("rolebindings", "devs-edit", more, "team", raw=True)
        assert [s["name"] for s in changed["subjects"]] == ["devs", "testers"]
    async with server.client() as admin:
        await admin.create(binding("all-view", "view", "everyone"), raw=True)
        err = await refused(admin.patch("clusterrolebindings", "all-view", {"roleRef": {"name": "edit"}}, raw=True), 422)
        assert "cannot change roleRef" in err.message
        names = {b["metadata"]["name"] for b in (await admin.list("rolebindings", "team", raw=True)).items}
        assert names == {"leads-admin", "devs-edit"}
        assert {r["metadata"]["name"] for r in (await admin.list("roles", "team", raw=True)).items} == {"reader"}


def test_remembered_attributes_tell_users_groups_methods_and_queries_apart():
    """The server remembers what each request asks; a remembered answer must never be another's."""
    from corral.server.authz import RememberedAttributes

    remembered, parsed = RememberedAttributes(limit=4), []
    pods = "/api/v1/namespaces/default/pods"

    def query():
        parsed.append(1)
        return {"watch": "true"}

    watch = remembered("ann", ("dev",), "GET", pods, "watch=true", query)
    assert (watch.user, watch.groups, watch.verb, watch.resource, watch.namespace) == \
        ("ann", ("dev",), "watch", "pods", "default")
    assert remembered("ann", ("dev",), "GET", pods, "watch=true", query) is watch and parsed == [1]
    assert remembered("bob", ("dev",), "GET", pods, "watch=true", query).user == "bob"
    assert remembered("ann", ("ops",), "GET", pods, "watch=true", query).groups == ("ops",)
    assert remembered("ann", ("dev",), "GET", pods, "", query).verb == "list"
    assert remembered("ann", ("dev",), "DELETE", pods, "", query).verb == "deletecollection"
    assert remembered("ann", ("dev",), "GET", pods + "/web", "", query).name == "web"
    assert len(remembered._known) <= 4  # bounded: it started over
