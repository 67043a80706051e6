"""API semantics through HTTP: bad input, watches, paging, warnings, subresources, discovery."""

from __future__ import annotations

import asyncio
import json

import pytest

from corral.client import Conflict, Gone, Invalid, NotFound


def pod(name: str, **meta) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


async def pod_count(http) -> int:
    async with http.get("/api/v1/pods") as r:
        return len((await r.json())["items"])


@pytest.mark.parametrize(
    "body, content_type, code, reason, message",
    [
        pytest.param(b'{"metadata": {"name": "x"', "application/json", 400, "BadRequest", "not valid JSON",
                     id="malformed JSON is a bad request"),
        pytest.param(b"metadata: [unclosed", "application/yaml", 400, "BadRequest", "not valid YAML",
                     id="malformed YAML is a bad request"),
        pytest.param(b"[1, 2]", "application/json", 400, "BadRequest", "must be a JSON object",
                     id="a body that is not an object is a bad request"),
        pytest.param(json.dumps({**pod("x"), "kind": "Node"}).encode(), "application/json", 400, "BadRequest",
                     "does not match", id="a body of another kind is a bad request"),
        pytest.param(json.dumps(pod("x", labels="oops")).encode(), "application/json", 422, "Invalid",
                     "metadata.labels", id="a wrong type names its field"),
        pytest.param(json.dumps({**pod("x"), "metadata": {"name": 5}}).encode(), "application/json", 422, "Invalid",
                     'Pod "" is invalid: metadata.name: Expected `str | null`, got `int`',
                     id="a name that is no string is named as no name"),
        pytest.param(json.dumps(pod("a" * 254)).encode(), "application/json", 422, "Invalid",
                     "metadata.name: Too long", id="an over-long name is invalid"),
        pytest.param(b"", "application/json", 400, "BadRequest", "empty", id="an empty body is a bad request"),
    ],
)
async def test_bad_input_gets_a_status_and_writes_nothing(http, body, content_type, code, reason, message):
    before = await pod_count(http)
    async with http.post("/api/v1/namespaces/default/pods", data=body,
                         headers={"Content-Type": content_type}) as r:
        status = await r.json()
        assert r.status == code, status
    assert status["kind"] == "Status" and status["reason"] == reason and message in status["message"]
    assert await pod_count(http) == before


async def test_an_oversized_body_is_refused_with_413(http):
    big = pod("big")
    big["metadata"]["annotations"] = {"blob": "x" * (4 * 1024 * 1024)}
    async with http.post("/api/v1/namespaces/default/pods", json=big) as r:
        assert r.status == 413
        assert (await r.json())["reason"] == "RequestEntityTooLarge"
    assert await pod_count(http) == 0


async def test_unknown_paths_kinds_and_namespaces_are_not_found(http):
    for path in ("/api/v1/deployments", "/apis/apps/v1/namespaces/default/statefulsets", "/nope"):
        async with http.get(path) as r:
            assert r.status == 404 and (await r.json())["reason"] == "NotFound", path
    async with http.post("/api/v1/namespaces/missing/pods", json=pod("x")) as r:
        assert r.status == 404 and 'namespaces "missing" not found' in (await r.json())["message"]


async def test_fields_corral_does_not_act_on_are_kept_with_a_warning_and_strict_refuses_only_misspelt_ones(http):
    """kubectl sends fieldValidation=Strict by default: a Kubernetes field corral does not act on
    (a security context) is kept with a warning, as before; a field Kubernetes does not have either is refused,
    as Kubernetes refuses it, each named with its path."""
    obj = pod("extra")
    obj["spec"]["containers"][0]["securityContext"] = {"runAsNonRoot": True}
    async with http.post("/api/v1/namespaces/default/pods?fieldValidation=Strict", json=obj) as r:
        assert r.status == 201, await r.text()
        assert any("spec.containers[0].securityContext" in w and "does not act on it" in w
                   for w in r.headers.getall("Warning"))
        assert (await r.json())["spec"]["containers"][0]["securityContext"] == {"runAsNonRoot": True}
    typo = pod("typo")
    typo["spec"]["containers"][0]["securityContext"] = {"runAsNonRot": True}
    typo["spec"]["nodeSelecter"] = {"zone": "a"}
    typo["spec"]["hostAliases"] = [{"ip": "10.0.0.1", "hostnamez": ["db"]}]  # misspelt inside a list corral keeps
    async with http.post("/api/v1/namespaces/default/pods?fieldValidation=Strict", json=typo) as r:
        assert r.status == 400
        message = (await r.json())["message"]
        assert message.startswith('Pod in version "v1" cannot be handled as a Pod: strict decoding error: ')
        assert sorted(message.split(": strict decoding error: ")[1].split(", ")) == [
            'unknown field "spec.containers[0].securityContext.runAsNonRot"',
            'unknown field "spec.hostAliases[0].hostnamez"', 'unknown field "spec.nodeSelecter"']
    assert await pod_count(http) == 1
    async with http.post("/api/v1/namespaces/default/pods", json=typo) as r:
        assert r.status == 201
        warnings = r.headers.getall("Warning")
        assert any("unknown field 'spec.nodeSelecter'" in w for w in warnings)  # quotes become ' in a header
        assert any("spec.containers[0].securityContext" in w and "does not act" in w for w in warnings)


async def test_update_is_compare_and_swap_and_a_no_op_update_writes_nothing(server):
    async with server.client() as c:
        created = await c.create(pod("cas"))
        same = await c.update(created)
        assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        await c.patch("pods", "cas", {"metadata": {"labels": {"a": "1"}}}, "default")
        with pytest.raises(Conflict):
            await c.update(created)


async def test_an_in_process_update_that_is_refused_leaves_the_cached_object_as_it_was(server):
    """Controllers write {**cached, "spec": ...}: the metadata they pass is the cache's own. A refused
    write (here a negative replica count) must not have bumped its generation meanwhile."""
    from corral.api.resources import by_kind
    from corral.server.errors import ApiError
    from corral.server.rest import WriteOptions

    deployments, opts = by_kind("Deployment"), WriteOptions(warn=False)
    await server.api.create(deployments, "default", {"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}},
        opts)
    await server.api.cache.wait_consistent()
    cached = server.api.cache.get(deployments.key("default", "d")).obj
    before = json.dumps(cached, sort_keys=True)
    with pytest.raises(ApiError):
        await server.api.update(deployments, "default", "d", {**cached, "spec": {**cached["spec"], "replicas": -5}},
                                opts)
    assert json.dumps(cached, sort_keys=True) == before and cached["metadata"]["generation"] == 1
    await server.api.update(deployments, "default", "d", {**cached, "spec": {**cached["spec"], "replicas": 3}}, opts)
    await server.api.cache.wait_consistent()
    assert json.dumps(cached, sort_keys=True) == before  # the written one is a new object; this one stays as read
    assert server.api.cache.get(deployments.key("default", "d")).obj["metadata"]["generation"] == 2


async def test_pod_spec_is_immutable_except_images(server):
    async with server.client() as c:
        await c.create(pod("imm"))
        await c.patch("pods", "imm", {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}, "default")
        with pytest.raises(Invalid) as err:
            await c.patch("pods", "imm", {"spec": {"restartPolicy": "Never"}}, "default")
        assert err.value.causes[0]["field"] == "spec"


async def test_the_status_subresource_changes_only_status_and_the_main_resource_never_does(server):
    async with server.client() as c:
        await c.create(pod("st"))
        await c.patch("pods", "st", {"status": {"phase": "Running"}, "metadata": {"labels": {"x": "y"}}},
                      "default", subresource="status")
        got = await c.get("pods", "st", "default", raw=True)
        assert got["status"]["phase"] == "Running" and "labels" not in got["metadata"]
        await c.patch("pods", "st", {"status": {"phase": "Failed"}}, "default")
        assert (await c.get("pods", "st", "default", raw=True))["status"]["phase"] == "Running"


async def test_priority_comes_from_the_priority_class(server):
    async with server.client() as c:
        await c.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                        "metadata": {"name": "high"}, "value": 1000})
        obj = pod("prio")
        obj["spec"]["priorityClassName"] = "high"
        assert (await c.create(obj))["spec"]["priority"] == 1000
        missing = pod("prio2")
        missing["spec"]["priorityClassName"] = "nope"
        with pytest.raises(Exception) as err:
            await c.create(missing)
        assert err.value.code == 422 and err.value.reason == "Invalid"
        assert err.value.message == ('Pod "prio2" is invalid: spec.priorityClassName: '
                                     "Not found: 'nope': no PriorityClass with name nope was found")
        assert err.value.causes == [{"reason": "FieldValueNotFound", "field": "spec.priorityClassName", "message":
                                     "Not found: 'nope': no PriorityClass with name nope was found"}]
        assert "prio2" not in [p["metadata"]["name"] for p in (await c.list("pods", "default", raw=True)).items]


async def test_lists_page_with_limit_and_continue_at_one_revision(server):
    async with server.client() as c:
        for i in range(25):
            await c.create(pod(f"p{i:02d}"))
        first = await c.list("pods", "default", limit=10, raw=True)
        assert len(first.items) == 10 and first.continue_token
        await c.create(pod("p99"))  # not in the paged list: it came after the list's revision
        names = [p["metadata"]["name"] for p in first.items]
        token = first.continue_token
        while token:
            page = await c.list("pods", "default", limit=10, continue_token=token, raw=True)
            names += [p["metadata"]["name"] for p in page.items]
            token = page.continue_token
        assert names == [f"p{i:02d}" for i in range(25)]
        labelled = await c.list("pods", "default", limit=3, label_selector="missing=label", raw=True)
        assert labelled.items == [] and not labelled.continue_token


async def test_an_expired_continue_token_or_watch_revision_is_410_gone(server):
    async with server.client() as c:
        for i in range(5):
            await c.create(pod(f"g{i}"))
        first = await c.list("pods", "default", limit=2, raw=True)
        old_rv = first.resource_version
        await c.create(pod("g-late"))
        await server.compact(server.store.revision)
        with pytest.raises(Gone):
            await c.list("pods", "default", limit=2, continue_token=first.continue_token)
        with pytest.raises(Gone):
            async with asyncio.timeout(10):  # an expired watch must fail, not wait for events
                async for _ in c.watch("pods", "default", resource_version=old_rv):
                    pass


async def test_a_watch_from_a_revision_filters_by_selector_and_sends_bookmarks(server, monkeypatch):
    from corral.server.http import routes

    monkeypatch.setattr(routes, "BOOKMARK_INTERVAL", 0.2)
    async with server.client() as c:
        start = (await c.list("pods", "default")).resource_version
        await c.create(pod("blue", labels={"color": "blue"}))
        await c.create(pod("red", labels={"color": "red"}))
        await c.patch("pods", "red", {"metadata": {"labels": {"color": "blue"}}}, "default")
        await c.patch("pods", "blue", {"metadata": {"labels": {"color": "green"}}}, "default")
        seen = []
        async for event in c.watch("pods", "default", resource_version=start, label_selector="color=blue",
                                   raw=True):
            seen.append((event.type, event.object["metadata"].get("name")))
            if event.type == "BOOKMARK":
                assert int(event.resource_version) >= int(start)
                break
        # Entering the selection is ADDED, leaving it DELETED, as Kubernetes reports them.
        assert seen == [("ADDED", "blue"), ("ADDED", "red"), ("DELETED", "blue"), ("BOOKMARK", None)]


async def test_many_watchers_all_see_every_event_in_order(server):
    async with server.client() as c:
        start = (await c.list("pods", "default")).resource_version

        async def watch() -> list[int]:
            revs = []
            async for e in c.watch("pods", "default", resource_version=start, bookmarks=False, raw=True):
                revs.append(int(e.resource_version))
                if len(revs) == 60:
                    return revs
            return revs

        watchers = [asyncio.create_task(watch()) for _ in range(20)]
        await asyncio.sleep(0.2)
        await asyncio.gather(*(c.create(pod(f"f{i}")) for i in range(60)))
        results = await asyncio.wait_for(asyncio.gather(*watchers), 20)
        for revs in results:
            assert revs == sorted(revs) and len(set(revs)) == 60


async def test_deleting_a_namespace_deletes_what_is_in_it_and_default_is_protected(server):
    async with server.client() as c:
        await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
        await c.create(pod("in-team"), "team")
        await c.delete("namespaces", "team")
        with pytest.raises(NotFound):
            await c.get("pods", "in-team", "team")
        with pytest.raises(Exception) as err:
            await c.delete("namespaces", "default")
        assert err.value.code == 403


async def test_discovery_version_openapi_health_and_metrics_answer(http):
    async with http.get("/api/v1") as r:
        names = {res["name"] for res in (await r.json())["resources"]}
        assert {"pods", "pods/status", "pods/binding", "nodes", "events", "namespaces"} <= names
    async with http.get("/apis") as r:
        groups = {g["name"] for g in (await r.json())["groups"]}
        assert groups == {"coordination.k8s.io", "scheduling.k8s.io", "auth.corral.dev", "rbac.authorization.k8s.io",
                          "authorization.k8s.io", "policy", "metrics.k8s.io", "apps", "batch", "scheduling.corral.dev",
                          "placement.corral.dev"}
    async with http.get("/apis/coordination.k8s.io/v1") as r:
        assert [res["name"] for res in (await r.json())["resources"]] == ["leases"]
    async with http.get("/version") as r:
        assert (await r.json())["gitVersion"].startswith("v")
    async with http.get("/openapi/v3/api/v1") as r:
        doc = await r.json()
        assert "Pod" in doc["components"]["schemas"]
        assert "/api/v1/namespaces/{namespace}/pods/{name}/binding" in doc["paths"]
    for path in ("/healthz", "/readyz", "/livez"):
        async with http.get(path) as r:
            assert r.status == 200
    async with http.get("/metrics") as r:
        text = await r.text()
        assert "corral_apiserver_requests_total" in text and "corral_store_revision" in text


async def test_metrics_count_each_request_by_verb_resource_and_code_and_time_it_by_verb(http):
    import re

    async def samples() -> dict[str, float]:
        async with http.get("/metrics") as r:
            text = await r.text()
        return {m[1]: float(m[2]) for m in re.finditer(r"^(corral_apiserver_\S+) (\S+)$", text, re.M)}

    def created(code: int) -> str:
        return f'corral_apiserver_requests_total{{code="{code}",resource="configmaps",verb="create"}}'

    timed = 'corral_apiserver_request_duration_seconds_count{verb="create"}'
    before = await samples()
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "counted"}}
    for expected in (201, 409, 409):
        async with http.post("/api/v1/namespaces/default/configmaps", json=cm) as r:
            assert r.status == expected
    async with http.get("/api/v1/namespaces/default/configmaps/absent") as r:
        assert r.status == 404
    after = await samples()
    assert after[created(201)] - before.get(created(201), 0) == 1
    assert after[created(409)] - before.get(created(409), 0) == 2
    assert after['corral_apiserver_requests_total{code="404",resource="configmaps",verb="get"}'] == 1
    assert after[timed] - before.get(timed, 0) == 3


async def test_a_patch_that_pins_a_stale_resource_version_is_a_conflict_and_changes_nothing(server):
    async with server.client() as c:
        created = await c.create(pod("pinned"), raw=True)
        stale = created["metadata"]["resourceVersion"]
        await c.patch("pods", "pinned", {"metadata": {"labels": {"by": "someone-else"}}}, "default")
        for patch, patch_type in (({"metadata": {"resourceVersion": stale, "labels": {"by": "me"}}}, "merge"),
                                  ([{"op": "replace", "path": "/metadata/resourceVersion", "value": stale},
                                    {"op": "add", "path": "/metadata/labels/by", "value": "me"}], "json")):
            with pytest.raises(Conflict):
                await c.patch("pods", "pinned", patch, "default", patch_type=patch_type)
        current = await c.get("pods", "pinned", "default", raw=True)
        assert current["metadata"]["labels"] == {"by": "someone-else"}
        fresh = current["metadata"]["resourceVersion"]
        done = await c.patch("pods", "pinned", {"metadata": {"resourceVersion": fresh, "labels": {"by": "me"}}},
                             "default", raw=True)
        assert done["metadata"]["labels"] == {"by": "me"}


async def test_delete_with_a_stale_resource_version_precondition_is_a_conflict_and_deletes_nothing(server):
    async with server.client() as c:
        created = await c.create(pod("guarded"), raw=True)
        await c.patch("pods", "guarded", {"metadata": {"labels": {"changed": "yes"}}}, "default")
        with pytest.raises(Conflict):
            await c.delete("pods", "guarded", "default", resource_version=created["metadata"]["resourceVersion"])
        with pytest.raises(Conflict):
            await c.delete("pods", "guarded", "default", uid="not-its-uid")
        current = await c.get("pods", "guarded", "default", raw=True)
        await c.delete("pods", "guarded", "default", resource_version=current["metadata"]["resourceVersion"],
                       uid=current["metadata"]["uid"])
        with pytest.raises(NotFound):
            await c.get("pods", "guarded", "default")


@pytest.mark.parametrize("query, body, message", [
    pytest.param("?dryRun=true", None, 'dryRun: Unsupported value: "true": supported values: "All"',
                 id="a dryRun other than All is refused, never taken as a real delete"),
    pytest.param("", b'{"gracePeriodSeconds": "soon"}', "gracePeriodSeconds must be an integer",
                 id="a grace period that is not a number"),
    pytest.param("", b'{"gracePeriodSeconds": true}', "gracePeriodSeconds must be an integer",
                 id="a grace period that is a boolean"),
    pytest.param("", b'{"preconditions": 5}', "preconditions must be an object", id="preconditions not an object"),
    pytest.param("", b'{"preconditions": {"uid": 7}}', "preconditions must be an object", id="a uid not a string"),
    pytest.param("", b'{"dryRun": "All"}', "DeleteOptions.dryRun must be a list", id="dryRun not a list"),
    pytest.param("", b'{"dryRun": ["Yes"]}', 'DeleteOptions.dryRun: Unsupported value: "Yes"', id="dryRun of another value"),
    pytest.param("", b"[1]", "must be a JSON object", id="delete options that are not an object"),
])
async def test_malformed_delete_options_are_a_400_and_delete_nothing(http, query, body, message):
    async with http.post("/api/v1/namespaces/default/pods", json=pod("keep")) as r:
        assert r.status == 201
    async with http.delete(f"/api/v1/namespaces/default/pods/keep{query}", data=body,
                           headers={"Content-Type": "application/json"}) as r:
        status = await r.json()
        assert (r.status, status["reason"]) == (400, "BadRequest") and message in status["message"], status
    async with http.get("/api/v1/namespaces/default/pods/keep") as r:
        assert "deletionTimestamp" not in (await r.json())["metadata"]


async def test_dry_run_writes_nothing_on_any_verb_and_anything_but_all_is_refused(http):
    async with http.post("/api/v1/namespaces/default/pods?dryRun=true", json=pod("real")) as r:
        assert r.status == 400
    imagined = pod("imagined")
    imagined["spec"]["containers"][0]["securityContext"] = {"runAsNonRoot": True}
    async with http.post("/api/v1/namespaces/default/pods?dryRun=All", json=imagined) as r:
        assert r.status == 201 and (await r.json())["metadata"]["name"] == "imagined"
        # the warnings a real create would give (kubectl --dry-run=server shows them)
        assert any("spec.containers[0].securityContext" in w for w in r.headers.getall("Warning", [])), r.headers
    assert await pod_count(http) == 0
    for name in ("a", "b"):
        async with http.post("/api/v1/namespaces/default/pods", json=pod(name)) as r:
            assert r.status == 201
    async with http.post("/api/v1/namespaces/default/pods", json=pod("a")) as r:
        status = await r.json()
        assert r.status == 409 and status["reason"] == "AlreadyExists" and status["message"] == 'pods "a" already exists'
        assert status["details"] == {"name": "a", "kind": "pods"}
    async with http.delete("/api/v1/namespaces/default/pods?dryRun=All") as r:
        assert r.status == 200 and len((await r.json())["items"]) == 2
    async with http.get("/api/v1/pods") as r:
        assert all("deletionTimestamp" not in p["metadata"] for p in (await r.json())["items"])
    async with http.patch("/api/v1/namespaces/default/pods/a?dryRun=All", json={"metadata": {"labels": {"x": "y"}}},
                          headers={"Content-Type": "application/merge-patch+json"}) as r:
        assert r.status == 200 and (await r.json())["metadata"]["labels"] == {"x": "y"}
    async with http.get("/api/v1/namespaces/default/pods/a") as r:
        assert "labels" not in (await r.json())["metadata"]
