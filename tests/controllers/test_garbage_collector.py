"""Deleting an owner: its dependents go with it (background, the default), stay without it
(orphan), or go before it (foreground); finalizers hold an object until they are removed."""

from __future__ import annotations

import asyncio
import json

import pytest

from corral.api.resources import by_kind
from corral.client.rest import ApiError as ClientError
from corral.controllers.garbage_collector import GarbageCollector
from corral.server.rest import WriteOptions
from corral.testing.builders import make_node, make_pod
from corral.testing.server import LateCache, running_server
from corral.testing.waiting import until

RS, PODS = by_kind("ReplicaSet"), by_kind("Pod")
OPTS = WriteOptions(warn=False)


def replica_set(replicas: int = 2, *, node: str | None = None) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "busybox:1.36"}]}
    if node:
        spec["nodeName"] = node  # pods created bound: deleting one waits for an agent's word
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec}}}



async def pods(api) -> list[dict]:
    await api.cache.wait_consistent()
    return sorted((r.obj for r in api.cache.items(PODS.store_prefix)), key=lambda p: p["metadata"]["name"])


async def the_replica_set(api) -> dict | None:
    await api.cache.wait_consistent()
    record = api.cache.get(RS.key("default", "web"))
    return record.obj if record is not None else None


async def started(api, **kwargs) -> list[dict]:
    await api.create(RS, "default", replica_set(**kwargs), OPTS)
    return await until(lambda: pods(api), lambda ps: len(ps) == kwargs.get("replicas", 2))


async def test_deleting_an_owner_deletes_its_dependents_by_default(server):
    api = server.api
    await started(api)
    await api.delete(RS, "default", "web", None, None, None)
    assert await the_replica_set(api) is None  # gone at once...
    await until(lambda: pods(api), lambda ps: ps == [])  # ...and its pods after it


async def test_orphan_deletion_leaves_the_pods_running_owned_by_nobody(server):
    api = server.api
    before = await started(api)
    await api.delete(RS, "default", "web", None, None, None, propagation="Orphan")
    await until(lambda: the_replica_set(api), lambda rs: rs is None)
    left = await pods(api)
    assert [p["metadata"]["name"] for p in left] == [p["metadata"]["name"] for p in before]
    assert [p["metadata"].get("ownerReferences") for p in left] == [None, None]


async def test_orphaning_removes_only_its_own_finalizer_and_another_keeps_the_owner(server):
    api = server.api
    obj = replica_set()
    obj["metadata"]["finalizers"] = ["example.com/keep"]
    await api.create(RS, "default", obj, OPTS)
    await until(lambda: pods(api), lambda ps: len(ps) == 2)
    await api.delete(RS, "default", "web", None, None, None, propagation="Orphan")
    owner = await until(lambda: the_replica_set(api),
                        lambda rs: rs["metadata"].get("finalizers") == ["example.com/keep"])
    assert owner["metadata"]["deletionTimestamp"]  # still held by the other finalizer
    assert [p["metadata"].get("ownerReferences") for p in await pods(api)] == [None, None]


async def test_foreground_deletion_keeps_the_owner_until_its_dependents_are_gone(server):
    api = server.api
    made = await started(api, node="n1")
    await api.delete(RS, "default", "web", None, None, None, propagation="Foreground")
    # Its pods are terminating (their agent has not said they stopped): the owner waits, marked deleted.
    terminating = await until(lambda: pods(api), lambda ps: all(p["metadata"].get("deletionTimestamp") for p in ps))
    assert len(terminating) == 2
    held = await the_replica_set(api)
    assert held is not None and held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == ["foregroundDeletion"]
    for pod in made:  # the agent reports each pod stopped
        current = (await api.current(PODS, "default", pod["metadata"]["name"])).obj
        await api.update(PODS, "default", pod["metadata"]["name"],
                         {**current, "status": {"phase": "Terminated"}}, OPTS, subresource="status")
    await until(lambda: the_replica_set(api), lambda rs: rs is None)


@pytest.mark.parametrize("propagation, finalizer", [("Orphan", "orphan"), ("Foreground", "foregroundDeletion")])
async def test_an_unbound_pod_deleted_with_a_propagation_policy_is_held_until_its_finalizer_is_done(
        server, propagation, finalizer):
    """As for any owner: the policy's finalizer marks the pod (no agent has to stop it), and the
    garbage collector, finding no dependent, takes it off and the pod goes."""
    api = server.api
    await api.create(PODS, "default", make_pod("p").obj, OPTS)
    marked = json.loads((await api.delete(PODS, "default", "p", None, None, None, propagation=propagation)).body)
    assert marked["metadata"]["finalizers"] == [finalizer] and marked["metadata"]["deletionTimestamp"]
    await until(lambda: pods(api), lambda ps: ps == [])


async def test_a_dependent_keeps_its_other_owners_and_one_with_none_left_goes(server):
    api = server.api
    await started(api, replicas=1)
    owner = await the_replica_set(api)
    ghost = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "ghost", "uid": "5b1d4c6e-0000-4000-8000-00000000dead"}
    shared = make_pod("shared").obj
    shared["metadata"].pop("uid")
    shared["metadata"]["ownerReferences"] = [
        ghost, {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": owner["metadata"]["uid"]}]
    lonely = make_pod("lonely").obj
    lonely["metadata"].pop("uid")
    lonely["metadata"]["ownerReferences"] = [ghost]
    unknown = make_pod("unknown-kind").obj
    unknown["metadata"].pop("uid")
    unknown["metadata"]["ownerReferences"] = [{"apiVersion": "example.com/v1", "kind": "Widget", "name": "w",
                                               "uid": "5b1d4c6e-0000-4000-8000-00000000beef"}]
    for pod in (shared, lonely, unknown):
        await api.create(PODS, "default", pod, OPTS)
    left = await until(lambda: pods(api), lambda ps: "lonely" not in [p["metadata"]["name"] for p in ps]
                       and any(p["metadata"]["name"] == "shared" and len(p["metadata"]["ownerReferences"]) == 1
                               for p in ps))
    shared_now = next(p for p in left if p["metadata"]["name"] == "shared")
    assert [r["name"] for r in shared_now["metadata"]["ownerReferences"]] == ["web"]
    # An owner of a kind corral does not serve is never judged gone.
    assert "unknown-kind" in [p["metadata"]["name"] for p in left]


async def test_a_finalizer_holds_a_deleted_object_until_it_is_removed(server):
    api = server.api
    rs = replica_set(replicas=0)
    rs["metadata"]["finalizers"] = ["example.com/hold"]
    await api.create(RS, "default", rs, OPTS)
    await api.delete(RS, "default", "web", None, None, None)
    held = await the_replica_set(api)
    assert held is not None and held["metadata"]["deletionTimestamp"]
    await api.delete(RS, "default", "web", None, None, None)  # again: still held, no error
    await api.patch(RS, "default", "web", {"metadata": {"finalizers": None}}, "merge", OPTS)
    assert await the_replica_set(api) is None


@pytest.mark.parametrize("query, body, expected", [
    pytest.param("?propagationPolicy=Orphan", None, 1, id="propagationPolicy=Orphan in the query keeps the pods"),
    pytest.param("", {"kind": "DeleteOptions", "propagationPolicy": "Orphan"}, 1,
                 id="propagationPolicy Orphan in DeleteOptions keeps the pods"),
    pytest.param("", {"kind": "DeleteOptions", "orphanDependents": True}, 1,
                 id="the older orphanDependents keeps the pods"),
    pytest.param("?propagationPolicy=Background", None, 0, id="Background deletes them"),
])
async def test_the_propagation_policy_as_clients_send_it(server, query, body, expected):
    api = server.api
    await started(api, replicas=1)
    async with server.client() as client:
        await client.request("DELETE", RS.item_path("default", "web") + query, body=body)
    await until(lambda: the_replica_set(api), lambda rs: rs is None)
    await asyncio.sleep(0.2)  # time for the collector to have deleted what it would
    assert len(await until(lambda: pods(api), lambda ps: len(ps) == expected)) == expected


async def test_an_unknown_propagation_policy_is_refused_and_nothing_is_deleted(server):
    api = server.api
    await started(api, replicas=1)
    async with server.client() as client:
        with pytest.raises(ClientError) as refused:
            await client.request("DELETE", RS.item_path("default", "web") + "?propagationPolicy=Sometimes")
    assert refused.value.code == 422 and "propagationPolicy" in refused.value.message
    assert await the_replica_set(api) is not None


async def test_what_one_sync_does_with_each_kind_of_owner_reference(tmp_path):
    """Driven by hand, no controller running: the state each case needs stays as set up."""
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        await api.create(RS, "default", replica_set(replicas=0), OPTS)
        await api.delete(RS, "default", "web", None, None, None, propagation="Orphan")  # held: nobody finishes it
        owner = await the_replica_set(api)
        orphaning = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": owner["metadata"]["uid"]}
        ghost = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "ghost",
                 "uid": "5b1d4c6e-0000-4000-8000-00000000dead"}
        widget = {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w",
                  "uid": "5b1d4c6e-0000-4000-8000-00000000beef"}
        node = await api.create(by_kind("Node"), None, make_node("n1").obj, OPTS)
        cluster_owner = {"apiVersion": "v1", "kind": "Node", "name": "n1",
                         "uid": json.loads(node.body)["metadata"]["uid"]}  # cluster-scoped: found by name alone
        held = await api.create(RS, "default", {**replica_set(replicas=0), "metadata": {
            "name": "held", "finalizers": ["example.com/hold"]}}, OPTS)
        await api.delete(RS, "default", "held", None, None, None)  # in the background: held by its finalizer
        deleting = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "held",
                    "uid": json.loads(held.body)["metadata"]["uid"]}
        cases = {"gone-and-orphaning": [ghost, orphaning], "unknown-kind": [widget], "gone": [ghost],
                 "cluster-owner": [cluster_owner], "owner-held": [deleting],
                 "gone-then-alive": [ghost, cluster_owner], "being-deleted": [ghost, cluster_owner],
                 "orphaning-then-alive": [orphaning, cluster_owner]}
        for name, refs in cases.items():
            pod = make_pod(name).obj
            pod["metadata"].pop("uid")
            pod["metadata"]["ownerReferences"] = refs
            if name == "being-deleted":
                pod["metadata"]["finalizers"] = ["example.com/hold"]
            await api.create(PODS, "default", pod, OPTS)
        await api.delete(PODS, "default", "being-deleted", None, None, None)  # held by its finalizer
        collector = GarbageCollector(api)
        collector.initial_keys()
        for name in cases:
            await api.cache.wait_consistent()
            await collector.sync(PODS.key("default", name))
        left = {p["metadata"]["name"]: p["metadata"].get("ownerReferences") for p in await pods(api)}
        assert left == {"gone-and-orphaning": None,  # released by its orphaning owner: kept, owned by nobody
                        "unknown-kind": [widget],  # a kind corral does not serve is never judged gone
                        "cluster-owner": [cluster_owner],
                        "owner-held": [deleting],  # a background deletion takes dependents once the owner is gone
                        "gone-then-alive": [cluster_owner],  # one owner left: the dangling reference goes, not the pod
                        "orphaning-then-alive": [cluster_owner],  # released by one, still owned by the other
                        "being-deleted": [ghost, cluster_owner]}  # on its way out already: left as it is


@pytest.mark.parametrize("meanwhile", ["another finalizer removed", "finalized and gone"])
async def test_an_owner_changed_since_the_collector_saw_it_keeps_that_change(tmp_path, monkeypatch, meanwhile):
    """The collector removes its finalizer from the owner as it last saw it, naming that version: an
    owner someone changed meanwhile (another finalizer removed, which a stale write would put back
    and keep the owner forever; or finalized and gone) is left as it is, and the next sync works on
    what is then in view."""
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        obj = replica_set(replicas=0)
        obj["metadata"]["finalizers"] = ["example.com/audit"]
        await api.create(RS, "default", obj, OPTS)
        await api.delete(RS, "default", "web", None, None, None, propagation="Orphan")
        assert (await the_replica_set(api))["metadata"]["finalizers"] == ["example.com/audit", "orphan"]
        collector = GarbageCollector(api)
        collector.initial_keys()
        late = LateCache(api.cache, monkeypatch)
        late.hold_from(lambda batch: True)
        left = ["orphan"] if meanwhile == "another finalizer removed" else None
        await api.patch(RS, "default", "web", {"metadata": {"finalizers": left}}, "merge", OPTS)
        syncing = asyncio.ensure_future(collector.sync(RS.key("default", "web")))  # sees both finalizers
        await asyncio.sleep(0.3)  # its write lost to the newer version: it waits to hear of that one
        late.release()
        await syncing  # no error: the change it lost to queues the owner again
        await api.cache.wait_consistent()
        await collector.sync(RS.key("default", "web"))
        assert await the_replica_set(api) is None


async def test_an_object_carrying_the_collectors_finalizer_but_not_deleted_is_left_alone(tmp_path):
    """The orphan and foregroundDeletion finalizers mean something only on an object being deleted:
    one written with them by hand keeps them, and its dependents keep it as their owner."""
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        obj = replica_set(replicas=0)
        obj["metadata"]["finalizers"] = ["orphan"]
        created = json.loads((await api.create(RS, "default", obj, OPTS)).body)
        pod = make_pod("p").obj
        pod["metadata"].pop("uid")
        ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": created["metadata"]["uid"]}
        pod["metadata"]["ownerReferences"] = [ref]
        await api.create(PODS, "default", pod, OPTS)
        collector = GarbageCollector(api)
        await api.cache.wait_consistent()
        collector.initial_keys()
        await collector.sync(RS.key("default", "web"))
        await collector.sync(PODS.key("default", "p"))
        assert (await the_replica_set(api))["metadata"]["finalizers"] == ["orphan"]
        assert [p["metadata"]["ownerReferences"] for p in await pods(api)] == [[ref]]
        await api.delete(PODS, "default", "p", 0, None, None)  # no dependent left to wait for either
        await api.cache.wait_consistent()
        await collector.sync(RS.key("default", "web"))
        assert (await the_replica_set(api))["metadata"]["finalizers"] == ["orphan"]


async def test_a_dangling_reference_is_removed_only_from_the_version_the_collector_saw(tmp_path):
    """Compare-and-swap: a dependent changed meanwhile (another owner added) keeps that change; the
    change queues it again, and the next sync works on what is then in view."""
    from tests.controllers.workloads.test_replicaset import _Stale

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        ghost = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "ghost",
                 "uid": "5b1d4c6e-0000-4000-8000-00000000dead"}
        node = json.loads((await api.create(by_kind("Node"), None, make_node("n1").obj, OPTS)).body)
        alive = {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": node["metadata"]["uid"]}
        pod = make_pod("p").obj
        pod["metadata"].pop("uid")
        pod["metadata"]["ownerReferences"] = [ghost, alive]
        await api.create(PODS, "default", pod, OPTS)
        await api.cache.wait_consistent()
        key = PODS.key("default", "p")
        seen = api.cache.get(key)
        await api.patch(PODS, "default", "p", {"metadata": {"labels": {"changed": "meanwhile"}}}, "merge", OPTS)
        await api.cache.wait_consistent()
        collector = GarbageCollector(_Stale(api, cache=_Stale(api.cache, get=lambda k: seen if k == key
                                                                        else api.cache.get(k))))
        await collector.sync(key)  # refused (409): no error
        now = (await pods(api))[0]["metadata"]
        assert now["labels"] == {"changed": "meanwhile"} and now["ownerReferences"] == [ghost, alive]


async def test_each_change_queues_exactly_the_objects_the_collector_must_look_at(tmp_path):
    """At start: every dependent, and every owner held by the collector's finalizer (not one held
    by another's). Then: a dependent whose owners did not change is not looked at again, nor an
    object with none; a dependent that stops naming an owner held for it queues that owner, unless
    the owner is no longer held by the collector (finished, or deleted); a deleted object leaves
    nothing behind."""
    from corral.api.resources import FOREGROUND_FINALIZER
    from corral.store import Event, EventType, Record

    cms = by_kind("ConfigMap")
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api

        async def make(name: str, *owners: str, finalizers: tuple = ()) -> dict:
            refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": o, "uid": uid[o]} for o in owners]
            meta = {"name": name, "ownerReferences": refs, "finalizers": list(finalizers)}
            created = json.loads((await api.create(cms, "default", {"metadata": meta}, OPTS)).body)
            uid[name] = created["metadata"]["uid"]
            return created

        uid: dict[str, str] = {}
        for name in ("owner", "plain", "held", "also-held", "other-held"):
            await make(name, finalizers=("example.com/hold",))
        for name, owner in (("dep", "owner"), ("dep2", "held"), ("dep3", "other-held"), ("dep4", "also-held")):
            await make(name, owner)
        for name, policy in (("held", "Foreground"), ("also-held", "Foreground"), ("other-held", None)):
            await api.delete(cms, "default", name, None, None, None, propagation=policy)
        await api.cache.wait_consistent()
        collector = GarbageCollector(api)
        key = lambda name: cms.key("default", name)  # noqa: E731
        assert sorted(collector.initial_keys()) == sorted(map(key, ("dep", "dep2", "dep3", "dep4", "held", "also-held")))

        def change(name: str, etype=EventType.MODIFIED, **meta) -> list[str]:
            obj = json.loads(json.dumps(api.cache.get(key(name)).obj))
            obj["metadata"].update(meta)
            return sorted(collector.keys_for(Event(etype, Record(key(name), 1, json.dumps(obj).encode()))))

        assert change("dep", labels={"a": "b"}) == []  # same owners, not being deleted
        assert change("plain", labels={"a": "b"}) == [] and change("plain", EventType.ADDED) == []
        assert change("dep3", EventType.DELETED) == []  # other-held is not the collector's to finish
        assert change("dep", EventType.DELETED) == [] and change("owner", EventType.DELETED) == []
        held = api.cache.get(key("held")).obj["metadata"]
        assert FOREGROUND_FINALIZER in held["finalizers"]
        assert change("dep2", ownerReferences=[]) == [key("held")]  # held waits for its dependents
        assert change("dep2") == [key("dep2"), key("held")]  # named again: both looked at
        assert change("held", finalizers=["example.com/hold"]) == []  # no longer the collector's to finish...
        assert change("dep2", ownerReferences=[]) == []  # ...so its dependent going is no concern of it
        assert change("also-held", EventType.DELETED) == [key("dep4")]
        assert change("dep4", ownerReferences=[]) == []
