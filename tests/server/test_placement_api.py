"""Placements through the API: created with defaults, refused by field path, served as a Table
with Fleet's columns, the placement type fixed once created."""

from __future__ import annotations

from tests.server.test_tables import get

BASE = "/apis/placement.corral.dev/v1/namespaces/default/placements"


def placement(name: str, **policy) -> dict:
    return {"apiVersion": "placement.corral.dev/v1", "kind": "Placement", "metadata": {"name": name},
            "spec": {"template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                     "policy": policy}}


async def test_a_placement_is_created_with_its_defaults_and_listed_with_its_columns(http):
    obj = placement("cache", placementType="PickN", numberOfNodes=3,
                    topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone"}])
    obj["spec"]["strategy"] = {"rollingUpdate": {"maxSurge": 1}}
    async with http.post(BASE, json=obj) as r:
        assert r.status == 201, await r.text()
        created = await r.json()
    assert created["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {
        "maxUnavailable": "25%", "maxSurge": 1, "unavailablePeriodSeconds": 60}}
    assert created["spec"]["policy"]["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "DoNotSchedule"
    _, table = await get(http, BASE)
    assert [c["name"] for c in table["columnDefinitions"]][:6] == ["Name", "Type", "Desired", "Scheduled", "Available",
                                                                  "Age"]
    assert table["rows"][0]["cells"][:5] == ["cache", "PickN", 0, 0, 0]


async def test_a_bad_placement_is_refused_with_the_field_and_nothing_is_stored(http):
    async with http.post(BASE, json=placement("bad", placementType="PickFixed")) as r:
        assert r.status == 422
        status = await r.json()
    assert status["reason"] == "Invalid"
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.policy.nodeNames"]
    async with http.get(f"{BASE}/bad") as r:
        assert r.status == 404


async def test_the_placement_type_cannot_change_but_the_count_can(http):
    async with http.post(BASE, json=placement("web", placementType="PickN", numberOfNodes=1)) as r:
        assert r.status == 201
    async with http.patch(f"{BASE}/web", json={"spec": {"policy": {"numberOfNodes": 4}}},
                          headers={"Content-Type": "application/merge-patch+json"}) as r:
        assert r.status == 200 and (await r.json())["spec"]["policy"]["numberOfNodes"] == 4
    async with http.patch(f"{BASE}/web", json={"spec": {"policy": {"placementType": "PickAll", "numberOfNodes": None}}},
                          headers={"Content-Type": "application/merge-patch+json"}) as r:
        assert r.status == 422
        assert (await r.json())["details"]["causes"][0]["field"] == "spec.policy.placementType"
