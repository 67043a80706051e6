"""Malformed query parameters and out-of-range numbers: a 4xx Status naming the parameter, never a 500."""

from __future__ import annotations

import json

import pytest


def pod(name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


@pytest.mark.parametrize("query, message", [
    pytest.param("limit=" + "9" * 40, "limit", id="a limit beyond int64"),
    pytest.param("limit=-1", "limit", id="a negative limit"),
    pytest.param("limit=abc", "limit", id="a limit that is not a number"),
    pytest.param("continue=" + "x" * 5000, "continue", id="a continue token that is not one"),
    pytest.param("labelSelector=a%20in%20()", "labelSelector", id="an empty set in a selector"),
    pytest.param("resourceVersion=abc", "resourceVersion", id="a resourceVersion that is not a number"),
    pytest.param("timeoutSeconds=" + "9" * 40, "timeoutSeconds", id="a timeout beyond int64"),
])
async def test_a_malformed_list_parameter_is_a_400_naming_it(http, query, message):
    async with http.get(f"/api/v1/namespaces/default/pods?{query}") as r:
        status = await r.json()
        assert r.status == 400 and status["kind"] == "Status" and message in status["message"], (r.status, status)


@pytest.mark.parametrize("spec, field", [
    pytest.param({"terminationGracePeriodSeconds": 1e30}, "spec.terminationGracePeriodSeconds", id="a grace period of 1e30"),
    pytest.param({"terminationGracePeriodSeconds": 2**63}, "spec.terminationGracePeriodSeconds", id="a grace period past int64"),
    pytest.param({"terminationGracePeriodSeconds": -5}, "spec.terminationGracePeriodSeconds", id="a negative grace period"),
    pytest.param({"terminationGracePeriodSeconds": 10**15}, "spec.terminationGracePeriodSeconds",
                 id="a grace period whose deletion time could not be written"),
])
async def test_numbers_out_of_their_range_are_invalid_and_create_nothing(http, spec, field):
    async with http.post("/api/v1/namespaces/default/pods", data=json.dumps(pod("n", **spec)),
                         headers={"Content-Type": "application/json"}) as r:
        status = await r.json()
        assert r.status in (400, 422) and field in status["message"], (r.status, status)
    async with http.get("/api/v1/pods") as r:
        assert (await r.json())["items"] == []


@pytest.mark.parametrize("query", ["gracePeriodSeconds=1000000000000000", "gracePeriodSeconds=-1"])
async def test_a_delete_grace_period_out_of_range_is_a_400_and_deletes_nothing(http, query):
    async with http.post("/api/v1/namespaces/default/pods", json=pod("keep")) as r:
        assert r.status == 201
    async with http.delete(f"/api/v1/namespaces/default/pods/keep?{query}") as r:
        status = await r.json()
        assert r.status == 400 and "gracePeriodSeconds must be between 0 and" in status["message"], status
    async with http.get("/api/v1/namespaces/default/pods/keep") as r:
        assert "deletionTimestamp" not in (await r.json())["metadata"]


@pytest.mark.parametrize("cpu", ["1e400", "9999999999999Ei", "1e19", "100000000000000000000", "1e9999999", "1" * 5000])
async def test_a_quantity_beyond_what_kubernetes_can_hold_is_invalid(http, cpu):
    body = pod("q")
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    async with http.post("/api/v1/namespaces/default/pods", json=body) as r:
        status = await r.json()
        assert r.status == 422 and "spec.containers[0].resources.requests[cpu]" in status["message"], status


@pytest.mark.parametrize("body, content_type, message", [
    pytest.param(b'{"metadata": {"name": "\xff\xfe"}}', "application/merge-patch+json", "not valid JSON",
                 id="invalid UTF-8"),
    pytest.param(b'{"spec": {"containers": [{"image": "x"}]}}', "application/strategic-merge-patch+json",
                 "has no 'name'", id="a strategic merge patch item without its merge key"),
    pytest.param(b'{"metadata": {"$patch": "explode"}}', "application/strategic-merge-patch+json",
                 "unknown $patch directive", id="a strategic merge patch directive that does not exist"),
    pytest.param(b'{"metadata": {"labels": {"$bogus": 1}}}', "application/strategic-merge-patch+json",
                 "unknown directive", id="an unknown strategic merge patch directive key"),
    pytest.param(b'[{"op": "replace", "path": 5, "value": 1}]', "application/json-patch+json", "path",
                 id="a JSON-patch path that is not a string"),
    pytest.param(b'[{"op": "explode", "path": "/metadata/labels", "value": 1}]', "application/json-patch+json",
                 "explode", id="a JSON-patch op that does not exist"),
    pytest.param(b'[{"op": "add", "path": "/metadata/labels/a"}]', "application/json-patch+json", "value",
                 id="a JSON-patch add without a value"),
    pytest.param(b'[5]', "application/json-patch+json", "operation", id="a JSON-patch operation that is not an object"),
    pytest.param(json.dumps([{"op": "add", "path": "/metadata/annotations", "value": {"a": "x" * 1000}}]
                            + [{"op": "copy", "from": "/metadata/annotations", "path": f"/metadata/annotations/k{i}"}
                               for i in range(40)]).encode(), "application/json-patch+json",
                 "copies would add more than", id="JSON-patch copies that double the object forty times"),
])
async def test_malformed_patches_are_a_400_and_change_nothing(http, body, content_type, message):
    async with http.post("/api/v1/namespaces/default/pods", json=pod("p")) as r:
        assert r.status == 201
        before = (await r.json())["metadata"]["resourceVersion"]
    async with http.patch("/api/v1/namespaces/default/pods/p", data=body, headers={"Content-Type": content_type}) as r:
        status = await r.json()
        assert r.status in (400, 422) and message in status["message"], (r.status, status)
    async with http.get("/api/v1/namespaces/default/pods/p") as r:
        assert (await r.json())["metadata"]["resourceVersion"] == before


@pytest.mark.parametrize("content_type, message", [
    pytest.param("application/apply-patch+yaml", "server-side apply (application/apply-patch+yaml) is not supported",
                 id="server-side apply"),
    pytest.param("application/json", "the patch type 'application/json' is not supported", id="plain JSON"),
])
async def test_patch_types_corral_does_not_apply_are_a_415_naming_those_it_does(http, content_type, message):
    async with http.post("/api/v1/namespaces/default/pods", json=pod("t")) as r:
        before = (await r.json())["metadata"]["resourceVersion"]
    async with http.patch("/api/v1/namespaces/default/pods/t", data=b'{"metadata": {"labels": {"a": "b"}}}',
                          headers={"Content-Type": content_type}) as r:
        status = await r.json()
    assert r.status == 415 and status["reason"] == "UnsupportedMediaType" and message in status["message"]
    assert "application/strategic-merge-patch+json" in status["message"]
    async with http.get("/api/v1/namespaces/default/pods/t") as r:
        assert (await r.json())["metadata"]["resourceVersion"] == before


async def test_a_resource_version_from_the_future_is_a_409_for_writes_and_kubernetes_504_for_watches(http):
    import time

    async with http.post("/api/v1/namespaces/default/pods", json=pod("f")) as r:
        current = (await r.json())
    future = str(int(current["metadata"]["resourceVersion"]) + 1000)
    started = time.monotonic()
    stale = dict(current, metadata=dict(current["metadata"], resourceVersion=future, labels={"a": "b"}))
    async with http.put("/api/v1/namespaces/default/pods/f", json=stale) as r:
        assert r.status == 409 and (await r.json())["reason"] == "Conflict"
        assert (await r.json())["details"]["name"] == "f"
    async with http.patch("/api/v1/namespaces/default/pods/f", json={"metadata": {"resourceVersion": future}},
                          headers={"Content-Type": "application/merge-patch+json"}) as r:
        assert r.status == 409
    assert time.monotonic() - started < 2  # answered at once, not after a timeout
    started = time.monotonic()
    async with http.get(f"/api/v1/namespaces/default/pods?watch=true&resourceVersion={future}") as r:
        status = await r.json()
    assert r.status == 504 and status["reason"] == "Timeout"
    assert status["message"].startswith(f"Too large resource version: {future}, current: ")
    assert status["details"]["causes"] == [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
    assert status["details"]["retryAfterSeconds"] == 1
    assert 2.5 < time.monotonic() - started < 6  # Kubernetes' 3 s, not 10
    async with http.get("/api/v1/namespaces/default/pods/f") as r:
        assert "labels" not in (await r.json())["metadata"]


async def test_unknown_field_names_with_control_characters_or_by_the_hundred_give_bounded_warnings(http):
    """Field names are the client's text and end up in Warning headers: a newline in one used to
    make aiohttp drop the connection without an answer (found by the schemathesis run)."""
    body = pod("w")
    body["x\r\nInjected: yes"] = 1
    body.update({f"extra{i}": i for i in range(100)})
    async with http.post("/api/v1/namespaces/default/pods", json=body) as r:
        assert r.status == 201, await r.text()
        warnings = r.headers.getall("Warning")
        assert "Injected" not in r.headers
    assert len(warnings) == 20 and warnings[-1] == '299 - "82 more warnings not shown"'
    assert any("x\\u000d\\u000aInjected: yes" in w for w in warnings), warnings[:3]


async def test_resource_version_match_exact_lists_the_past_and_is_checked_as_kubernetes_checks_it(http, server):
    async with http.post("/api/v1/namespaces/default/pods", json=pod("first")) as r:
        then = (await r.json())["metadata"]["resourceVersion"]
    async with http.post("/api/v1/namespaces/default/pods", json=pod("second")) as r:
        assert r.status == 201
    async with http.get("/api/v1/namespaces/default/pods",
                        params={"resourceVersion": then, "resourceVersionMatch": "Exact"}) as r:
        past = await r.json()
    assert [p["metadata"]["name"] for p in past["items"]] == ["first"] and past["metadata"]["resourceVersion"] == then
    async with http.get("/api/v1/namespaces/default/pods",
                        params={"resourceVersion": then, "resourceVersionMatch": "NotOlderThan"}) as r:
        assert [p["metadata"]["name"] for p in (await r.json())["items"]] == ["first", "second"]
    for params, message in (
            ({"resourceVersionMatch": "Exact"}, "forbidden unless resourceVersion is provided"),
            ({"resourceVersion": then, "resourceVersionMatch": "Newest"}, 'Unsupported value: "Newest"'),
            ({"resourceVersion": "0", "resourceVersionMatch": "Exact"}, 'forbidden for resourceVersion "0"'),
            ({"resourceVersion": then, "resourceVersionMatch": "Exact", "watch": "true"}, "forbidden for watch")):
        async with http.get("/api/v1/namespaces/default/pods", params=params) as r:
            status = await r.json()
            assert r.status == 400 and message in status["message"], (params, status)
    await server.compact(server.store.revision)  # the past is gone: 410, as an expired watch is
    async with http.get("/api/v1/namespaces/default/pods",
                        params={"resourceVersion": then, "resourceVersionMatch": "Exact"}) as r:
        status = await r.json()
    assert r.status == 410 and status["reason"] == "Expired" and "too old resource version" in status["message"]
