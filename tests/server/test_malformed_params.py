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
