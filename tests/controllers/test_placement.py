"""The Placement controller, synced by hand on a fake clock: a copy on each node the scheduler
selected, nothing elsewhere, a template change rolled out within maxUnavailable and maxSurge,
Applied and Available said in the status, the scheduler's condition left alone."""

from __future__ import annotations

import copy

import pytest

from corral.api.resources import by_kind
from corral.controllers.workloads.node_rollout import HASH_LABEL
from corral.controllers.placement import SNAPSHOT_LIMIT, PlacementController
from corral.server.rest import WriteOptions
from corral.testing.builders import NodeBuilder
from corral.testing.server import running_server

PLACEMENTS, PODS, NODES = by_kind("Placement"), by_kind("Pod"), by_kind("Node")
OPTS = WriteOptions(warn=False)
NOW = 2_000_000_000.0
SCHEDULED = {"type": "Scheduled", "status": "True", "reason": "Scheduled", "message": "the scheduler's",
             "lastTransitionTime": "2030-01-01T00:00:00Z"}


def placement(image: str = "busybox:1.36", **rolling) -> dict:
    return {"apiVersion": "placement.corral.dev/v1", "kind": "Placement", "metadata": {"name": "web"},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}},
                     "policy": {"placementType": "PickN", "numberOfNodes": 3,
                                "tolerations": [{"key": "dedicated", "operator": "Exists"}]},
                     **({"strategy": {"type": "RollingUpdate", "rollingUpdate": rolling}} if rolling else {})}}


class Harness:
    def __init__(self, api) -> None:
        self.api = api
        self.now = NOW
        self.controller = PlacementController(api, clock=lambda: self.now)

    async def decide(self, *nodes: str) -> None:
        """What the scheduler writes: these nodes selected, its condition."""
        await self.api.cache.wait_consistent()
        current = (await self.api.current(PLACEMENTS, "default", "web")).obj
        status = {**(current.get("status") or {}),
                  "decisions": [{"nodeName": n, "selected": True} for n in nodes] + [
                      {"nodeName": "n9", "selected": False, "reason": "not among the best"}],
                  "conditions": [c for c in (current.get("status") or {}).get("conditions") or ()
                                 if c["type"] != "Scheduled"] + [SCHEDULED]}
        await self.api.update(PLACEMENTS, "default", "web", {**current, "status": status}, OPTS, subresource="status")

    async def sync(self):
        await self.api.cache.wait_consistent()
        self.controller.reset()  # the index of its pods, built from the cache as at a start
        self.controller.initial_keys()
        return await self.controller.sync(PLACEMENTS.key("default", "web"))

    async def pods(self) -> dict[str, list[dict]]:
        """Live copies by the node they are for."""
        await self.api.cache.wait_consistent()
        out: dict[str, list[dict]] = {}
        for r in self.api.cache.items(PODS.store_prefix):
            if r.obj["metadata"].get("deletionTimestamp"):
                continue
            term = r.obj["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            out.setdefault(term["nodeSelectorTerms"][0]["matchFields"][0]["values"][0], []).append(r.obj)
        return out

    async def ready(self, since: str = "2030-01-01T00:00:00Z") -> None:
        """What the scheduler and agents do: bind each copy to its node, report it ready."""
        for node, pods in (await self.pods()).items():
            for pod in pods:
                name = pod["metadata"]["name"]
                current = (await self.api.current(PODS, "default", name)).obj
                if current.get("status", {}).get("phase") == "Running":
                    continue
                await self.api.bind("default", name, {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                                                      "target": {"kind": "Node", "name": node}}, OPTS)
                current = (await self.api.current(PODS, "default", name)).obj
                status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True",
                                                              "lastTransitionTime": since}]}
                await self.api.update(PODS, "default", name, {**current, "status": status}, OPTS, subresource="status")

    async def stored(self) -> dict:
        """A copy of the stored Placement to change (the cache's own object must stay as stored)."""
        return copy.deepcopy((await self.api.current(PLACEMENTS, "default", "web")).obj)

    async def status(self) -> dict:
        await self.api.cache.wait_consistent()
        return (await self.api.current(PLACEMENTS, "default", "web")).obj.get("status") or {}


@pytest.fixture
async def harness(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        for name in ("n1", "n2", "n3", "n4"):
            await server.api.create(NODES, None, NodeBuilder(name).obj, OPTS)
        yield Harness(server.api)


def conditions(status: dict) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or ()}


async def test_a_copy_goes_to_each_selected_node_and_nowhere_else(harness):
    await harness.api.create(PLACEMENTS, "default", placement(), OPTS)
    assert await harness.sync() is None and await harness.pods() == {}  # nothing decided yet
    await harness.decide("n1", "n3")
    await harness.sync()
    pods = await harness.pods()
    assert sorted(pods) == ["n1", "n3"]
    pod = pods["n1"][0]
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "Placement" and HASH_LABEL in pod["metadata"]["labels"]
    assert {"key": "dedicated", "operator": "Exists"} in pod["spec"]["tolerations"]  # the policy's
    assert "nodeName" not in pod["spec"]  # the scheduler binds it
    await harness.sync()
    assert sorted(await harness.pods()) == ["n1", "n3"]  # idempotent
    await harness.decide("n3", "n4")  # the scheduler let n1 go (scaled in) and chose n4
    await harness.sync()
    assert sorted(await harness.pods()) == ["n3", "n4"]


async def test_applied_and_available_follow_the_copies_and_the_schedulers_condition_stays(harness):
    await harness.api.create(PLACEMENTS, "default", placement(), OPTS)
    await harness.decide("n1")
    await harness.sync()
    await harness.sync()
    assert conditions(await harness.status())["Applied"] == ("True", "Applied")
    await harness.decide("n1", "n2")
    await harness.sync()
    assert conditions(await harness.status())["Applied"] == ("False", "Applying")  # n2's copy made this sync
    await harness.sync()  # as the copies' own events bring it back
    status = await harness.status()
    assert conditions(status) == {"Scheduled": ("True", "Scheduled"), "Applied": ("True", "Applied"),
                                  "Available": ("False", "NotAvailableYet")}
    assert status["available"] == 0
    await harness.ready(since="2033-05-18T03:33:00Z")  # ready 20 s before the fake clock's now
    delay = await harness.sync()
    assert delay == 60.0 and (await harness.status())["available"] == 0  # unavailablePeriodSeconds not over
    harness.now += 60
    await harness.sync()
    status = await harness.status()
    assert status["available"] == 2 and conditions(status)["Available"] == ("True", "Available")


async def placed_and_ready(harness, **spec) -> None:
    """A Placement of ``spec`` decided onto n1, n2 and n3, its copies made and ready."""
    await harness.api.create(PLACEMENTS, "default", placement(**spec), OPTS)
    await harness.decide("n1", "n2", "n3")
    await harness.sync()
    await harness.ready()
    await harness.sync()


@pytest.mark.parametrize("rolling, at_most_down, at_most_pods", [
    pytest.param({"maxUnavailable": 1, "maxSurge": 0}, 1, 3, id="maxUnavailable 1: one node at a time without a copy"),
    pytest.param({"maxUnavailable": 0, "maxSurge": 1}, 0, 4, id="maxSurge 1: a new copy beside the old before it goes"),
    pytest.param({"maxUnavailable": "50%", "maxSurge": 0}, 1, 3, id="a percentage of unavailable copies rounds down"),
    pytest.param({"maxUnavailable": "10%", "maxSurge": "0%"}, 1, 3,
                 id="budgets that both round to 0 still let one copy at a time be replaced"),
    pytest.param({"maxUnavailable": 0, "maxSurge": "10%"}, 0, 4, id="a percentage of surge rounds up"),
])
async def test_a_template_change_rolls_out_within_the_budgets(harness, rolling, at_most_down, at_most_pods):
    await placed_and_ready(harness, unavailablePeriodSeconds=0, **rolling)
    current = await harness.stored()
    current["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    await harness.api.update(PLACEMENTS, "default", "web", current, OPTS)
    for _ in range(12):
        await harness.sync()
        pods = await harness.pods()
        available = [n for n, ps in pods.items() if any(p["status"].get("phase") == "Running" for p in ps)]
        assert 3 - len(available) <= at_most_down and sum(len(ps) for ps in pods.values()) <= at_most_pods
        await harness.ready()
    pods = await harness.pods()
    assert sorted(pods) == ["n1", "n2", "n3"]
    assert {p["spec"]["containers"][0]["image"] for ps in pods.values() for p in ps} == {"busybox:1.37"}
    assert all(len(ps) == 1 for ps in pods.values())


async def test_max_unavailable_lets_that_many_copies_be_replaced_at_once(harness):
    await placed_and_ready(harness, unavailablePeriodSeconds=0, maxUnavailable=2, maxSurge=0)
    current = await harness.stored()
    current["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    await harness.api.update(PLACEMENTS, "default", "web", current, OPTS)
    await harness.sync()
    assert len(await harness.pods()) == 1  # two of the three old copies went at once


@pytest.mark.parametrize("rolling, at_least_available, at_most_pods", [
    pytest.param({"maxUnavailable": 0, "maxSurge": 1}, 2, 3, id="maxSurge 1: a new copy first, an old one goes once it is available"),
    pytest.param({"maxUnavailable": 1, "maxSurge": 0}, 1, 2, id="maxUnavailable 1: an old copy goes, then its replacement comes"),
])
async def test_a_new_decision_moves_the_copies_within_the_budgets(harness, rolling, at_least_available, at_most_pods):
    await harness.api.create(PLACEMENTS, "default", placement(unavailablePeriodSeconds=0, **rolling), OPTS)
    await harness.decide("n1", "n2")
    await harness.sync()
    await harness.ready()
    await harness.sync()
    await harness.decide("n3", "n4")  # a new policy chose two other nodes
    for _ in range(10):
        await harness.sync()
        pods = await harness.pods()
        running = sum(1 for ps in pods.values() for p in ps if p["status"].get("phase") == "Running")
        assert running >= at_least_available and sum(len(ps) for ps in pods.values()) <= at_most_pods
        await harness.ready()
    assert sorted(await harness.pods()) == ["n3", "n4"]


REVISIONS = by_kind("ControllerRevision")


async def snapshots(harness) -> dict[int, dict]:
    await harness.api.cache.wait_consistent()
    return {int(r.obj["revision"]): r.obj for r in harness.api.cache.items(REVISIONS.store_prefix)
            if not r.obj["metadata"].get("deletionTimestamp")}


async def change_policy(harness, **changes) -> dict:
    current = await harness.stored()
    current["spec"]["policy"].update(changes)
    await harness.api.update(PLACEMENTS, "default", "web", current, OPTS)
    return (await harness.api.current(PLACEMENTS, "default", "web")).obj


async def test_each_policy_is_kept_as_a_snapshot_and_a_count_change_updates_the_current_one(harness):
    from corral.api.kinds.placement import snapshot_name
    from corral.controllers.placement import SNAPSHOT_LIMIT

    await harness.api.create(PLACEMENTS, "default", placement(), OPTS)
    first = (await harness.api.current(PLACEMENTS, "default", "web")).obj
    await harness.sync()
    (one,) = (await snapshots(harness)).values()
    meta = one["metadata"]
    assert sorted(one) == ["apiVersion", "data", "kind", "metadata", "revision"]  # nothing else written
    assert sorted(meta) == ["annotations", "creationTimestamp", "generation", "labels", "name", "namespace",
                            "ownerReferences", "resourceVersion", "uid"]
    assert meta["name"] == snapshot_name(first) and one["revision"] == 1
    assert meta["labels"]["placement.corral.dev/name"] == "web" and meta["labels"]["placement.corral.dev/policy-index"] == "1"
    assert meta["annotations"] == {"placement.corral.dev/number-of-nodes": "3"}
    assert meta["ownerReferences"][0]["uid"] == first["metadata"]["uid"]  # removed with the Placement
    assert one["data"] == {"policy": {"placementType": "PickN",
                                      "tolerations": [{"key": "dedicated", "operator": "Exists"}]}}
    await change_policy(harness, numberOfNodes=5)  # scaling: the same snapshot, its count updated
    await harness.sync()
    (same,) = (await snapshots(harness)).values()
    assert same["metadata"]["name"] == meta["name"] and same["data"] == one["data"]
    assert same["metadata"]["annotations"] == {"placement.corral.dev/number-of-nodes": "5"}
    second = await change_policy(harness, tolerations=[])  # another policy: a second snapshot
    await harness.sync()
    kept = await snapshots(harness)
    assert sorted(kept) == [1, 2] and kept[2]["metadata"]["name"] == snapshot_name(second) != meta["name"]
    assert kept[2]["data"] == {"policy": {"placementType": "PickN", "tolerations": []}}
    assert kept[1]["data"] == one["data"]  # never rewritten
    await change_policy(harness, tolerations=[{"key": "dedicated", "operator": "Exists"}])  # changed back
    await harness.sync()
    kept = await snapshots(harness)
    assert sorted(kept) == [2, 3] and kept[3]["metadata"]["name"] == meta["name"]  # renumbered the newest
    assert kept[3]["metadata"]["labels"]["placement.corral.dev/policy-index"] == "3"
    for i in range(SNAPSHOT_LIMIT + 2):
        await change_policy(harness, tolerations=[{"key": f"k{i}", "operator": "Exists"}])
        await harness.sync()
    kept = await snapshots(harness)
    assert len(kept) == SNAPSHOT_LIMIT + 1 and max(kept) == 3 + SNAPSHOT_LIMIT + 2  # the oldest went


SENTINEL = "2001-01-01T00:00:00Z"


async def test_the_status_in_full_each_condition_dated_when_its_status_changed(harness):
    await harness.api.create(PLACEMENTS, "default", placement(), OPTS)
    await harness.decide("n1", "n2")
    assert await harness.sync() is None  # copies not ready yet: nothing to wait for
    status = await harness.status()
    assert status["available"] == 0 and status["decisions"][0] == {"nodeName": "n1", "selected": True}
    applied, available = status["conditions"][1:]
    assert status["conditions"][0] == SCHEDULED  # the scheduler's, first as it was
    assert {k: v for k, v in applied.items() if k != "lastTransitionTime"} == {
        "type": "Applied", "status": "False", "reason": "Applying", "observedGeneration": 1,
        "message": "0 of 2 selected node(s) have a copy of the current template"}
    assert {k: v for k, v in available.items() if k != "lastTransitionTime"} == {
        "type": "Available", "status": "False", "reason": "NotAvailableYet", "observedGeneration": 1,
        "message": "0 of 2 cop(ies) available"}
    assert applied["lastTransitionTime"].endswith("Z") and available["lastTransitionTime"].endswith("Z")
    current = (await harness.api.current(PLACEMENTS, "default", "web")).obj  # both dated long ago
    dated = [{**c, "lastTransitionTime": SENTINEL} if c["type"] != "Scheduled" else c for c in status["conditions"]]
    await harness.api.update(PLACEMENTS, "default", "web", {**current, "status": {**status, "conditions": dated}},
                             OPTS, subresource="status")
    await harness.sync()  # both copies there now: Applied changes, Available does not
    status = await harness.status()
    applied, available = status["conditions"][1:]
    assert (applied["status"], applied["reason"], applied["message"]) == (
        "True", "Applied", "2 of 2 selected node(s) have a copy of the current template")
    assert applied["lastTransitionTime"] != SENTINEL and available["lastTransitionTime"] == SENTINEL
    assert [c["type"] for c in status["conditions"]] == ["Scheduled", "Applied", "Available"]  # one of each
    current = await harness.stored()
    current["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    await harness.api.update(PLACEMENTS, "default", "web", current, OPTS)
    await harness.sync()
    status = await harness.status()
    assert [(c["type"], c["status"], c.get("observedGeneration")) for c in status["conditions"][1:]] == [
        ("Applied", "False", 2), ("Available", "False", 2)]  # of the changed spec
    assert status["conditions"][1]["message"] == "0 of 2 selected node(s) have a copy of the current template"


async def test_a_copy_is_available_after_the_placements_own_unavailable_period(harness):
    await harness.api.create(PLACEMENTS, "default", placement(unavailablePeriodSeconds=120), OPTS)
    await harness.decide("n1")
    await harness.sync()
    await harness.ready(since="2033-05-18T03:33:00Z")  # ready 20 s before the fake clock's now
    assert await harness.sync() == 120.0 and (await harness.status())["available"] == 0
    harness.now += 99  # 119 s ready
    await harness.sync()
    assert (await harness.status())["available"] == 0
    harness.now += 1
    await harness.sync()
    assert (await harness.status())["available"] == 1


async def test_a_status_write_that_finds_the_placement_changed_or_gone_is_dropped(harness):
    await harness.api.create(PLACEMENTS, "default", placement(), OPTS)
    stale = (await harness.api.current(PLACEMENTS, "default", "web")).obj  # the controller's view
    await harness.decide("n1")  # someone wrote meanwhile: 409
    assert await harness.controller._write_status(stale, {"n1"}, {}, "r", 60, NOW) is None
    assert "available" not in await harness.status()  # not written; the change queues it again
    await harness.api.delete(PLACEMENTS, "default", "web", None, None, None)
    assert await harness.controller._write_status(stale, {"n1"}, {}, "r", 60, NOW) is None  # 404


async def test_a_placement_being_deleted_gets_no_copies(harness):
    obj = placement()
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    await harness.api.create(PLACEMENTS, "default", obj, OPTS)
    await harness.decide("n1")
    await harness.api.delete(PLACEMENTS, "default", "web", None, None, None)
    assert (await harness.api.current(PLACEMENTS, "default", "web")).obj["metadata"]["deletionTimestamp"]
    assert await harness.sync() is None
    assert await harness.pods() == {} and await snapshots(harness) == {}


async def test_a_pick_all_placement_keeps_a_snapshot_without_a_count(harness):
    obj = placement()
    obj["spec"]["policy"] = {"placementType": "PickAll"}
    await harness.api.create(PLACEMENTS, "default", obj, OPTS)
    await harness.decide("n1", "n2", "n3", "n4")
    await harness.sync()
    (one,) = (await snapshots(harness)).values()
    assert one["data"] == {"policy": {"placementType": "PickAll"}} and not one["metadata"].get("annotations")
    assert sorted(await harness.pods()) == ["n1", "n2", "n3", "n4"]


async def test_a_settled_placement_is_synced_without_a_single_write(harness, monkeypatch):
    await harness.api.create(PLACEMENTS, "default", placement(unavailablePeriodSeconds=0), OPTS)
    await harness.decide("n1", "n2")
    await harness.sync()
    await harness.ready()
    await harness.sync()
    await change_policy(harness, tolerations=[])  # a second snapshot, then the first policy back
    await harness.sync()
    await change_policy(harness, tolerations=[{"key": "dedicated", "operator": "Exists"}])
    await harness.sync()
    assert (await harness.status())["available"] == 2
    from corral.testing.server import record_writes

    writes = record_writes(harness.api, monkeypatch)
    assert await harness.sync() is None
    assert writes == []  # every copy, snapshot and condition as it should be: nothing to send


async def test_copies_on_nodes_let_go_leave_while_enough_others_stay_available(harness):
    for name in ("n5", "n6"):
        await harness.api.create(NODES, None, NodeBuilder(name).obj, OPTS)
    await harness.api.create(PLACEMENTS, "default", placement(maxUnavailable=1, maxSurge=0,
                                                              unavailablePeriodSeconds=30), OPTS)
    await harness.decide("n1", "n2", "n3", "n4")
    await harness.sync()
    await harness.ready()  # ready since long before the clock's now: available
    await harness.sync()
    await harness.decide("n5", "n6")  # 2 wanted, 1 may be unavailable: one old copy must keep serving
    await harness.sync()
    pods = await harness.pods()
    assert len([n for n in pods if n in ("n1", "n2", "n3", "n4")]) == 1  # three of the four went at once
    assert sorted(n for n in pods if n in ("n5", "n6")) == ["n5"]  # maxSurge 0: one new copy for the one gone


async def test_a_duplicate_copy_on_a_selected_node_does_not_count_as_serving(harness):
    await placed_and_ready(harness, maxUnavailable=0, maxSurge=1, unavailablePeriodSeconds=0)
    dup = copy.deepcopy((await harness.pods())["n1"][0])
    dup["metadata"] = {"name": "web-dup", "labels": dup["metadata"]["labels"],
                       "ownerReferences": dup["metadata"]["ownerReferences"]}
    dup.pop("status", None)
    dup["spec"].pop("nodeName", None)
    await harness.api.create(PODS, "default", dup, OPTS)
    await harness.ready()
    await harness.decide("n1", "n4")  # n1's duplicate goes; of n2 and n3 only one may go while n4 has none
    await harness.sync()
    pods = await harness.pods()
    assert len(pods["n1"]) == 1 and len([n for n in pods if n in ("n2", "n3")]) == 1 and len(pods["n4"]) == 1


async def test_a_move_never_makes_more_than_max_surge_extra_copies(harness):
    await harness.api.create(PLACEMENTS, "default", placement(maxUnavailable=0, maxSurge=1,
                                                              unavailablePeriodSeconds=0), OPTS)
    await harness.decide("n1", "n2")
    await harness.sync()
    await harness.ready()
    await harness.sync()
    await harness.decide("n3", "n4")
    await harness.sync()
    await harness.sync()  # the new copy not ready yet: nothing more may start
    pods = await harness.pods()
    assert sorted(pods) == ["n1", "n2", "n3"] and sum(len(ps) for ps in pods.values()) == 3


def revision(name: str, owner_uid: str, number: int, namespace: str = "default", **meta) -> dict:
    """A ControllerRevision someone else wrote, claiming ``owner_uid`` as its controller."""
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "revision": number, "data": {},
            "metadata": {"name": name, "namespace": namespace, "labels": {HASH_LABEL: "elsewhere"}, **meta,
                         "ownerReferences": [{"apiVersion": "placement.corral.dev/v1", "kind": "Placement",
                                              "name": "web", "uid": owner_uid, "controller": True}]}}


async def test_revisions_of_other_owners_or_namespaces_are_neither_counted_nor_touched(harness):
    await harness.api.create(PLACEMENTS, "default", placement(), OPTS)
    uid = (await harness.api.current(PLACEMENTS, "default", "web")).obj["metadata"]["uid"]
    await harness.api.create(by_kind("Namespace"), None, {"metadata": {"name": "team"}}, OPTS)
    await harness.api.create(REVISIONS, "team", revision("forged", uid, 70, "team"), OPTS)  # an owner in another namespace
    await harness.api.create(REVISIONS, "default", revision("other", "another-uid", 50), OPTS)
    for i in range(SNAPSHOT_LIMIT + 2):  # enough policies for the oldest to be pruned
        await change_policy(harness, tolerations=[{"key": f"k{i}", "operator": "Exists"}])
        await harness.sync()
    kept = await snapshots(harness)
    assert kept[70]["metadata"]["name"] == "forged" and kept[50]["metadata"]["name"] == "other"  # untouched
    assert sorted(n for n in kept if n not in (50, 70)) == list(range(2, SNAPSHOT_LIMIT + 3))  # its own numbering


async def test_a_revision_being_deleted_is_not_counted(harness):
    await harness.api.create(PLACEMENTS, "default", placement(), OPTS)
    uid = (await harness.api.current(PLACEMENTS, "default", "web")).obj["metadata"]["uid"]
    await harness.api.create(REVISIONS, "default", revision("going", uid, 7, finalizers=["example.com/hold"]), OPTS)
    await harness.api.delete(REVISIONS, "default", "going", None, None, None)
    await harness.sync()
    await harness.api.cache.wait_consistent()
    numbers = {r.obj["metadata"]["name"]: r.obj["revision"] for r in harness.api.cache.items(REVISIONS.store_prefix)}
    assert numbers.pop("going") == 7 and list(numbers.values()) == [1]  # numbered as if it were gone already


async def test_a_snapshot_name_taken_by_someone_else_stops_nothing(harness):
    from corral.api.kinds.placement import snapshot_name

    await harness.api.create(PLACEMENTS, "default", placement(), OPTS)
    name = snapshot_name((await harness.api.current(PLACEMENTS, "default", "web")).obj)
    await harness.api.create(REVISIONS, "default", {"metadata": {"name": name}, "data": {}, "revision": 3}, OPTS)
    await harness.decide("n1")
    await harness.sync()  # the snapshot's create finds the name taken (409): the copies are made all the same
    assert sorted(await harness.pods()) == ["n1"]
    assert (await harness.api.current(REVISIONS, "default", name)).obj["revision"] == 3  # not its to change


async def test_a_snapshot_deleted_while_it_is_renumbered_is_left_gone(harness, monkeypatch):
    await harness.api.create(PLACEMENTS, "default", placement(), OPTS)
    await harness.sync()
    await change_policy(harness, tolerations=[])
    await harness.sync()
    await change_policy(harness, tolerations=[{"key": "dedicated", "operator": "Exists"}])  # the first one back
    patch = harness.api.patch

    async def deleted_first(resource, namespace, name, *args):
        if resource is REVISIONS:  # someone deletes it between the controller's read and its patch: 404
            await harness.api.delete(REVISIONS, namespace, name, None, None, None)
        return await patch(resource, namespace, name, *args)

    monkeypatch.setattr(harness.api, "patch", deleted_first)
    await harness.sync()  # no error: the next sync finds it gone and makes it again
    monkeypatch.setattr(harness.api, "patch", patch)
    await harness.sync()
    kept = await snapshots(harness)
    assert sorted(kept) == [2, 3] and kept[3]["data"]["policy"]["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
