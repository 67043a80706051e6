"""Server-side printing: the Accept header kubectl sends gets a meta.k8s.io Table (get, list, watch),
rows carry what includeObject asks for, and metadata-only renderings are given as Kubernetes gives them."""

from __future__ import annotations

import asyncio
import json

import pytest

KUBECTL_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
                  "application/json")


def pod(name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "t"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


async def create(http, name: str, **spec) -> None:
    async with http.post("/api/v1/namespaces/default/pods", json=pod(name, **spec)) as r:
        assert r.status == 201, await r.text()


async def get(http, path: str, accept: str = KUBECTL_ACCEPT, **params) -> tuple[int, dict]:
    async with http.get(path, headers={"Accept": accept}, params=params) as r:
        return r.status, await r.json()


async def test_a_list_is_a_table_of_kubernetes_pod_columns_when_kubectl_asks(http):
    await create(http, "a")
    await create(http, "b", nodeName="n1")
    code, table = await get(http, "/api/v1/namespaces/default/pods", limit="1")
    assert code == 200 and (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    names = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
    assert names == [("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0), ("IP", 1), ("Node", 1),
                     ("Nominated Node", 1), ("Readiness Gates", 1)]
    assert [r["cells"][:4] for r in table["rows"]] == [["a", "0/1", "Pending", "0"]]
    assert table["metadata"]["continue"] and table["metadata"]["resourceVersion"]  # kubectl pages with limit=500
    row = table["rows"][0]
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["labels"] == {"app": "t"}
    assert "spec" not in row["object"]
    code, rest = await get(http, "/api/v1/namespaces/default/pods", **{"continue": table["metadata"]["continue"]})
    assert [r["cells"][0] for r in rest["rows"]] == ["b"] and rest["rows"][0]["cells"][6] == "n1"


async def test_one_object_is_a_table_of_one_row_and_include_object_says_what_the_row_carries(http):
    await create(http, "one")
    code, table = await get(http, "/api/v1/namespaces/default/pods/one", includeObject="Object")
    assert code == 200 and len(table["rows"]) == 1
    assert table["rows"][0]["object"]["spec"]["containers"][0]["image"] == "busybox"
    code, table = await get(http, "/api/v1/namespaces/default/pods/one", includeObject="None")
    assert code == 200 and "object" not in table["rows"][0]
    code, status = await get(http, "/api/v1/namespaces/default/pods/one", includeObject="Everything")
    assert code == 400 and "includeObject" in status["message"]


async def test_nodes_namespaces_and_priority_classes_have_their_own_columns(http):
    async with http.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}}, "spec": {"unschedulable": True}}) as r:
        assert r.status == 201
    _, nodes = await get(http, "/api/v1/nodes")
    assert [c["name"] for c in nodes["columnDefinitions"]][:5] == ["Name", "Status", "Roles", "Age", "Version"]
    assert nodes["rows"][0]["cells"][:3] == ["n1", "Unknown,SchedulingDisabled", "worker"]
    _, ns = await get(http, "/api/v1/namespaces/default")
    assert ns["rows"][0]["cells"][:2] == ["default", "Active"]
    _, pcs = await get(http, "/apis/scheduling.k8s.io/v1/priorityclasses/system-node-critical")
    assert pcs["rows"][0]["cells"][:3] == ["system-node-critical", 2000001000, False]


async def test_a_watch_sends_one_row_per_event_with_the_columns_in_the_first_only(http):
    await create(http, "w1")
    async with http.get("/api/v1/namespaces/default/pods", headers={"Accept": KUBECTL_ACCEPT},
                        params={"watch": "1", "resourceVersion": "0"}) as r:
        first = json.loads(await asyncio.wait_for(r.content.readline(), 10))
        await create(http, "w2")
        second = json.loads(await asyncio.wait_for(r.content.readline(), 10))
    assert first["type"] == "ADDED" and first["object"]["kind"] == "Table"
    assert first["object"]["columnDefinitions"] and first["object"]["rows"][0]["cells"][0] == "w1"
    assert second["object"]["columnDefinitions"] is None and second["object"]["rows"][0]["cells"][0] == "w2"


async def test_metadata_only_renderings(http):
    await create(http, "m")
    accept = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"
    code, listed = await get(http, "/api/v1/namespaces/default/pods", accept)
    assert code == 200 and listed["kind"] == "PartialObjectMetadataList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["m"] and "spec" not in listed["items"][0]
    code, one = await get(http, "/api/v1/namespaces/default/pods/m",
                          "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io")
    assert code == 200 and one["kind"] == "PartialObjectMetadata" and one["metadata"]["name"] == "m"


@pytest.mark.parametrize("accept, code, kind", [
    ("application/json", 200, "PodList"),
    ("*/*", 200, "PodList"),
    ("", 200, "PodList"),
    ("application/json;as=Table;v=v2;g=meta.k8s.io, application/json", 200, "PodList"),
    ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", 200, "Table"),
    ("application/json;as=Table;v=v2;g=meta.k8s.io", 406, "Status"),
    ("application/json;as=Pancake;v=v1;g=meta.k8s.io", 406, "Status"),
])
async def test_the_first_rendering_corral_can_give_wins_and_none_at_all_is_406(http, accept, code, kind):
    got_code, body = await get(http, "/api/v1/namespaces/default/pods", accept)
    assert (got_code, body["kind"]) == (code, kind)
    if code == 406:
        assert body["reason"] == "NotAcceptable" and "Table" in body["message"]


async def test_a_large_list_is_rendered_as_a_table_too(http):
    """Past 256 KiB the rendering runs off the event loop; the answer is the same."""
    for i in range(300):
        await create(http, f"big-{i:03d}", nodeName="n1", hostname="x" * 600)
    async with http.get("/api/v1/namespaces/default/pods") as r:
        assert len(await r.read()) > 256 * 1024
    code, table = await get(http, "/api/v1/namespaces/default/pods")
    assert code == 200 and len(table["rows"]) == 300 and table["rows"][-1]["cells"][0] == "big-299"
