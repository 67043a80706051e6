"""The REST verbs' rules, through HTTP against a server in the test's event loop: what create,
update, patch, delete, bind and evict keep, change, refuse and answer."""

from __future__ import annotations

import asyncio
import datetime
import json

import pytest

from corral.api.resources import by_kind
from corral.client import AlreadyExists, Client, Conflict, Invalid, NotFound
from corral.client.rest import ApiError
from corral.server.rest import WriteOptions


def pod(name: str, node: str | None = None, **meta) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta}, "spec": spec}


async def names(c: Client, namespace: str | None = "default", **selectors) -> list[str]:
    return [p["metadata"]["name"] for p in (await c.list("pods", namespace, raw=True, **selectors)).items]


async def failure(call) -> ApiError:
    with pytest.raises(ApiError) as err:
        await call
    return err.value


# --- create -----------------------------------------------------------------------------------------------

async def test_create_fills_in_the_namespace_and_refuses_a_mismatch_a_missing_namespace_and_a_duplicate(c):
    created = await c.create(pod("a"), "default", raw=True)
    assert created["metadata"]["namespace"] == "default" and created["metadata"]["uid"]
    assert created["spec"]["priority"] == 0 and created["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    err = await failure(c.request("POST", "/api/v1/namespaces/default/pods", body=pod("b", namespace="other")))
    assert (err.code, err.message) == (400, "the namespace of the provided object does not match the namespace "
                                            "sent on the request")
    err = await failure(c.create({**pod("Bad_Name"), "spec": {"containers": []}}, "default"))
    assert err.message.startswith('Pod "Bad_Name" is invalid: ') and err.status["details"]["name"] == "Bad_Name"
    err = await failure(c.create(pod("c"), "nowhere"))
    assert err.code == 404 and err.status["details"]["kind"] == "namespaces" and "nowhere" in err.message
    with pytest.raises(AlreadyExists):
        await c.create(pod("a"), "default")
    err = await failure(c.create({**pod("d"), "apiVersion": "apps/v1"}, "default"))
    assert err.code == 400 and 'the apiVersion of the body ("apps/v1") does not match v1' == err.message
    assert await names(c) == ["a"]


async def test_a_pod_posted_without_a_namespace_in_url_or_body_lands_in_default(c):
    created = json.loads(await c.request("POST", "/api/v1/pods", body=pod("nowhere-said")))
    assert created["metadata"]["namespace"] == "default"
    assert await names(c) == ["nowhere-said"]


async def test_a_dry_run_create_answers_the_object_and_stores_nothing(c):
    answered = json.loads(await c.request("POST", "/api/v1/namespaces/default/pods", params={"dryRun": "All"},
                                        body=pod("dry")))
    assert answered["metadata"]["name"] == "dry" and answered["metadata"]["namespace"] == "default"
    assert answered["spec"]["priority"] == 0
    assert await names(c) == []


async def test_a_null_field_is_a_field_left_out_and_gets_its_default(c):
    """As Kubernetes reads a JSON null (a manifest template rendered with nothing): never stored,
    defaulted where a default exists, on create and on update alike."""
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "web", "labels": None},
                  "spec": {"replicas": None, "minReadySeconds": None, "selector": {"matchLabels": {"app": "web"}},
                           "strategy": None,
                           "template": {"metadata": {"labels": {"app": "web"}},
                                        "spec": {"nodeSelector": None, "containers": [{"name": "c", "image": "busybox",
                                                                                        "args": None}]}}}}
    created = await c.create(deployment, "default", raw=True)
    assert "null" not in json.dumps(created)
    assert created["spec"]["replicas"] == 1 and created["spec"]["minReadySeconds"] == 0
    assert created["spec"]["strategy"]["type"] == "RollingUpdate" and "labels" not in created["metadata"]
    for _ in range(5):  # the deployment controller may write the object meanwhile: read it again, as clients do
        current = await c.get("deployments", "web", "default", raw=True)
        current["spec"]["replicas"] = None
        current["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
        try:
            updated = await c.update(current, raw=True)
            break
        except Conflict:
            continue
    assert updated["spec"]["replicas"] == 1 and "null" not in json.dumps(updated)
    stored = await c.get("deployments", "web", "default", raw=True)
    assert stored["spec"]["replicas"] == 1 and "args" not in stored["spec"]["template"]["spec"]["containers"][0]


async def test_the_global_default_priority_class_applies_to_pods_that_name_none(c):
    await c.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"},
                    "value": 5})
    await c.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "polite"},
                    "value": 50, "preemptionPolicy": "Never"})
    await c.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "usual"},
                    "value": 100, "globalDefault": True, "preemptionPolicy": "Never"})
    spec = (await c.create(pod("plain"), "default", raw=True))["spec"]
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == ("usual", 100, "Never")
    named = pod("named")
    named["spec"]["priorityClassName"] = "low"
    spec = (await c.create(named, "default", raw=True))["spec"]
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == (
        "low", 5, "PreemptLowerPriority")
    named["metadata"]["name"], named["spec"]["priorityClassName"] = "named-polite", "polite"
    spec = (await c.create(named, "default", raw=True))["spec"]
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == ("polite", 50, "Never")
    forged = pod("forged")
    forged["spec"]["priority"] = 7
    err = await failure(c.create(forged, "default"))
    assert (err.code, err.message) == (403, 'pods "forged" is forbidden: the integer value of priority (7) must not '
                                            "be provided in pod spec; priority admission controller computed 100 "
                                            "from the given PriorityClass name")
    agreed = pod("agreed")
    agreed["spec"]["priority"] = 100
    assert (await c.create(agreed, "default", raw=True))["spec"]["priority"] == 100


# --- update -----------------------------------------------------------------------------------------------

async def test_an_update_keeps_what_the_server_owns_and_counts_spec_changes_in_generation(c):
    created = await c.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                              "spec": {}, "status": {"capacity": {"cpu": "2"}}}, raw=True)
    meta = created["metadata"]
    assert meta["generation"] == 1
    forged = {"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": "n1", "uid": "forged", "creationTimestamp": "2000-01-01T00:00:00Z",
                           "generation": 40, "labels": {"x": "1"}},
              "spec": {"unschedulable": True}, "status": {"capacity": {"cpu": "64"}}}
    updated = await c.update(forged, raw=True)
    assert updated["metadata"]["uid"] == meta["uid"]
    assert updated["metadata"]["creationTimestamp"] == meta["creationTimestamp"]
    assert updated["metadata"]["generation"] == 2 and updated["metadata"]["labels"] == {"x": "1"}
    assert updated["status"] == created["status"]  # status changes only through /status
    relabelled = await c.update({**updated, "metadata": {**updated["metadata"], "labels": {"x": "2"}}}, raw=True)
    assert relabelled["metadata"]["generation"] == 2  # metadata alone is no new generation


async def test_an_update_refuses_another_name_namespace_or_a_malformed_resource_version(c):
    created = await c.create(pod("u"), "default", raw=True)
    path = "/api/v1/namespaces/default/pods/u"
    err = await failure(c.request("PUT", path, body={**created, "metadata": {**created["metadata"], "name": "v"}}))
    assert err.code == 400 and err.message == "the name of the object (v) does not match the name on the URL (u)"
    err = await failure(c.request("PUT", path, body={**created, "metadata": {**created["metadata"],
                                                                              "namespace": "kube-system"}}))
    assert err.code == 400
    assert err.message == "the namespace of the provided object does not match the namespace sent on the request"
    err = await failure(c.request("PUT", path, body={**created, "metadata": {**created["metadata"],
                                                                              "resourceVersion": "x1"}}))
    assert err.code == 400 and err.message == "invalid resourceVersion 'x1'"
    await c.patch("pods", "u", {"metadata": {"labels": {"moved": "on"}}}, "default")
    with pytest.raises(Conflict):
        await c.update({**created, "metadata": {**created["metadata"], "labels": {"mine": "1"}}})
    assert (await c.get("pods", "u", "default", raw=True))["metadata"]["labels"] == {"moved": "on"}


async def test_an_update_without_a_resource_version_applies_to_the_newest(c):
    created = await c.create(pod("newest"), "default", raw=True)
    await c.patch("pods", "newest", {"metadata": {"labels": {"first": "1"}}}, "default")
    unpinned = {**created, "metadata": {k: v for k, v in created["metadata"].items() if k != "resourceVersion"}}
    unpinned["metadata"]["labels"] = {"second": "2"}
    updated = await c.update(unpinned, raw=True)
    assert updated["metadata"]["labels"] == {"second": "2"}


async def test_a_pod_may_change_its_images_deadline_tolerations_and_grace_period_only(c):
    await c.create(pod("mut"), "default")
    allowed = {"spec": {"containers": [{"name": "c", "image": "busybox:2"}], "activeDeadlineSeconds": 60,
                        "tolerations": [{"key": "k", "operator": "Exists"}], "terminationGracePeriodSeconds": 5}}
    spec = (await c.patch("pods", "mut", allowed, "default", raw=True))["spec"]
    assert spec["containers"][0]["image"] == "busybox:2" and spec["activeDeadlineSeconds"] == 60
    assert spec["terminationGracePeriodSeconds"] == 5
    for change in ({"containers": [{"name": "c", "image": "busybox", "command": ["sh"]}]},
                   {"initContainers": [{"name": "i", "image": "busybox"}]}, {"nodeSelector": {"a": "b"}}):
        with pytest.raises(Invalid) as err:
            await c.patch("pods", "mut", {"spec": change}, "default")
        assert err.value.causes[0]["field"] == "spec" and "may not change fields" in err.value.causes[0]["message"]


async def test_a_pod_reported_terminated_after_its_deletion_began_is_removed(c):
    await c.create(pod("bye", node="n1"), "default")
    await c.delete("pods", "bye", "default")
    terminating = await c.get("pods", "bye", "default", raw=True)
    assert terminating["status"]["phase"] == "Terminating"
    await c.update_status({**terminating, "status": {"phase": "Terminated"}}, raw=True)
    with pytest.raises(NotFound):
        await c.get("pods", "bye", "default")


async def test_terminated_without_a_deletion_is_just_a_status(c):
    created = await c.create(pod("stays", node="n1"), "default", raw=True)
    await c.update_status({**created, "status": {"phase": "Terminated"}}, raw=True)
    assert (await c.get("pods", "stays", "default", raw=True))["status"]["phase"] == "Terminated"


async def test_a_status_update_without_status_clears_it_and_keeps_the_rest(c):
    created = await c.create(pod("st", labels={"keep": "me"}), "default", raw=True)
    await c.patch("pods", "st", {"status": {"phase": "Running"}}, "default", subresource="status")
    body = {k: v for k, v in created.items() if k != "status"}
    body["metadata"] = {k: v for k, v in created["metadata"].items() if k != "resourceVersion"}
    body["metadata"]["labels"] = {"changed": "no"}
    cleared = await c.update(body, subresource="status", raw=True)
    assert "status" not in cleared and cleared["metadata"]["labels"] == {"keep": "me"}


async def test_a_bound_pod_whose_status_was_cleared_is_still_deleted_gracefully(c):
    created = await c.create(pod("bare", node="n1"), "default", raw=True)
    body = {k: v for k, v in created.items() if k != "status"}
    assert "status" not in await c.update(body, subresource="status", raw=True)
    deleting = await c.delete("pods", "bare", "default", raw=True)
    assert deleting["status"] == {"phase": "Terminating"} and deleting["metadata"]["deletionGracePeriodSeconds"] == 30


# --- patch ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("patch, patch_type, code, message", [
    pytest.param([{"op": "remove", "path": "/metadata/nothing"}], "json", 422, "the patch could not be applied",
                 id="a JSON patch that cannot apply is invalid"),
    pytest.param(["not", "an", "object"], "merge", 422,
                 "the patch could not be applied: a merge patch must be a JSON object",
                 id="a merge patch that is no object is invalid"),
    pytest.param([{"op": "replace", "path": "", "value": [1]}], "json", 400, "the patched object is not a JSON object",
                 id="a patch may not turn the object into a list"),
    pytest.param({"kind": "Node"}, "merge", 400, 'the kind of the body ("Node") does not match',
                 id="a patch may not change the kind"),
])
async def test_a_patch_that_cannot_apply_is_refused_and_changes_nothing(c, patch, patch_type, code, message):
    created = await c.create(pod("pt"), "default", raw=True)
    err = await failure(c.patch("pods", "pt", patch, "default", patch_type=patch_type))
    assert err.code == code and err.message.startswith(message)
    assert err.reason == ("Invalid" if code == 422 else "BadRequest")
    assert (await c.get("pods", "pt", "default", raw=True)) == created


# --- delete -----------------------------------------------------------------------------------------------

def _stamp(value: str) -> float:
    return datetime.datetime.fromisoformat(value).timestamp()


async def test_a_bound_pod_is_deleted_gracefully_sooner_when_asked_again_with_less_time_and_an_unbound_or_zero_grace_one_at_once(c):
    await c.create(pod("free"), "default")
    gone = await c.delete("pods", "free", "default", raw=True)
    assert gone["metadata"]["name"] == "free"
    await c.create({**pod("slow", node="n1"), "spec": {**pod("slow")["spec"], "nodeName": "n1",
                                                        "terminationGracePeriodSeconds": 45}}, "default")
    first = await c.delete("pods", "slow", "default", raw=True)
    assert first["status"]["phase"] == "Terminating" and first["metadata"]["deletionGracePeriodSeconds"] == 45
    assert await c.delete("pods", "slow", "default", grace_period_seconds=60, raw=True) == first  # on its way
    again = await c.delete("pods", "slow", "default", grace_period_seconds=3, raw=True)
    asked = _stamp(first["metadata"]["deletionTimestamp"]) - 45  # as Kubernetes: from when it was first asked
    assert again["metadata"]["deletionGracePeriodSeconds"] == 3 and again["status"]["phase"] == "Terminating"
    assert _stamp(again["metadata"]["deletionTimestamp"]) == asked + 3
    assert await c.delete("pods", "slow", "default", grace_period_seconds=3, raw=True) == again
    await c.create(pod("quick", node="n1"), "default")
    short = await c.delete("pods", "quick", "default", grace_period_seconds=2, raw=True)
    assert short["metadata"]["deletionGracePeriodSeconds"] == 2
    await c.create(pod("now", node="n1"), "default")
    await c.delete("pods", "now", "default", grace_period_seconds=0)
    assert await names(c) == ["quick", "slow"]
    # Its own terminationGracePeriodSeconds: 0 deletes a bound pod at once too ("delete immediately").
    await c.create({**pod("zero", node="n1"), "spec": {**pod("zero")["spec"], "nodeName": "n1",
                                                        "terminationGracePeriodSeconds": 0}}, "default")
    await c.delete("pods", "zero", "default")
    assert await names(c) == ["quick", "slow"]
    # A propagation policy changes nothing for a bound pod: it still stops gracefully, no finalizer.
    await c.create(pod("orphaning", node="n1"), "default")
    orphaning = json.loads(await c.request("DELETE", "/api/v1/namespaces/default/pods/orphaning",
                                           params={"propagationPolicy": "Orphan"}))
    assert orphaning["metadata"]["deletionGracePeriodSeconds"] == 30 and not orphaning["metadata"].get("finalizers")


async def test_a_bound_pod_whose_last_finalizer_goes_waits_for_its_agent_and_goes_once_terminated(c):
    """A pod on a node is finished by its agent: removing its finalizers while it stops does not
    delete it under the agent's feet; its Terminated report does."""
    await c.create({**pod("kept", node="n1"), "metadata": {"name": "kept", "finalizers": ["example.com/keep"]},
                    "spec": {**pod("kept")["spec"], "nodeName": "n1"}}, "default")
    await c.delete("pods", "kept", "default")
    stopping = await c.patch("pods", "kept", {"metadata": {"finalizers": None}}, "default", raw=True)
    assert stopping["metadata"]["deletionTimestamp"] and not stopping["metadata"].get("finalizers")
    assert (await c.get("pods", "kept", "default", raw=True))["status"]["phase"] == "Terminating"
    await c.patch("pods", "kept", {"status": {"phase": "Terminated"}}, "default", subresource="status")
    assert "kept" not in await names(c)


async def test_finalizers_keep_a_deleted_pod_bound_or_not_until_the_last_goes(c):
    """Kubernetes keeps every object with a finalizer, a pod included: an unbound pod is marked and
    goes with its last finalizer; a bound pod stops, and stays Terminated until then."""
    keep = {"finalizers": ["example.com/keep"]}
    await c.create(pod("free", **keep), "default")
    marked = await c.delete("pods", "free", "default", raw=True)
    assert marked["metadata"]["deletionTimestamp"] and marked["metadata"]["finalizers"] == ["example.com/keep"]
    assert "free" in await names(c)
    await c.patch("pods", "free", {"metadata": {"finalizers": None}}, "default")
    assert "free" not in await names(c)

    await c.create(pod("bound", node="n1", **keep), "default")
    await c.delete("pods", "bound", "default")
    done = await c.patch("pods", "bound", {"status": {"phase": "Terminated"}}, "default", subresource="status",
                         raw=True)
    assert done["status"]["phase"] == "Terminated" and done["metadata"]["finalizers"] == ["example.com/keep"]
    assert (await c.get("pods", "bound", "default", raw=True))["status"]["phase"] == "Terminated"
    await c.patch("pods", "bound", {"metadata": {"finalizers": None}}, "default")
    assert "bound" not in await names(c)


async def test_a_force_deleted_bound_pod_with_a_finalizer_goes_with_it_without_waiting_for_its_agent(c):
    """Grace 0 on a pod held by a finalizer marks it with grace 0, even one already given time; the
    last finalizer's removal then deletes it, though no agent reported it Terminated (its node may be gone)."""
    await c.create(pod("held", node="n1", finalizers=["example.com/keep"]), "default")
    slow = await c.delete("pods", "held", "default", raw=True)
    assert slow["metadata"]["deletionGracePeriodSeconds"] == 30
    forced = await c.delete("pods", "held", "default", grace_period_seconds=0, raw=True)
    assert forced["metadata"]["deletionGracePeriodSeconds"] == 0 and forced["status"]["phase"] == "Terminating"
    assert forced["metadata"]["deletionTimestamp"] <= datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    assert await c.delete("pods", "held", "default", grace_period_seconds=0, raw=True) == forced
    await c.patch("pods", "held", {"metadata": {"finalizers": None}}, "default")
    assert "held" not in await names(c)
    # One its agent already reported Terminated stays so.
    await c.create(pod("done", node="n1", finalizers=["example.com/keep"]), "default")
    await c.delete("pods", "done", "default")
    await c.patch("pods", "done", {"status": {"phase": "Terminated"}}, "default", subresource="status")
    forced = await c.delete("pods", "done", "default", grace_period_seconds=0, raw=True)
    assert forced["status"]["phase"] == "Terminated" and forced["metadata"]["deletionGracePeriodSeconds"] == 0


async def test_taking_the_last_finalizer_off_while_another_write_lands_is_retried_not_refused(server, c, monkeypatch):
    """A controller writing the object between the patch's read and its delete (the garbage
    collector taking its own finalizer off, say) is a conflict the server retries, as it does for any
    patch without a resourceVersion: the client's patch goes through."""
    await c.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "raced", "finalizers": [
        "example.com/keep"]}}, "default")
    await c.delete("configmaps", "raced", "default")
    real, calls = server.store.delete, []

    async def a_write_lands_first(key, expected=None, **kwargs):
        calls.append(expected)
        if len(calls) == 1:
            current = await server.store.get(key)
            await server.store.update(key, {**current.obj, "data": {"touched": "yes"}}, current.revision)
        return await real(key, expected, **kwargs)

    monkeypatch.setattr(server.store, "delete", a_write_lands_first)
    await c.patch("configmaps", "raced", {"metadata": {"finalizers": None}}, "default")
    assert len(calls) == 2 and "raced" not in [m["metadata"]["name"] for m in (
        await c.list("configmaps", "default", raw=True)).items]


async def test_taking_the_last_finalizer_off_an_object_deleted_meanwhile_answers_404_naming_it(server, c, monkeypatch):
    await c.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gone", "finalizers": [
        "example.com/keep"]}}, "default")
    await c.delete("configmaps", "gone", "default")
    real = server.store.delete

    async def deleted_first(key, expected=None, **kwargs):
        await real(key)  # another server's request (a force delete) got there first
        return await real(key, expected, **kwargs)

    monkeypatch.setattr(server.store, "delete", deleted_first)
    err = await failure(c.patch("configmaps", "gone", {"metadata": {"finalizers": None}}, "default"))
    assert (err.code, err.message) == (404, 'configmaps "gone" not found')
    assert err.status["details"] == {"name": "gone", "kind": "configmaps"}


async def test_updates_a_kind_forbids_are_refused_with_kubernetes_status_naming_the_object_and_field(c):
    await c.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fixed"}, "data": {"a": "1"},
                    "immutable": True}, "default")
    err = await failure(c.patch("configmaps", "fixed", {"data": {"a": "2"}}, "default"))
    assert (err.code, err.status["message"]) == (422, 'ConfigMap "fixed" is invalid: data: Forbidden: field is '
                                                      "immutable when `immutable` is set")
    assert err.status["details"] == {"name": "fixed", "kind": "ConfigMap", "causes": [{
        "reason": "FieldValueForbidden", "message": "Forbidden: field is immutable when `immutable` is set",
        "field": "data"}]}
    await c.create({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sel"}, "spec": {
        "selector": {"matchLabels": {"app": "sel"}}, "template": {"metadata": {"labels": {"app": "sel", "v": "1"}},
                                                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}},
                   "default")
    err = await failure(c.patch("deployments", "sel", {"spec": {"selector": {"matchLabels": {"app": "sel", "v": "1"}}}},
                                "default"))
    assert (err.code, err.status["message"]) == (422, 'Deployment "sel" is invalid: spec.selector: Invalid value: '
                                                      "field is immutable")
    assert err.status["details"] == {"name": "sel", "group": "apps", "kind": "Deployment", "causes": [{
        "reason": "FieldValueInvalid", "message": "Invalid value: field is immutable", "field": "spec.selector"}]}
    await c.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"}]}, "default")
    err = await failure(c.patch("rolebindings", "rb", {"roleRef": {"name": "edit"}}, "default"))
    assert err.code == 422 and err.status["details"] == {
        "name": "rb", "group": "rbac.authorization.k8s.io", "kind": "RoleBinding", "causes": [{
            "reason": "FieldValueInvalid", "field": "roleRef",
            "message": "Invalid value: cannot change roleRef (delete the binding and create a new one)"}]}


async def test_an_update_cannot_set_the_generation_the_server_counts(c):
    created = await c.create({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gen"},
                              "spec": {"selector": {"matchLabels": {"app": "gen"}}, "template": {
                                  "metadata": {"labels": {"app": "gen"}},
                                  "spec": {"containers": [{"name": "c", "image": "img"}]}}}}, "default", raw=True)
    assert created["metadata"]["generation"] == 1
    updated = await c.patch("deployments", "gen", {"metadata": {"generation": 50, "labels": {"x": "1"}}}, "default",
                            raw=True)
    assert updated["metadata"]["generation"] == 1 and updated["metadata"]["labels"] == {"x": "1"}


async def test_a_dry_run_delete_answers_the_object_and_deletes_nothing(c):
    await c.create(pod("kept"), "default")
    answered = json.loads(await c.request("DELETE", "/api/v1/namespaces/default/pods/kept", params={"dryRun": "All"}))
    assert answered["metadata"]["name"] == "kept"
    assert await names(c) == ["kept"]
    err = await failure(c.delete("pods", "absent", "default"))
    assert err.code == 404


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public", "kube-node-lease"])
async def test_the_system_namespaces_cannot_be_deleted(c, name):
    err = await failure(c.delete("namespaces", name))
    assert err.code == 403 and err.message.endswith("this namespace may not be deleted")
    assert (await c.get("namespaces", name, raw=True))["metadata"]["name"] == name


async def test_deleting_a_collection_deletes_only_what_the_selectors_pick_in_that_namespace(c):
    await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    for name, labels in (("a", {"tier": "web"}), ("b", {"tier": "db"}), ("c", {"tier": "web"})):
        await c.create(pod(name, labels=labels), "default")
    await c.create(pod("elsewhere", labels={"tier": "web"}), "other")
    await c.create(pod("bound", node="n1", labels={"tier": "web"}), "default")
    deleted = json.loads(await c.request("DELETE", "/api/v1/namespaces/default/pods",
                                       params={"labelSelector": "tier=web", "fieldSelector": "metadata.name!=c"}))
    assert deleted["kind"] == "PodList"
    assert sorted(p["metadata"]["name"] for p in deleted["items"]) == ["a", "bound"]
    assert await names(c) == ["b", "bound", "c"]  # the bound pod is terminating, not gone
    assert await names(c, "other") == ["elsewhere"]


# --- lists ------------------------------------------------------------------------------------------------

async def test_lists_select_by_name_labels_fields_and_namespace(c):
    await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    await c.create(pod("x", labels={"app": "a"}), "default")
    await c.create(pod("y", node="n1", labels={"app": "b"}), "default")
    await c.create(pod("x", labels={"app": "a"}), "team")
    assert await names(c) == ["x", "y"]
    assert await names(c, None) == ["x", "y", "x"]  # default/x, default/y, team/x: by key
    assert await names(c, "team") == ["x"]
    assert await names(c, field_selector="metadata.name=y") == ["y"]
    assert await names(c, label_selector="app=a") == ["x"]
    assert await names(c, label_selector="app=b") == ["y"]  # after one that does not match
    assert await names(c, field_selector="spec.nodeName=n1") == ["y"]
    for path, kind, version in (("/api/v1/namespaces/default/pods", "PodList", "v1"),
                                ("/apis/apps/v1/deployments", "DeploymentList", "apps/v1")):
        listed = json.loads(await c.request("GET", path))
        assert (listed["kind"], listed["apiVersion"]) == (kind, version) and "continue" not in listed["metadata"]
    assert await names(c, None, field_selector="metadata.name=x", label_selector="app=a") == ["x", "x"]
    assert await names(c, None, label_selector="app=a", limit=1) == ["x"]
    paged = await c.list("pods", None, field_selector="spec.nodeName=n1", limit=5, raw=True)
    assert [p["metadata"]["name"] for p in paged.items] == ["y"] and not paged.continue_token


async def test_a_page_ends_exactly_at_its_limit_with_a_token_only_if_more_remain(c):
    for i in range(4):
        await c.create(pod(f"q{i}"), "default")
    page = await c.list("pods", "default", limit=2, raw=True)
    assert [p["metadata"]["name"] for p in page.items] == ["q0", "q1"] and page.continue_token
    rest = await c.list("pods", "default", limit=2, continue_token=page.continue_token, raw=True)
    assert [p["metadata"]["name"] for p in rest.items] == ["q2", "q3"] and not rest.continue_token
    assert rest.resource_version == page.resource_version
    whole = await c.list("pods", "default", limit=4, raw=True)
    assert len(whole.items) == 4 and not whole.continue_token


@pytest.mark.parametrize("token", ["not base64 !", "bm90IGpzb24=", "eyJydiI6IDF9",
                                   "eyJydiI6IDEsICJzdGFydCI6ICIvcmVnaXN0cnkvbm9kZXMvbjEifQ==",
                                   "eyJydiI6IDk5OTk5OSwgInN0YXJ0IjogIi9jb3JlL3BvZHMvZGVmYXVsdC9xMCIsICJzaWciOiAiMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAifQ==", "x" * 5000])
async def test_a_malformed_or_forged_continue_token_is_a_bad_request(c, token):
    # not base64; not JSON; no start; a start outside the listed collection (nodes, for pods); a
    # well-formed token for a revision the server never gave out (its signature does not hold); too long
    await c.create(pod("q0"), "default")
    err = await failure(c.list("pods", "default", limit=2, continue_token=token))
    assert err.code == 400 and err.message == "invalid continue token: not one this cluster gave out for this list"


async def test_a_continue_token_whose_position_or_revision_was_changed_is_a_bad_request(c):
    """Its signature covers both: a client cannot skip ahead, go back, or pick another revision."""
    import base64

    for i in range(3):
        await c.create(pod(f"q{i}"), "default")
    page = await c.list("pods", "default", limit=1, raw=True)
    token = json.loads(base64.urlsafe_b64decode(page.continue_token))
    for changed in ({**token, "start": token["start"][:-1] + "1"}, {**token, "rv": token["rv"] - 1}):
        forged = base64.urlsafe_b64encode(json.dumps(changed).encode()).decode()
        err = await failure(c.list("pods", "default", limit=1, continue_token=forged))
        assert err.code == 400 and err.message == "invalid continue token: not one this cluster gave out for this list"
    rest = await c.list("pods", "default", limit=1, continue_token=page.continue_token, raw=True)
    assert [p["metadata"]["name"] for p in rest.items] == ["q1"]


# --- bind and evict ---------------------------------------------------------------------------------------

async def test_binding_assigns_once_and_never_a_pod_being_deleted(c):
    await c.create(pod("b1"), "default")
    await c.bind("default", "b1", "n1")
    bound = await c.get("pods", "b1", "default", raw=True)
    assert bound["spec"]["nodeName"] == "n1" and bound["status"]["phase"] == "Scheduled"
    assert [(x["type"], x["status"]) for x in bound["status"]["conditions"]] == [("PodScheduled", "True")]
    with pytest.raises(Conflict) as err:
        await c.bind("default", "b1", "n2")
    assert err.value.message.endswith('pod b1 is already assigned to node "n1"')
    err = await failure(c.request("POST", "/api/v1/namespaces/default/pods/b1/binding", body={
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "other"}, "target": {"name": "n2"}}))
    assert err.code == 400 and err.message == "the name of the binding (other) does not match the pod (b1)"
    with pytest.raises(NotFound):
        await c.bind("default", "absent", "n1")
    await c.create(pod("b3"), "default")  # a binding with no name of its own takes the pod's
    await c.request("POST", "/api/v1/namespaces/default/pods/b3/binding", body={
        "apiVersion": "v1", "kind": "Binding", "target": {"name": "n1"}})
    assert (await c.get("pods", "b3", "default", raw=True))["spec"]["nodeName"] == "n1"
    err = await failure(c.request("POST", "/api/v1/namespaces/default/pods/Not_A_Name/binding", body={
        "apiVersion": "v1", "kind": "Binding", "target": {"name": "n1"}}))  # the name it takes is checked
    assert err.code == 422 and [x["field"] for x in err.status["details"]["causes"]] == ["metadata.name"]


async def test_a_binding_posted_to_the_collection_names_its_pod_and_a_dry_run_binds_nothing(c):
    await c.create(pod("b2"), "default")
    err = await failure(c.request("POST", "/api/v1/namespaces/default/bindings", body={
        "apiVersion": "v1", "kind": "Binding", "metadata": {}, "target": {"name": "n1"}}))
    assert err.code == 422 and err.status["details"]["causes"][0]["field"] == "metadata.name"
    await c.request("POST", "/api/v1/namespaces/default/pods/b2/binding", params={"dryRun": "All"}, body={
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "b2"}, "target": {"name": "n1"}})
    assert "nodeName" not in (await c.get("pods", "b2", "default", raw=True))["spec"]
    await c.request("POST", "/api/v1/namespaces/default/bindings", body={
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "b2"}, "target": {"name": "n1"}})
    assert (await c.get("pods", "b2", "default", raw=True))["spec"]["nodeName"] == "n1"


async def test_eviction_returns_a_bound_pod_to_pending_and_leaves_others_alone(server, c):
    created = await c.create(pod("ev", node="n1"), "default", raw=True)
    await c.patch("pods", "ev", {"status": {"phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.1.0.1",
                                            "startTime": "2026-01-01T00:00:00Z",
                                            "containerStatuses": [{"name": "c", "ready": True}]}},
                  "default", subresource="status")
    reply = await server.api.evict("default", "ev", "NodeLost", "the node stopped answering")
    assert reply.code == 201
    moved = await c.get("pods", "ev", "default", raw=True)
    assert "nodeName" not in moved["spec"]
    status = moved["status"]
    assert status["phase"] == "Pending" and status["reason"] == "NodeLost"
    assert status["message"] == "the node stopped answering (was on node n1)"
    assert not {"hostIP", "podIP", "startTime", "containerStatuses"} & status.keys()
    assert [(x["type"], x["status"], x["reason"]) for x in status["conditions"]] == [
        ("PodScheduled", "False", "NodeLost")]
    again = await server.api.evict("default", "ev", "NodeLost", "twice")
    assert again.code == 200 and json.loads(again.body)["status"]["message"].startswith("the node stopped")
    assert created["metadata"]["uid"] == moved["metadata"]["uid"]


# --- answers, exactly -------------------------------------------------------------------------------------

async def send(http, method: str, path: str, body=None, content_type: str = "application/json",
               **params) -> tuple[int, dict]:
    """(HTTP status, decoded body) of one request."""
    data = None if body is None else json.dumps(body)
    async with http.request(method, path, data=data, params=params,
                            headers={"Content-Type": content_type}) as r:
        return r.status, await r.json()


def status_of(code: int, reason: str, message: str, kind: str | None = None, name: str | None = None) -> dict:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}
    if kind:
        body["details"] = {"name": name, "kind": kind}
    return body


PODS = "/api/v1/namespaces/default/pods"


async def test_each_verb_answers_with_kubernetes_status_codes(http):
    assert (await send(http, "POST", PODS, pod("s")))[0] == 201
    assert (await send(http, "POST", PODS, pod("dry"), dryRun="All"))[0] == 201
    code, got = await send(http, "GET", f"{PODS}/s")
    assert code == 200
    code, current = await send(http, "PUT", f"{PODS}/s", {**got, "metadata": {**got["metadata"], "labels": {"a": "1"}}})
    assert code == 200 and current["metadata"]["labels"] == {"a": "1"}
    assert (await send(http, "PUT", f"{PODS}/s", current))[0] == 200  # unchanged
    assert (await send(http, "PUT", f"{PODS}/s", {**current, "metadata": {**current["metadata"], "labels": {}}},
                       dryRun="All"))[0] == 200
    assert (await send(http, "PATCH", f"{PODS}/s", {"metadata": {"labels": {"b": "2"}}},
                       "application/merge-patch+json"))[0] == 200
    code, bound = await send(http, "POST", f"{PODS}/s/binding", {"apiVersion": "v1", "kind": "Binding",
                                                                  "metadata": {"name": "s"}, "target": {"name": "n1"}})
    assert (code, bound) == (201, {"kind": "Binding", "apiVersion": "v1",
                                   "metadata": {"name": "s", "namespace": "default"},
                                   "target": {"kind": "Node", "apiVersion": "v1", "name": "n1"}})
    assert (await send(http, "DELETE", f"{PODS}/s", dryRun="All"))[0] == 200
    code, terminating = await send(http, "DELETE", f"{PODS}/s")
    assert code == 200 and terminating["status"]["phase"] == "Terminating"
    assert (await send(http, "DELETE", f"{PODS}/s"))[0] == 200  # already terminating
    assert (await send(http, "POST", PODS, pod("t")))[0] == 201
    assert (await send(http, "DELETE", PODS, fieldSelector="metadata.name=t"))[0] == 200
    assert (await send(http, "POST", PODS, pod("u")))[0] == 201
    assert (await send(http, "DELETE", f"{PODS}/u"))[0] == 200  # an unbound pod: deleted at once
    code, body = await send(http, "GET", PODS, limit="1")
    assert code == 200 and [p["metadata"]["name"] for p in body["items"]] == ["s"]


async def test_refusals_carry_the_full_status_with_the_objects_kind_and_name(http):
    await send(http, "POST", PODS, pod("r"))
    _, created = await send(http, "GET", f"{PODS}/r")
    stale = {**created, "metadata": {**created["metadata"], "labels": {"x": "1"}}}
    await send(http, "PATCH", f"{PODS}/r", {"metadata": {"labels": {"y": "1"}}}, "application/merge-patch+json")
    assert await send(http, "PUT", f"{PODS}/r", stale) == (409, status_of(
        409, "Conflict", 'Operation cannot be fulfilled on pods "r": the object has been modified; please apply '
        "your changes to the latest version and try again", "pods", "r"))
    rv = created["metadata"]["resourceVersion"]
    assert await send(http, "DELETE", f"{PODS}/r", {"preconditions": {"resourceVersion": rv}}) == (409, status_of(
        409, "Conflict", 'Operation cannot be fulfilled on pods "r": the resourceVersion in the precondition does '
        "not match the object", "pods", "r"))
    assert await send(http, "DELETE", f"{PODS}/r", {"preconditions": {"resourceVersion": "not-a-number"}}) == (
        409, status_of(409, "Conflict", 'Operation cannot be fulfilled on pods "r": the resourceVersion in the '
                       "precondition does not match the object", "pods", "r"))
    assert await send(http, "DELETE", f"{PODS}/r", {"preconditions": {"uid": "other"}}) == (409, status_of(
        409, "Conflict", 'Operation cannot be fulfilled on pods "r": the UID in the precondition does not match '
        "the object", "pods", "r"))
    assert await send(http, "DELETE", "/api/v1/namespaces/default") == (403, status_of(
        403, "Forbidden", 'namespaces "default" is forbidden: this namespace may not be deleted', "namespaces",
        "default"))
    assert await send(http, "DELETE", f"{PODS}/absent") == (404, status_of(
        404, "NotFound", 'pods "absent" not found', "pods", "absent"))
    assert await send(http, "PATCH", f"{PODS}/absent", {}, "application/merge-patch+json") == (404, status_of(
        404, "NotFound", 'pods "absent" not found', "pods", "absent"))
    await send(http, "POST", f"{PODS}/r/binding", {"metadata": {"name": "r"}, "target": {"name": "n1"}})
    assert await send(http, "POST", f"{PODS}/r/binding", {"metadata": {"name": "r"}, "target": {"name": "n2"}}) == (
        409, status_of(409, "Conflict", 'Operation cannot be fulfilled on pods "r": pod r is already assigned to '
                       'node "n1"', "pods", "r"))
    code, invalid = await send(http, "POST", f"{PODS}/r/binding", {"metadata": {"name": "r"}, "target": {}})
    assert code == 422 and invalid["details"]["name"] == "r" and invalid["details"]["kind"] == "Binding"
    assert invalid["details"]["causes"][0]["field"] == "target.name"
    code, unnamed = await send(http, "POST", "/api/v1/namespaces/default/bindings", {"target": {"name": "n1"}})
    assert code == 422 and unnamed["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "metadata.name"}]


async def test_a_refused_pod_spec_change_names_the_pod_and_what_may_change(http):
    await send(http, "POST", PODS, pod("fixed"))
    code, body = await send(http, "PATCH", f"{PODS}/fixed", {"spec": {"restartPolicy": "Never"}},
                            "application/merge-patch+json")
    assert code == 422 and body["details"] == {"name": "fixed", "kind": "Pod", "causes": [{
        "reason": "FieldValueForbidden", "field": "spec", "message":
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
        "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` "
        "(only additions to existing tolerations) or `spec.terminationGracePeriodSeconds`"}]}
    with_init = pod("init")
    with_init["spec"]["initContainers"] = [{"name": "i", "image": "busybox", "imagePullPolicy": "IfNotPresent"}]
    await send(http, "POST", PODS, with_init)
    code, changed = await send(http, "PATCH", f"{PODS}/init", {"spec": {"initContainers": [
        {"name": "i", "image": "busybox:2", "imagePullPolicy": "Always"}]}}, "application/merge-patch+json")
    assert code == 200 and changed["spec"]["initContainers"][0]["image"] == "busybox:2"
    code, _ = await send(http, "PATCH", f"{PODS}/init", {"spec": {"initContainers": [
        {"name": "renamed", "image": "busybox:2"}]}}, "application/merge-patch+json")
    assert code == 422


async def test_an_invalid_update_names_the_object_and_field(http):
    await send(http, "POST", PODS, pod("typed"))
    code, body = await send(http, "PATCH", f"{PODS}/typed", {"metadata": {"labels": "oops"}},
                            "application/merge-patch+json")
    assert code == 422 and body["details"]["name"] == "typed" and body["details"]["kind"] == "Pod"
    assert body["details"]["causes"][0]["field"] == "metadata.labels"


async def test_a_dry_run_binding_leaves_the_pod_unbound_everywhere(c):
    await c.create(pod("maybe"), "default")
    await c.request("POST", f"{PODS}/maybe/binding", params={"dryRun": "All"},
                    body={"metadata": {"name": "maybe"}, "target": {"name": "n1"}})
    assert await names(c, field_selector="spec.nodeName=n1") == []
    assert await names(c, field_selector="status.phase=Scheduled") == []
    assert await names(c, field_selector="status.phase=Pending") == ["maybe"]


async def test_a_graceful_delete_sets_its_deadline_from_now(c):
    await c.create(pod("grace", node="n1"), "default")
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    deleting = await c.delete("pods", "grace", "default", raw=True)
    after = datetime.datetime.now(datetime.timezone.utc)
    deadline = datetime.datetime.strptime(deleting["metadata"]["deletionTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc)
    assert deleting["metadata"]["deletionGracePeriodSeconds"] == 30
    assert before + datetime.timedelta(seconds=30) <= deadline <= after + datetime.timedelta(seconds=30)


async def test_an_eviction_leaves_a_pod_being_deleted_or_unbound_alone(server, c):
    await c.create(pod("leaving", node="n1"), "default")
    deleting = await c.delete("pods", "leaving", "default", raw=True)
    reply = await server.api.evict("default", "leaving", "NodeLost", "gone")
    assert reply.code == 200 and json.loads(reply.body) == deleting
    unbound = await c.create(pod("free"), "default", raw=True)
    reply = await server.api.evict("default", "free", "NodeLost", "gone")
    assert reply.code == 200 and json.loads(reply.body) == unbound


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
async def test_an_eviction_never_places_a_finished_pod_again(server, c, phase):
    """A finished pod (restartPolicy Never, say) on a lost or drained node: moving it back to
    Pending would run its work a second time."""
    await c.create({**pod("done", node="n1"), "spec": {**pod("done", node="n1")["spec"], "restartPolicy": "Never"}},
                   "default")
    finished = await c.patch("pods", "done", {"status": {"phase": phase}}, "default", subresource="status", raw=True)
    reply = await server.api.evict("default", "done", "NodeLost", "gone")
    assert reply.code == 200 and json.loads(reply.body) == finished
    assert (await c.get("pods", "done", "default", raw=True))["spec"]["nodeName"] == "n1"


async def test_an_evicted_pod_keeps_no_trace_of_where_it_ran(server, c):
    await c.create(pod("trace", node="n1"), "default")
    await c.patch("pods", "trace", {"status": {"phase": "Running", "podIPs": [{"ip": "10.1.0.1"}],
                                               "conditions": [{"type": "Ready", "status": "True"}]}},
                  "default", subresource="status")
    reply = await server.api.evict("default", "trace", "NodeLost", "lost")
    status = json.loads(reply.body)["status"]
    assert "podIPs" not in status
    (condition,) = status["conditions"]
    assert condition.keys() == {"type", "status", "reason", "message", "lastTransitionTime"}
    assert condition["message"] == "lost (was on node n1)" and condition["lastTransitionTime"].endswith("Z")


async def test_a_collection_delete_skips_what_another_client_deleted_meanwhile(server, c, monkeypatch):
    for name in ("a", "b", "c"):
        await c.create(pod(name), "default")
    api, original = server.api, server.api.delete

    async def racing(resource, namespace, name, *args):
        if name == "a":  # someone else deletes b while the collection is being deleted
            await server.store.delete(resource.key("default", "b"))
        return await original(resource, namespace, name, *args)

    monkeypatch.setattr(api, "delete", racing)
    from corral.server.rest import ListOptions

    reply = await api.delete_collection(by_kind("Pod"), "default", ListOptions(), None)
    assert reply.code == 200
    body = json.loads(reply.body)
    assert [p["metadata"]["name"] for p in body["items"]] == ["a", "c"]
    assert body["metadata"] == {"resourceVersion": str(server.store.revision)}
    assert await names(c) == []


# --- writes that race with other servers and clients ------------------------------------------------------

async def written_elsewhere(server, name: str, labels: dict) -> str:
    """Change pod ``name`` in the store directly, as another API server would; its new resourceVersion."""
    await server.cache.wait_consistent()  # this server has seen everything so far
    key = by_kind("Pod").key("default", name)
    record = await server.store.get(key)
    obj = {**record.obj, "metadata": {**record.obj["metadata"], "labels": labels}}
    return str((await server.store.update(key, obj, record.revision)).revision)


@pytest.fixture
async def lagging_cache(server, monkeypatch):
    """The watch cache applies each change from the store 0.1 s late, as it can behind etcd's watch."""
    cache, apply = server.cache, server.cache._apply
    loop = asyncio.get_running_loop()
    monkeypatch.setattr(cache, "_apply", lambda batch: loop.call_later(0.1, apply, batch))


async def test_reads_and_pinned_writes_right_after_another_servers_write_see_it(server, c, lagging_cache):
    await c.create(pod("w"), "default")
    await written_elsewhere(server, "w", {"by": "other"})
    assert (await c.get("pods", "w", "default", raw=True))["metadata"]["labels"] == {"by": "other"}
    rv = await written_elsewhere(server, "w", {"by": "other-again"})
    done = await c.patch("pods", "w", {"metadata": {"resourceVersion": rv, "labels": {"by": "me"}}}, "default",
                         raw=True)
    assert done["metadata"]["labels"] == {"by": "me"}
    rv = await written_elsewhere(server, "w", {"by": "other-3"})
    current = {**done, "metadata": {**done["metadata"], "resourceVersion": rv, "labels": {"by": "me-2"}}}
    assert (await c.update(current, raw=True))["metadata"]["labels"] == {"by": "me-2"}
    rv = await written_elsewhere(server, "w", {"by": "other-4"})
    await c.delete("pods", "w", "default", resource_version=rv)
    assert await names(c) == []


async def test_a_pod_whose_namespace_and_class_this_server_knows_is_created_without_asking_the_store_first(
        server, c, monkeypatch):
    """Asking the store for its revision is a round trip on every create: only a name the cache
    lacks (another server may just have created it) is worth it."""
    asked: list[int] = []
    consistent = server.cache.wait_consistent

    async def counted(*args, **kwargs):
        asked.append(1)
        await consistent(*args, **kwargs)

    monkeypatch.setattr(server.cache, "wait_consistent", counted)
    await c.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "known"},
                    "value": 10})
    await c.create(pod("plain"), "default")
    await c.create({**pod("classed"), "spec": {**pod("classed")["spec"], "priorityClassName": "known"}}, "default")
    assert asked == []
    with pytest.raises(Invalid):
        await c.create({**pod("unknown"), "spec": {**pod("unknown")["spec"], "priorityClassName": "nowhere"}},
                       "default")
    assert asked == [1]  # looked for once, in case it was just made elsewhere


async def test_a_namespace_and_priority_class_another_server_just_created_take_a_pod_at_once(server, c, lagging_cache):
    """Created through another server, not yet in this one's cache: the pod still finds them."""
    await server.store.create(by_kind("Namespace").key(None, "fresh"), {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fresh", "uid": "u-ns"}})
    await server.store.create(by_kind("PriorityClass").key(None, "urgent"), {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "urgent", "uid": "u-pc"},
        "value": 1000})
    made = await c.create({**pod("p"), "spec": {**pod("p")["spec"], "priorityClassName": "urgent"}}, "default",
                          raw=True)  # in a namespace this server knows: the class alone is new to it
    assert made["spec"]["priority"] == 1000
    assert (await c.create(pod("q"), "fresh", raw=True))["metadata"]["namespace"] == "fresh"


@pytest.fixture
def race(server, monkeypatch):
    """Makes the next compare-and-swap of a pod lose to a write that lands just before it."""
    store, original = server.store, server.store.update
    armed = []

    async def update(key, obj, expected_revision, **kw):
        if armed:
            labels = armed.pop()
            current = await store.get(key)
            sneaked = {**current.obj, "metadata": {**current.obj["metadata"], "labels": labels}}
            await original(key, sneaked, current.revision)
        return await original(key, obj, expected_revision, **kw)

    monkeypatch.setattr(store, "update", update)
    return armed


async def test_an_unpinned_write_that_loses_a_race_is_applied_again_to_the_newest(c, race, lagging_cache):
    await c.create(pod("r1"), "default")
    race.append({"sneaked": "in"})
    patched = await c.patch("pods", "r1", {"metadata": {"annotations": {"mine": "yes"}}}, "default", raw=True)
    assert patched["metadata"]["labels"] == {"sneaked": "in"} and patched["metadata"]["annotations"] == {"mine": "yes"}
    race.append({"sneaked": "again"})
    await c.bind("default", "r1", "n1")
    bound = await c.get("pods", "r1", "default", raw=True)
    assert bound["spec"]["nodeName"] == "n1" and bound["metadata"]["labels"] == {"sneaked": "again"}


async def test_a_pinned_update_that_loses_a_race_is_a_conflict(c, race):
    created = await c.create(pod("r2"), "default", raw=True)
    race.append({"sneaked": "in"})
    with pytest.raises(Conflict) as err:
        await c.update({**created, "metadata": {**created["metadata"], "labels": {"mine": "yes"}}})
    assert err.value.status["details"] == {"name": "r2", "kind": "pods"}
    assert (await c.get("pods", "r2", "default", raw=True))["metadata"]["labels"] == {"sneaked": "in"}


async def test_a_dry_run_update_answers_the_result_and_changes_nothing(http):
    await send(http, "POST", PODS, pod("d"))
    _, got = await send(http, "GET", f"{PODS}/d")
    code, answered = await send(http, "PUT", f"{PODS}/d", {**got, "metadata": {**got["metadata"], "labels": {"x": "1"}}},
                                dryRun="All")
    assert code == 200 and answered["metadata"]["labels"] == {"x": "1"}
    assert (await send(http, "GET", f"{PODS}/d"))[1] == got


async def test_updating_a_terminating_pod_keeps_its_deletion(c):
    await c.create(pod("t", node="n1"), "default")
    terminating = await c.delete("pods", "t", "default", raw=True)
    meta = {k: v for k, v in terminating["metadata"].items() if not k.startswith("deletion")}
    updated = await c.update({**terminating, "metadata": {**meta, "labels": {"x": "1"}}}, raw=True)
    assert updated["metadata"]["deletionTimestamp"] == terminating["metadata"]["deletionTimestamp"]
    assert updated["metadata"]["deletionGracePeriodSeconds"] == 30 and updated["metadata"]["labels"] == {"x": "1"}


async def test_a_paged_list_of_one_namespace_shows_only_that_namespace(c):
    await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a-team"}})
    await c.create(pod("mine"), "default")
    await c.create(pod("theirs"), "a-team")
    page = await c.list("pods", "default", limit=5, raw=True)
    assert [p["metadata"]["name"] for p in page.items] == ["mine"]


async def test_an_expired_continue_token_says_to_start_again(server, c):
    for i in range(3):
        await c.create(pod(f"e{i}"), "default")
    first = await c.list("pods", "default", limit=1, raw=True)
    await c.create(pod("later"), "default")
    await server.compact(server.store.revision)
    err = await failure(c.list("pods", "default", limit=1, continue_token=first.continue_token))
    assert (err.code, err.reason) == (410, "Expired")
    assert err.message == ("The provided continue parameter is too old to display a consistent list result. "
                           "You can start a new list without the continue parameter.")


async def test_a_list_whose_revision_is_compacted_between_its_pages_names_that_revision(server, c, monkeypatch):
    """A selective list reads the store page by page at one revision; compacted meanwhile, the
    answer says which revision is gone, not that a continue token (none was sent) is too old."""
    for name, labels in (("q0", {}), ("q1", {}), ("q2", {"app": "web"})):
        await c.create(pod(name) | {"metadata": {"name": name, "labels": labels}}, "default")
    real, calls = server.store.list, []

    async def compacted_after_the_first_page(*args, **kwargs):
        calls.append(kwargs.get("revision"))
        if len(calls) == 2:
            await c.create(pod("later"), "default")
            await server.compact(server.store.revision)
        return await real(*args, **kwargs)

    monkeypatch.setattr(server.store, "list", compacted_after_the_first_page)
    err = await failure(c.list("pods", "default", limit=1, label_selector="app=web"))
    assert (err.code, err.reason) == (410, "Expired") and len(calls) == 2
    assert err.message.startswith(f"too old resource version: {calls[0]} (")


async def test_an_update_with_an_empty_resource_version_applies_to_the_newest(c):
    created = await c.create(pod("empty-rv"), "default", raw=True)
    await c.patch("pods", "empty-rv", {"metadata": {"labels": {"first": "1"}}}, "default")
    body = {**created, "metadata": {**created["metadata"], "resourceVersion": "", "labels": {"second": "2"}}}
    assert (await c.update(body, raw=True))["metadata"]["labels"] == {"second": "2"}
    patched = await c.patch("pods", "empty-rv", {"metadata": {"resourceVersion": "", "labels": {"third": "3"}}},
                            "default", raw=True)
    assert patched["metadata"]["labels"] == {"second": "2", "third": "3"}


async def test_a_patch_pinned_to_an_old_version_is_a_conflict_naming_the_object(c):
    created = await c.create(pod("old-pin"), "default", raw=True)
    await c.patch("pods", "old-pin", {"metadata": {"labels": {"first": "1"}}}, "default")
    with pytest.raises(Conflict) as err:
        await c.patch("pods", "old-pin", {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"],
                                                       "labels": {"late": "1"}}}, "default")
    assert err.value.status["details"] == {"name": "old-pin", "kind": "pods"}


# --- what each verb keeps, drops and names ----------------------------------------------------------------

async def test_a_binding_keeps_the_pods_other_status_and_conditions_and_clears_its_nomination(c):
    await c.create(pod("nominated"), "default")
    await c.patch("pods", "nominated", {"status": {
        "nominatedNodeName": "n9", "message": "waiting for n9",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
                       {"type": "Custom", "status": "True"}]}}, "default", subresource="status")
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    await c.bind("default", "nominated", "n1")
    bound = await c.get("pods", "nominated", "default", raw=True)
    assert bound.keys() == {"apiVersion", "kind", "metadata", "spec", "status"}
    status = bound["status"]
    assert "nominatedNodeName" not in status and status["message"] == "waiting for n9"
    custom, scheduled = status["conditions"]
    assert custom == {"type": "Custom", "status": "True"}
    assert scheduled.keys() == {"type", "status", "lastTransitionTime"}
    assert (scheduled["type"], scheduled["status"]) == ("PodScheduled", "True")
    assert datetime.datetime.strptime(scheduled["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc) >= before


async def test_a_pod_marked_for_deletion_is_never_bound(server, c):
    # Unreachable through this server's own verbs (only a bound pod waits out a grace period), but a
    # record written so, by another version or by hand, must still not be bound.
    await c.create(pod("doomed"), "default")
    key = by_kind("Pod").key("default", "doomed")
    record = await server.store.get(key)
    doomed = {**record.obj, "metadata": {**record.obj["metadata"], "deletionTimestamp": "2030-01-01T00:00:00Z"}}
    await server.store.update(key, doomed, record.revision)
    with pytest.raises(Conflict) as err:
        await c.bind("default", "doomed", "n1")
    assert err.value.message == ('Operation cannot be fulfilled on pods "doomed": '
                                 'pod doomed is being deleted, cannot be assigned to a host')
    assert err.value.status["details"] == {"name": "doomed", "kind": "pods"}
    assert "nodeName" not in (await c.get("pods", "doomed", "default", raw=True))["spec"]


async def test_a_binding_body_may_leave_the_name_to_the_url(c):
    await c.create(pod("by-url"), "default")
    await c.request("POST", f"{PODS}/by-url/binding", body={"apiVersion": "v1", "kind": "Binding",
                                                            "target": {"name": "n1"}})
    assert (await c.get("pods", "by-url", "default", raw=True))["spec"]["nodeName"] == "n1"


async def test_a_put_keeps_the_identity_it_leaves_out_and_drops_deletion_fields_it_forges(c):
    created = await c.create(pod("ident"), "default", raw=True)
    path = f"{PODS}/ident"
    forged = {"apiVersion": "v1", "kind": "Pod", "spec": created["spec"],
              "metadata": {"labels": {"x": "1"}, "deletionTimestamp": "2030-01-01T00:00:00Z",
                           "deletionGracePeriodSeconds": 5}}
    updated = json.loads(await c.request("PUT", path, body=forged))
    meta = updated["metadata"]
    assert (meta["name"], meta["namespace"], meta["uid"], meta["labels"]) == (
        "ident", "default", created["metadata"]["uid"], {"x": "1"})
    assert "deletionTimestamp" not in meta and "deletionGracePeriodSeconds" not in meta
    bare = json.loads(await c.request("PUT", path, body={"apiVersion": "v1", "kind": "Pod", "spec": created["spec"]}))
    assert (bare["metadata"]["name"], bare["metadata"]["namespace"]) == ("ident", "default")
    assert "labels" not in bare["metadata"]


async def test_generation_counts_every_spec_change_even_of_an_object_stored_without_one(server, c):
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "g1"}, "spec": {}}
    created = await c.create(node, raw=True)
    assert created["metadata"]["generation"] == 1
    for generation, taints in ((2, [{"key": "a", "effect": "NoSchedule"}]), (3, [])):
        updated = await c.update({**created, "metadata": {"name": "g1"}, "spec": {"taints": taints}}, raw=True)
        assert updated["metadata"]["generation"] == generation
    key = by_kind("Node").key(None, "g1")
    record = await server.store.get(key)
    await server.store.update(key, {**record.obj, "metadata": {k: v for k, v in record.obj["metadata"].items()
                                                                  if k != "generation"}}, record.revision)
    updated = await c.update({**created, "metadata": {"name": "g1"}, "spec": {"unschedulable": True}}, raw=True)
    assert updated["metadata"]["generation"] == 2  # a missing generation counts as 1


async def test_status_is_left_out_of_a_main_put_and_a_status_put_of_nothing_to_nothing_is_fine(c):
    created = await c.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "s1"}, "spec": {}}, raw=True)
    assert "status" not in created
    updated = await c.update({**created, "status": {"capacity": {"cpu": "64"}}}, raw=True)
    assert "status" not in updated
    again = await c.update({k: v for k, v in updated.items() if k != "metadata"} | {"metadata": {"name": "s1"}},
                           subresource="status", raw=True)
    assert "status" not in again


async def test_warnings_about_unknown_fields_come_back_from_every_kind_of_put(server, http):
    await send(http, "POST", PODS, pod("warned"))
    _, got = await send(http, "GET", f"{PODS}/warned")
    odd = {**got, "bogus": 1}
    warning = '299 - "unknown field \'bogus\': Kubernetes has no such field (misspelt?); kept as written"'

    async def put(path: str, body: dict, **params) -> tuple[int, list[str]]:
        async with http.put(path, data=json.dumps(body), params=params,
                            headers={"Content-Type": "application/json"}) as r:
            return r.status, r.headers.getall("Warning", [])

    assert await put(f"{PODS}/warned", odd, dryRun="All") == (200, [warning])  # a dry run
    assert await put(f"{PODS}/warned", odd) == (200, [warning])  # a write
    _, got = await send(http, "GET", f"{PODS}/warned")
    assert await put(f"{PODS}/warned", got) == (200, [warning])  # no change at all
    # A pod whose deletion began, reported terminated: removed, and still warned about.
    await send(http, "POST", PODS, pod("ending", node="n1"))
    _, ending = await send(http, "DELETE", f"{PODS}/ending")
    ending["status"] = {"phase": "Terminated", "bogus": 1}
    code, warnings = await put(f"{PODS}/ending/status", ending)
    assert code == 200 and warnings == ['299 - "unknown field \'status.bogus\': Kubernetes has no such field '
                                        '(misspelt?); kept as written"']
    assert (await send(http, "GET", f"{PODS}/ending"))[0] == 404


@pytest.fixture
def always_losing(server, monkeypatch):
    """Every compare-and-swap write of the store loses to a write that came first (or the key went)."""
    from corral.store import Conflict as StoreConflict, KeyNotFound

    mode = ["conflict"]

    async def update(key, obj, expected_revision, **kw):
        if mode[0] == "conflict":
            raise StoreConflict(key, expected_revision, server.store.revision)
        raise KeyNotFound(key)

    monkeypatch.setattr(server.store, "update", update)
    return mode


async def test_a_write_that_keeps_losing_races_gives_up_with_a_conflict_naming_the_object(c, always_losing):
    created = await c.create(pod("contested"), "default", raw=True)
    unpinned = {**created, "metadata": {"name": "contested", "labels": {"x": "1"}}}
    message = ('Operation cannot be fulfilled on pods "contested": the object has been modified; '
               'please apply your changes to the latest version and try again')
    for call in (c.update(unpinned), c.patch("pods", "contested", {"metadata": {"labels": {"x": "1"}}}, "default"),
                 c.bind("default", "contested", "n1")):
        with pytest.raises(Conflict) as err:
            await call
        assert err.value.message == message and err.value.status["details"] == {"name": "contested", "kind": "pods"}
    always_losing[0] = "gone"
    for call in (c.update(unpinned), c.bind("default", "contested", "n1")):
        with pytest.raises(NotFound) as err:
            await call
        assert err.value.message == 'pods "contested" not found'
        assert err.value.status["details"] == {"name": "contested", "kind": "pods"}


async def test_a_delete_racing_another_writer_honours_its_precondition_in_the_store(server, c, monkeypatch):
    api, original = server.api, server.api.current
    racer: list = []

    async def current(resource, namespace, name, **kw):
        record = await original(resource, namespace, name, **kw)
        if racer:  # another server writes between this server's read and its delete
            await racer.pop()(record)
        return record

    monkeypatch.setattr(api, "current", current)

    async def relabel(record):
        await server.store.update(record.key, {**record.obj, "metadata": {**record.obj["metadata"],
                                                                           "labels": {"by": "other"}}}, record.revision)

    async def delete(record):
        await server.store.delete(record.key)

    created = await c.create(pod("raced"), "default", raw=True)
    racer.append(relabel)
    with pytest.raises(Conflict) as err:
        await c.delete("pods", "raced", "default", resource_version=created["metadata"]["resourceVersion"])
    assert err.value.message == ('Operation cannot be fulfilled on pods "raced": the resourceVersion in the '
                                 'precondition does not match the object')
    assert err.value.status["details"] == {"name": "raced", "kind": "pods"}
    assert (await c.get("pods", "raced", "default", raw=True))["metadata"]["labels"] == {"by": "other"}
    racer.append(delete)
    with pytest.raises(NotFound) as err:
        await c.delete("pods", "raced", "default")
    assert err.value.status["details"] == {"name": "raced", "kind": "pods"}


async def test_deleting_a_namespace_deletes_its_contents_only(c):
    await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "leaving"}})
    await c.create(pod("inside"), "leaving")
    await c.create(pod("outside"), "default")
    await c.delete("namespaces", "leaving")
    assert await names(c, None) == ["outside"]


async def test_deleting_a_collection_with_zero_grace_removes_bound_pods_at_once(c):
    await c.create(pod("b1", node="n1"), "default")
    await c.create(pod("b2", node="n1"), "default")
    await c.request("DELETE", PODS, params={"gracePeriodSeconds": "0"})
    assert await names(c) == []


@pytest.fixture
def far_from_utc(monkeypatch):
    """The server's machine keeps local time in a zone far from UTC."""
    import time

    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


async def test_a_deletion_deadline_is_utc_whatever_the_machines_zone(c, far_from_utc):
    await c.create(pod("zoned", node="n1"), "default")
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    deleting = await c.delete("pods", "zoned", "default", raw=True)
    deadline = datetime.datetime.strptime(deleting["metadata"]["deletionTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc)
    assert before + datetime.timedelta(seconds=30) <= deadline <= before + datetime.timedelta(seconds=32)


async def test_a_continue_token_without_a_limit_pages_by_500(server, c):
    for i in range(502):
        obj = pod(f"p{i:03d}", namespace="default")
        await server.store.create(by_kind("Pod").key("default", obj["metadata"]["name"]), obj)
    first = await c.list("pods", "default", limit=1, raw=True)
    second = await c.list("pods", "default", continue_token=first.continue_token, raw=True)
    assert [p["metadata"]["name"] for p in second.items] == [f"p{i:03d}" for i in range(1, 501)]
    third = await c.list("pods", "default", continue_token=second.continue_token, raw=True)
    assert [p["metadata"]["name"] for p in third.items] == ["p501"] and not third.continue_token


async def test_an_unknown_patch_type_is_a_callers_mistake(server, c):
    await c.create(pod("typed-patch"), "default")
    with pytest.raises(ValueError, match="unknown patch type 'apply'"):
        await server.api.patch(by_kind("Pod"), "default", "typed-patch", {}, "apply", WriteOptions())


async def test_an_exact_list_without_a_limit_is_every_object_at_that_version_in_one_reply(server):
    """resourceVersionMatch=Exact reads the store at that version: with no limit, the whole list
    (kube-apiserver pages only when asked), past the 500 a plain paged list would stop at."""
    from corral.server.rest import ListOptions, WriteOptions

    configmaps, opts = by_kind("ConfigMap"), WriteOptions(warn=False)
    for i in range(510):
        await server.api.create(configmaps, "default", {"metadata": {"name": f"cm-{i:03d}"}}, opts)
    then = await server.store.current_revision()
    await server.api.create(configmaps, "default", {"metadata": {"name": "later"}}, opts)
    reply = await server.api.list(configmaps, "default", ListOptions(resource_version=then, exact=True))
    body = json.loads(reply.body)
    assert len(body["items"]) == 510 and not body["metadata"].get("continue")
    assert body["metadata"]["resourceVersion"] == str(then)


async def test_deleting_an_object_with_finalizers_marks_it_and_keeps_its_finalizers(http):
    """As kube-apiserver: 200 with the object now carrying its deletion time (grace 0) and every
    finalizer it had, plus the propagation policy's own; asked again, nothing changes."""
    from corral.api.resources import ORPHAN_FINALIZER

    path = "/api/v1/namespaces/default/configmaps"
    async with http.post(path, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "kept", "finalizers": ["example.com/keep"]}}) as r:
        assert r.status == 201
    async with http.delete(f"{path}/kept") as r:
        assert r.status == 200
        marked = await r.json()
    meta = marked["metadata"]
    assert meta["deletionTimestamp"] and meta["deletionGracePeriodSeconds"] == 0
    assert meta["finalizers"] == ["example.com/keep"]
    async with http.get(f"{path}/kept") as r:
        assert (await r.json())["metadata"]["resourceVersion"] == meta["resourceVersion"]  # still there, as answered
    async with http.delete(f"{path}/kept") as r:
        assert r.status == 200 and (await r.json())["metadata"] == meta  # already on its way: nothing written
    async with http.delete(f"{path}/kept", params={"propagationPolicy": "Orphan"}) as r:
        assert r.status == 200
        orphaning = (await r.json())["metadata"]
    assert orphaning["finalizers"] == ["example.com/keep", ORPHAN_FINALIZER]
    assert orphaning["deletionTimestamp"] == meta["deletionTimestamp"]
    # The garbage collector may take the orphan finalizer off (nothing to orphan) before the next
    # call, which then adds it again; the deletion time stays the one of the first call either way.
    async with http.delete(f"{path}/kept", params={"propagationPolicy": "Orphan"}) as r:
        assert r.status == 200
        again = (await r.json())["metadata"]
    assert again["finalizers"] == orphaning["finalizers"]
    assert again["deletionTimestamp"] == meta["deletionTimestamp"]
    # The last finalizer taken off: the object goes, and the update is answered 200 with it (and
    # the warnings of what it sent).
    async with http.patch(f"{path}/kept", json={"metadata": {"finalizers": None}, "color": "blue"},
                          headers={"Content-Type": "application/merge-patch+json"}) as r:
        assert r.status == 200 and (await r.json())["metadata"]["name"] == "kept"
        assert any('"color"' in w or "'color'" in w for w in r.headers.getall("Warning", [])), r.headers
    async with http.get(f"{path}/kept") as r:
        assert r.status == 404
