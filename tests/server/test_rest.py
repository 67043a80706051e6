"""The REST verbs' rules, through HTTP against a server in the test's event loop: what create,
update, patch, delete, bind and evict keep, change, refuse and answer."""

from __future__ import annotations

import aiohttp
import pytest

from corral.client import AlreadyExists, Client, Conflict, Invalid, NotFound
from corral.client.rest import ApiError


def pod(name: str, node: str | None = None, **meta) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta}, "spec": spec}


@pytest.fixture
async def c(server):
    async with Client(server.url) as client:
        yield client


@pytest.fixture
async def http(server):
    async with aiohttp.ClientSession(server.url) as session:
        yield session


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
    assert err.code == 400 and "does not match the namespace sent on the request" in err.message
    err = await failure(c.create(pod("c"), "nowhere"))
    assert err.code == 404 and err.status["details"]["kind"] == "namespaces" and "nowhere" in err.message
    with pytest.raises(AlreadyExists):
        await c.create(pod("a"), "default")
    err = await failure(c.create({**pod("d"), "apiVersion": "apps/v1"}, "default"))
    assert err.code == 400 and 'the apiVersion of the body ("apps/v1") does not match v1' == err.message
    assert await names(c) == ["a"]


async def test_a_pod_posted_without_a_namespace_in_url_or_body_lands_in_default(c):
    created = _decoded(await c.request("POST", "/api/v1/pods", body=pod("nowhere-said")))
    assert created["metadata"]["namespace"] == "default"
    assert await names(c) == ["nowhere-said"]


def _decoded(payload: bytes) -> dict:
    import json

    return json.loads(payload)


async def test_a_dry_run_create_answers_the_object_and_stores_nothing(c):
    answered = _decoded(await c.request("POST", "/api/v1/namespaces/default/pods", params={"dryRun": "All"},
                                        body=pod("dry")))
    assert answered["metadata"]["name"] == "dry" and answered["metadata"]["namespace"] == "default"
    assert answered["spec"]["priority"] == 0
    assert await names(c) == []


async def test_the_global_default_priority_class_applies_to_pods_that_name_none(c):
    await c.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"},
                    "value": 5})
    await c.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "usual"},
                    "value": 100, "globalDefault": True, "preemptionPolicy": "Never"})
    spec = (await c.create(pod("plain"), "default", raw=True))["spec"]
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == ("usual", 100, "Never")
    named = pod("named")
    named["spec"]["priorityClassName"] = "low"
    spec = (await c.create(named, "default", raw=True))["spec"]
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == (
        "low", 5, "PreemptLowerPriority")
    forged = pod("forged")
    forged["spec"]["priority"] = 7
    err = await failure(c.create(forged, "default"))
    assert err.code == 403 and "the integer value of priority (7) must not be provided" in err.message
    assert "computed 100 from the given PriorityClass name" in err.message
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
    assert err.code == 400 and "does not match the namespace sent on the request" in err.message
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


# --- patch ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("patch, patch_type, code, message", [
    pytest.param([{"op": "remove", "path": "/metadata/nothing"}], "json", 422, "the patch could not be applied",
                 id="a JSON patch that cannot apply is invalid"),
    pytest.param(["not", "an", "object"], "merge", 422, "a merge patch must be a JSON object",
                 id="a merge patch that is no object is invalid"),
    pytest.param([{"op": "replace", "path": "", "value": [1]}], "json", 400, "the patched object is not a JSON object",
                 id="a patch may not turn the object into a list"),
    pytest.param({"kind": "Node"}, "merge", 400, 'the kind of the body ("Node") does not match',
                 id="a patch may not change the kind"),
])
async def test_a_patch_that_cannot_apply_is_refused_and_changes_nothing(c, patch, patch_type, code, message):
    created = await c.create(pod("pt"), "default", raw=True)
    err = await failure(c.patch("pods", "pt", patch, "default", patch_type=patch_type))
    assert err.code == code and message in err.message
    assert (await c.get("pods", "pt", "default", raw=True)) == created


# --- delete -----------------------------------------------------------------------------------------------

async def test_a_bound_pod_is_deleted_gracefully_and_an_unbound_or_zero_grace_one_at_once(c):
    await c.create(pod("free"), "default")
    gone = await c.delete("pods", "free", "default", raw=True)
    assert gone["metadata"]["name"] == "free"
    await c.create({**pod("slow", node="n1"), "spec": {**pod("slow")["spec"], "nodeName": "n1",
                                                        "terminationGracePeriodSeconds": 45}}, "default")
    first = await c.delete("pods", "slow", "default", raw=True)
    assert first["status"]["phase"] == "Terminating" and first["metadata"]["deletionGracePeriodSeconds"] == 45
    again = await c.delete("pods", "slow", "default", grace_period_seconds=3, raw=True)
    assert again == first  # already on its way: unchanged
    await c.create(pod("quick", node="n1"), "default")
    short = await c.delete("pods", "quick", "default", grace_period_seconds=2, raw=True)
    assert short["metadata"]["deletionGracePeriodSeconds"] == 2
    await c.create(pod("now", node="n1"), "default")
    await c.delete("pods", "now", "default", grace_period_seconds=0)
    assert await names(c) == ["quick", "slow"]


async def test_a_dry_run_delete_answers_the_object_and_deletes_nothing(c):
    await c.create(pod("kept"), "default")
    answered = _decoded(await c.request("DELETE", "/api/v1/namespaces/default/pods/kept", params={"dryRun": "All"}))
    assert answered["metadata"]["name"] == "kept"
    assert await names(c) == ["kept"]
    err = await failure(c.delete("pods", "absent", "default"))
    assert err.code == 404


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public", "corral-node-lease"])
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
    deleted = _decoded(await c.request("DELETE", "/api/v1/namespaces/default/pods",
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
    assert await names(c, field_selector="spec.nodeName=n1") == ["y"]
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
                                   "eyJydiI6IDEsICJzdGFydCI6ICIvcmVnaXN0cnkvbm9kZXMvbjEifQ=="])
async def test_a_malformed_continue_token_is_a_bad_request(c, token):
    # not base64; not JSON; no start; a start outside the listed collection (nodes, for pods)
    err = await failure(c.list("pods", "default", limit=2, continue_token=token))
    assert err.code == 400 and err.message == "invalid continue token"


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
    assert again.code == 200 and _decoded(again.body)["status"]["message"].startswith("the node stopped")
    assert created["metadata"]["uid"] == moved["metadata"]["uid"]
