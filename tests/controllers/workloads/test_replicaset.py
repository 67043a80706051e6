"""The ReplicaSet controller keeps N pods of a template, adopts and releases pods by labels, scales
down in Kubernetes' order and reports ready and available pods; the API validates ReplicaSets and
serves their scale subresource."""

from __future__ import annotations


import asyncio

import msgspec
import pytest

from corral.api.resources import by_kind
from corral.controllers.workloads.replicaset import ReplicaSetController
from corral.server import errors
from corral.server.rest import WriteOptions
from corral.server.rest.scale import get_scale, write_scale
from corral.store import EventType
from corral.testing.builders import make_pod
from corral.testing.clock import FakeClock
from corral.testing.server import LateCache, record_writes, running_server
from corral.testing.waiting import until

RS, PODS = by_kind("ReplicaSet"), by_kind("Pod")
OPTS = WriteOptions(warn=False)


def replica_set(name: str = "web", replicas: int = 3, *, app: str = "web", min_ready: int = 0) -> dict:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "minReadySeconds": min_ready, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app, "tier": "front"}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}}


async def pods(api) -> list[dict]:
    await api.cache.wait_consistent()
    return sorted((r.obj for r in api.cache.items(PODS.store_prefix)), key=lambda p: p["metadata"]["name"])


def owner_names(pod: dict) -> list[str]:
    return [r["name"] for r in pod["metadata"].get("ownerReferences") or ()]



async def active(api, owner: str = "web") -> list[dict]:
    return [p for p in await pods(api) if owner in owner_names(p) and not p["metadata"].get("deletionTimestamp")]


async def set_ready(api, name: str, ready: bool = True, since: str = "2026-01-01T00:00:00Z") -> None:
    current = (await api.current(PODS, "default", name)).obj
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                                  "lastTransitionTime": since}]}
    await api.update(PODS, "default", name, {**current, "status": status}, OPTS, subresource="status")


async def test_a_replica_set_creates_the_missing_pods_from_its_template_controlled_by_it(server):
    api = server.api
    await api.create(RS, "default", replica_set(replicas=3), OPTS)
    made = await until(lambda: active(api), lambda ps: len(ps) == 3)
    uid = (await api.current(RS, "default", "web")).obj["metadata"]["uid"]
    for pod in made:
        assert pod["metadata"]["name"].startswith("web-")
        assert pod["metadata"]["labels"] == {"app": "web", "tier": "front"}
        assert pod["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                                       "uid": uid, "controller": True, "blockOwnerDeletion": True}]
        assert pod["spec"]["containers"][0]["image"] == "busybox:1.36"
    status = await until(lambda: _status(api), lambda s: s.get("replicas") == 3)
    assert status == {"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 0, "availableReplicas": 0,
                      "observedGeneration": 1}


async def _status(api, name: str = "web") -> dict:
    await api.cache.wait_consistent()
    return (await api.current(RS, "default", name)).obj.get("status") or {}


async def test_a_deleted_pod_is_replaced_and_a_finished_one_no_longer_counts(server):
    api = server.api
    await api.create(RS, "default", replica_set(replicas=2), OPTS)
    first = await until(lambda: active(api), lambda ps: len(ps) == 2)
    await api.delete(PODS, "default", first[0]["metadata"]["name"], 0, None, None)
    again = await until(lambda: active(api), lambda ps: len(ps) == 2 and first[0] not in ps)
    assert first[0]["metadata"]["name"] not in [p["metadata"]["name"] for p in again]
    finished = again[0]
    await api.update(PODS, "default", finished["metadata"]["name"],
                     {**finished, "status": {"phase": "Failed"}}, OPTS, subresource="status")
    await until(lambda: active(api), lambda ps: len([p for p in ps if p["status"]["phase"] != "Failed"]) == 2)


async def test_scaling_down_deletes_not_ready_pods_before_ready_ones_and_newest_first(server):
    api = server.api
    await api.create(RS, "default", replica_set(replicas=3), OPTS)
    made = await until(lambda: active(api), lambda ps: len(ps) == 3)
    keep = made[1]["metadata"]["name"]
    await set_ready(api, keep)
    await write_scale(api, RS, "default", "web", {"spec": {"replicas": 1}}, OPTS, "merge")
    left = await until(lambda: active(api), lambda ps: len(ps) == 1)
    assert left[0]["metadata"]["name"] == keep

    async def told() -> list[tuple[str, str]]:
        await api.cache.wait_consistent()
        return sorted((e.obj["type"], e.obj["message"]) for e in api.cache.items(by_kind("Event").store_prefix)
                      if e.obj["reason"] == "SuccessfulDelete")

    gone = sorted(p["metadata"]["name"] for p in made if p["metadata"]["name"] != keep)
    assert await until(told, lambda es: len(es) == 2) == [("Normal", f"Deleted pod: {name}") for name in gone]


async def test_matching_orphans_are_adopted_surplus_deleted_and_pods_that_stop_matching_released(server):
    api = server.api
    for name in ("stray-a", "stray-b"):
        pod = make_pod(name).obj
        pod["metadata"].pop("uid")
        pod["metadata"]["labels"] = {"app": "web"}
        await api.create(PODS, "default", pod, OPTS)
    other = make_pod("other").obj
    other["metadata"].pop("uid")
    other["metadata"]["labels"] = {"app": "db"}
    await api.create(PODS, "default", other, OPTS)
    await api.create(RS, "default", replica_set(replicas=1), OPTS)
    owned = await until(lambda: active(api), lambda ps: len(ps) == 1)
    assert owned[0]["metadata"]["name"] in ("stray-a", "stray-b")  # adopted, not a new pod
    status = await until(lambda: _status(api), lambda s: s.get("replicas") == 1)
    assert status["fullyLabeledReplicas"] == 0  # it lacks the template's tier label
    assert owner_names((await api.current(PODS, "default", "other")).obj) == []
    # Relabelled out of the selector: released (no longer owned), and replaced.
    name = owned[0]["metadata"]["name"]
    await api.patch(PODS, "default", name, {"metadata": {"labels": {"app": "debug"}}}, "merge", OPTS)
    replaced = await until(lambda: active(api), lambda ps: len(ps) == 1 and ps[0]["metadata"]["name"] != name)
    assert replaced[0]["metadata"]["name"].startswith("web-")
    assert owner_names((await api.current(PODS, "default", name)).obj) == []


async def test_pods_it_adopted_count_as_its_replicas_even_when_its_cache_hears_of_the_adoption_late(
        server, monkeypatch):
    """On etcd a server's own writes reach its cache a moment after they are acknowledged. A sync
    that adopted orphans waits for them before it counts its pods: counting first, it would create
    a pod for every replica it had just adopted (and then delete as many)."""
    api = server.api
    strays = ["stray-a", "stray-b"]
    for name in strays:
        pod = make_pod(name).obj
        pod["metadata"].pop("uid")
        pod["metadata"]["labels"] = {"app": "web"}
        await api.create(PODS, "default", pod, OPTS)
    await api.cache.wait_consistent()
    created: list[str] = []
    api.cache.on_event.append(lambda e: e.type is EventType.ADDED and e.key.startswith(PODS.store_prefix)
                              and created.append(e.key))
    late = LateCache(api.cache, monkeypatch)
    late.hold_from(lambda batch: any(e.key.startswith(PODS.store_prefix) for e in batch))
    await api.create(RS, "default", replica_set(replicas=2), OPTS)
    await until(lambda: asyncio.sleep(0, late.held_events()), lambda held: len(held) >= 2)  # both adopted
    await asyncio.sleep(0.5)  # what the sync would create on counting too early, it creates now
    late.release()
    owned = await until(lambda: active(api), lambda ps: len(ps) == 2)
    assert [p["metadata"]["name"] for p in owned] == strays
    await api.cache.wait_consistent()
    assert created == []


async def test_ready_pods_are_available_only_after_min_ready_seconds(tmp_path):
    clock = FakeClock(1_800_000_000.0)
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        running = ReplicaSetController(api, clock=clock)
        running.start()
        try:
            await api.create(RS, "default", replica_set(replicas=2, min_ready=30), OPTS)
            made = await until(lambda: active(api), lambda ps: len(ps) == 2)
        finally:
            await running.stop()
        became_ready = "2027-01-15T08:00:00Z"  # = 1_800_000_000
        for pod in made:
            await set_ready(api, pod["metadata"]["name"], since=became_ready)
        controller = ReplicaSetController(api, clock=clock)  # synced by hand from here
        controller.initial_keys()
        key = RS.key("default", "web")
        await api.cache.wait_consistent()
        clock.advance(10)
        assert await controller.sync(key) == 20.0  # looked at again once they will be available
        status = await _status(api)
        assert (status["readyReplicas"], status["availableReplicas"]) == (2, 0)
        clock.advance(20)
        await api.cache.wait_consistent()
        assert await controller.sync(key) is None
        assert (await _status(api))["availableReplicas"] == 2


async def test_the_scale_subresource_reads_and_writes_replicas_only(server):
    api = server.api
    await api.create(RS, "default", replica_set(replicas=2), OPTS)
    await until(lambda: _status(api), lambda s: s.get("replicas") == 2)
    scale = msgspec.json.decode((await get_scale(api, RS, "default", "web")).body)
    assert (scale["kind"], scale["apiVersion"], scale["spec"], scale["status"]) == (
        "Scale", "autoscaling/v1", {"replicas": 2}, {"replicas": 2, "selector": "app=web"})
    await write_scale(api, RS, "default", "web", {**scale, "spec": {"replicas": 4}}, OPTS)
    assert (await api.current(RS, "default", "web")).obj["spec"]["replicas"] == 4
    with pytest.raises(errors.ApiError) as stale:  # a PUT of a Scale read before the change
        await write_scale(api, RS, "default", "web", {**scale, "spec": {"replicas": 1}}, OPTS)
    assert stale.value.code == 409
    with pytest.raises(errors.ApiError) as bad:
        await write_scale(api, RS, "default", "web", {"spec": {"replicas": -1}}, OPTS, "merge")
    assert bad.value.code == 422 and "spec.replicas" in bad.value.message
    assert (await api.current(RS, "default", "web")).obj["spec"]["replicas"] == 4


@pytest.mark.parametrize("change, field", [
    pytest.param(lambda rs: rs["spec"]["template"]["metadata"].update(labels={"app": "other"}),
                 "spec.template.metadata.labels", id="template labels the selector does not match are refused"),
    pytest.param(lambda rs: rs["spec"].update(selector=None), "spec.selector", id="a selector is required"),
    pytest.param(lambda rs: rs["spec"].update(replicas=-1), "spec.replicas", id="replicas cannot be negative"),
    pytest.param(lambda rs: rs["spec"]["template"]["spec"].update(restartPolicy="Never"),
                 "spec.template.spec.restartPolicy", id="its pods must restart always"),
    pytest.param(lambda rs: rs["spec"]["template"]["spec"]["containers"][0].update(name="Bad_Name"),
                 "spec.template.spec.containers[0].name", id="the template is validated as a pod is"),
])
async def test_an_invalid_replica_set_is_refused_with_the_field_path(server, change, field):
    rs = replica_set()
    change(rs)
    with pytest.raises(errors.ApiError) as refused:
        await server.api.create(RS, "default", rs, OPTS)
    assert refused.value.code == 422
    assert field in refused.value.message


async def test_a_replica_sets_selector_cannot_change(server):
    api = server.api
    await api.create(RS, "default", replica_set(), OPTS)
    with pytest.raises(errors.ApiError) as refused:
        await api.patch(RS, "default", "web", {"spec": {"selector": {"matchLabels": {"app": "web", "x": "y"}},
                                                        "template": {"metadata": {"labels": {"x": "y"}}}}},
                        "merge", OPTS)
    assert refused.value.code == 422 and "spec.selector" in refused.value.message


async def test_a_terminating_pod_is_neither_counted_nor_ready_and_is_replaced(server):
    api = server.api
    rs = replica_set(replicas=2)
    rs["spec"]["template"]["spec"]["nodeName"] = "n1"  # bound at once: its deletion waits for an agent
    await api.create(RS, "default", rs, OPTS)
    made = await until(lambda: active(api), lambda ps: len(ps) == 2)
    for pod in made:
        await set_ready(api, pod["metadata"]["name"])
    await until(lambda: _status(api), lambda s: s.get("readyReplicas") == 2)
    await api.delete(PODS, "default", made[0]["metadata"]["name"], None, None, None)  # graceful: Terminating
    status = await until(lambda: _status(api), lambda s: s.get("replicas") == 2 and s.get("readyReplicas") == 1)
    assert status["availableReplicas"] == 1
    terminating = (await api.current(PODS, "default", made[0]["metadata"]["name"])).obj
    assert terminating["metadata"]["deletionTimestamp"] and is_ready_pod(terminating)


def is_ready_pod(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or ())


async def test_the_pods_it_creates_and_deletes_are_told_as_events_on_the_replica_set(server):
    api = server.api
    await api.create(RS, "default", replica_set(replicas=2), OPTS)
    made = await until(lambda: active(api), lambda ps: len(ps) == 2)
    await write_scale(api, RS, "default", "web", {"spec": {"replicas": 1}}, OPTS, "merge")
    await until(lambda: active(api), lambda ps: len(ps) == 1)

    async def told() -> list[tuple[str, str, str]]:
        await api.cache.wait_consistent()
        return sorted((e.obj["involvedObject"]["kind"], e.obj["reason"], e.obj["message"])
                      for e in api.cache.items(by_kind("Event").store_prefix)
                      if e.obj["involvedObject"]["name"] == "web")

    events = await until(told, lambda es: len(es) == 3)
    deleted = [e for e in events if e[1] == "SuccessfulDelete"]
    assert [e[:2] for e in events] == [("ReplicaSet", "SuccessfulCreate")] * 2 + [("ReplicaSet", "SuccessfulDelete")]
    assert {e[2] for e in events if e[1] == "SuccessfulCreate"} == {f"Created pod: {p['metadata']['name']}" for p in made}
    assert deleted[0][2].startswith("Deleted pod: web-")


async def test_a_selector_of_expressions_counts_fully_labelled_only_the_pods_with_the_templates_labels(server):
    """`app In (web, api)` adopts a stray labelled app=api; the template says app=web, so of the two
    pods one is fully labelled."""
    api = server.api
    stray = make_pod("stray").obj
    stray["metadata"].pop("uid")
    stray["metadata"]["labels"] = {"app": "api"}
    await api.create(PODS, "default", stray, OPTS)
    rs = replica_set(replicas=2)
    rs["spec"]["selector"] = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}
    rs["spec"]["template"]["metadata"]["labels"] = {"app": "web"}
    await api.create(RS, "default", rs, OPTS)
    status = await until(lambda: _status(api), lambda s: s.get("replicas") == 2)
    assert status["fullyLabeledReplicas"] == 1


async def test_a_large_replica_sets_pods_are_created_in_batches_that_double_without_a_cap(server):
    """As Kubernetes' slowStartBatch: 1, 2, 4, ... while creates succeed, past the 64 other
    controllers stop at (255 replicas: the eighth batch is 128 creates at once)."""
    api = server.api
    create, in_flight, most = api.create, 0, 0

    async def counting(resource, namespace, obj, opts):
        nonlocal in_flight, most
        if resource is not PODS:
            return await create(resource, namespace, obj, opts)
        in_flight += 1
        most = max(most, in_flight)
        try:
            return await create(resource, namespace, obj, opts)
        finally:
            in_flight -= 1

    api.create = counting
    await create(RS, "default", replica_set(replicas=255), OPTS)
    await until(lambda: active(api), lambda ps: len(ps) == 255, timeout=60)
    assert most == 128


# --- ownership, one sync at a time -----------------------------------------------------------------

KEEPER = {"apiVersion": "v1", "kind": "ConfigMap", "name": "keeper", "uid": "keeper-uid"}  # owns, controls nothing


def rs_sync(api):
    """A ReplicaSet controller that syncs ``web`` once per call; its indexes follow the cache's
    events from its first call on, as the running controller's do."""
    controller, key = ReplicaSetController(api), RS.key("default", "web")

    async def sync() -> None:
        await api.cache.wait_consistent()
        if controller.keys_for not in api.cache.on_event:
            controller.initial_keys()
            api.cache.on_event.append(controller.keys_for)
        await controller.sync(key)
        await api.cache.wait_consistent()
    return sync


async def bare_pod(api, name: str, *, app: str = "web", owners: list | None = None, deleting: bool = False) -> None:
    pod = make_pod(name).obj
    pod["metadata"].pop("uid")
    pod["metadata"]["labels"] = {"app": app, "tier": "front"}
    pod["metadata"]["ownerReferences"] = list(owners or ())
    if deleting:
        pod["metadata"]["finalizers"] = ["example.com/hold"]  # so that a delete leaves it terminating
    await api.create(PODS, "default", pod, OPTS)
    if deleting:
        await api.delete(PODS, "default", name, None, None, None)


async def owners_of(api, name: str) -> list[tuple[str, bool]]:
    await api.cache.wait_consistent()
    pod = (await api.current(PODS, "default", name)).obj
    return [(r["name"], bool(r.get("controller"))) for r in pod["metadata"].get("ownerReferences") or ()]


async def test_adoption_and_release_keep_a_pods_other_owners(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        sync = rs_sync(api)
        await bare_pod(api, "stray", owners=[KEEPER])
        await api.create(RS, "default", replica_set(replicas=1), OPTS)
        await sync()
        assert await owners_of(api, "stray") == [("keeper", False), ("web", True)]
        await api.patch(PODS, "default", "stray", {"metadata": {"labels": {"app": "debug"}}}, "merge", OPTS)
        await sync()
        assert await owners_of(api, "stray") == [("keeper", False)]


async def test_a_pod_being_deleted_is_neither_adopted_nor_released_and_the_others_still_are(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        sync = rs_sync(api)
        await bare_pod(api, "a-going", deleting=True)  # sorted first: the ones after it must still be adopted
        await bare_pod(api, "b-stray")
        await api.create(RS, "default", replica_set(replicas=10), OPTS)
        await sync()
        assert await owners_of(api, "a-going") == [] and await owners_of(api, "b-stray") == [("web", True)]
        # Both of its pods stop matching; the first is being deleted: it keeps its owner, the other is released.
        # One more wanted, so that adopting the new orphan leaves no surplus to delete (it is the newest).
        await api.patch(RS, "default", "web", {"spec": {"replicas": 11}}, "merge", OPTS)
        await bare_pod(api, "c-mine", owners=[])
        await sync()
        assert await owners_of(api, "c-mine") == [("web", True)]
        for name in ("b-stray", "c-mine"):
            await api.patch(PODS, "default", name, {"metadata": {"labels": {"app": "debug"}}}, "merge", OPTS)
        await api.patch(PODS, "default", "b-stray", {"metadata": {"finalizers": ["example.com/hold"]}}, "merge", OPTS)
        await api.delete(PODS, "default", "b-stray", None, None, None)
        await sync()
        assert await owners_of(api, "b-stray") == [("web", True)] and await owners_of(api, "c-mine") == []


class _Stale:
    """A view of ``target`` whose attributes are its own, but for those given."""

    def __init__(self, target, **own) -> None:
        self._target, self.__dict__ = target, {**own, "_target": target}

    def __getattr__(self, name):
        return getattr(self._target, name)


async def test_an_orphan_changed_after_the_cache_showed_it_is_not_written_over(tmp_path):
    """Adoption and release are compare-and-swap: another controller that took the pod meanwhile
    keeps it (one controller only), and the change queues this ReplicaSet again."""
    from corral.controllers.workloads.replicaset import _Tally

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        await bare_pod(api, "stray")
        await api.create(RS, "default", replica_set(replicas=1), OPTS)
        await api.cache.wait_consistent()
        key = PODS.key("default", "stray")
        seen = api.cache.get(key)  # what the controller's view still shows while the change is on its way
        other = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "other", "uid": "other-uid", "controller": True}
        await api.patch(PODS, "default", "stray", {"metadata": {"ownerReferences": [other]}}, "merge", OPTS)
        await api.cache.wait_consistent()
        controller = ReplicaSetController(_Stale(api, cache=_Stale(api.cache, get=lambda k: seen if k == key
                                                                           else api.cache.get(k))))
        controller._orphans["default"] = {key}
        rs = (await api.current(RS, "default", "web")).obj
        controller._index_rs(RS.key("default", "web"), rs)
        assert await controller._claim(rs, controller._selector_of[rs["metadata"]["uid"]]) is False
        assert await owners_of(api, "stray") == [("other", True)]
        # Released the same way: taken meanwhile by another writer, it is not written over either.
        mine = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs["metadata"]["uid"],
                "controller": True}
        await api.patch(PODS, "default", "stray", {"metadata": {"ownerReferences": [mine],
                                                                "labels": {"app": "debug"}}}, "merge", OPTS)
        await api.cache.wait_consistent()
        seen = api.cache.get(key)
        await api.patch(PODS, "default", "stray", {"metadata": {"ownerReferences": [mine, {**KEEPER}]}}, "merge", OPTS)
        controller._orphans.clear()
        controller._tallies[rs["metadata"]["uid"]] = _Tally(pods={key}, unmatched={key})
        assert await controller._claim(rs, controller._selector_of[rs["metadata"]["uid"]]) is False
        assert await owners_of(api, "stray") == [("web", True), ("keeper", False)]


async def test_an_orphan_already_gone_from_the_cache_does_not_stop_the_adoption_of_the_next(tmp_path):
    """The orphan index hears of a deletion after the cache shows it: the gone pod is passed over,
    the orphans after it are still adopted."""
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        await bare_pod(api, "b-stray")
        await api.create(RS, "default", replica_set(replicas=1), OPTS)
        await api.cache.wait_consistent()
        controller = ReplicaSetController(api)
        controller._orphans["default"] = {PODS.key("default", "a-gone"), PODS.key("default", "b-stray")}
        rs = (await api.current(RS, "default", "web")).obj
        controller._index_rs(RS.key("default", "web"), rs)
        assert await controller._claim(rs, controller._selector_of[rs["metadata"]["uid"]]) is True
        assert await owners_of(api, "b-stray") == [("web", True)]


async def status_of(api) -> dict:
    await api.cache.wait_consistent()
    return (await api.current(RS, "default", "web")).obj.get("status") or {}


async def test_the_sync_that_creates_or_releases_pods_writes_a_status_that_counts_them(tmp_path, monkeypatch):
    """It waits for its cache to hear of its own writes before counting (on etcd they come back a
    moment after they are acknowledged): the status it writes is already right, not one sync behind."""
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        sync = rs_sync(api)
        late = LateCache(api.cache, monkeypatch)

        async def sync_hearing_late() -> None:
            late.hold_from(lambda batch: any(e.key.startswith(PODS.store_prefix) for e in batch))
            task = asyncio.ensure_future(sync())
            await asyncio.sleep(0.3)
            late.release()
            await task

        await api.create(RS, "default", replica_set(replicas=1), OPTS)
        await sync_hearing_late()
        assert (await status_of(api))["replicas"] == 1
        await bare_pod(api, "stray", owners=[])
        mine = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "controller": True,
                "uid": (await api.current(RS, "default", "web")).obj["metadata"]["uid"]}
        await api.patch(PODS, "default", "stray", {"metadata": {"ownerReferences": [mine],
                                                                "labels": {"app": "debug"}}}, "merge", OPTS)
        await sync_hearing_late()  # releases it; one pod left, as wanted
        assert await owners_of(api, "stray") == []
        assert (await status_of(api))["replicas"] == 1


async def test_a_pod_whose_release_failed_is_replaced_at_once_as_no_longer_its_own(tmp_path, monkeypatch):
    """A controlled pod the selector stopped matching is not counted, released or not: when the
    release is refused (the pod changed meanwhile), one new pod is made all the same, not two."""
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        await api.create(RS, "default", replica_set(replicas=1), OPTS)
        await rs_sync(api)()
        [pod] = await active(api)
        await api.patch(PODS, "default", pod["metadata"]["name"], {"metadata": {"labels": {"app": "debug"}}},
                        "merge", OPTS)
        await api.cache.wait_consistent()
        controller = ReplicaSetController(api)
        controller.initial_keys()

        async def refused(pod, patch):
            return False

        monkeypatch.setattr(controller, "_patch_pod", refused)
        await controller.sync(RS.key("default", "web"))
        await api.cache.wait_consistent()
        mine = [p["metadata"]["name"] for p in await active(api)]
        assert pod["metadata"]["name"] in mine and len(mine) == 2


async def test_a_settled_replica_set_is_synced_without_a_write(tmp_path, monkeypatch):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        sync = rs_sync(api)
        await api.create(RS, "default", replica_set(replicas=2), OPTS)
        await sync()
        await sync()  # the status the first wrote is read back
        writes = record_writes(api, monkeypatch)
        await sync()
        assert writes == []


@pytest.mark.parametrize("code", [404, 409])
async def test_a_status_write_refused_as_gone_or_changed_ends_the_sync_quietly_and_others_fail_it(tmp_path, monkeypatch,
                                                                                                  code):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        await api.create(RS, "default", replica_set(replicas=0), OPTS)
        await api.cache.wait_consistent()
        controller = ReplicaSetController(api)
        controller.initial_keys()
        update = api.update

        async def refusing(resource, namespace, name, obj, opts, *, subresource=None, refuse=code):
            if subresource == "status":
                raise errors.ApiError(refuse, "Conflict" if refuse == 409 else "NotFound", "refused")
            return await update(resource, namespace, name, obj, opts, subresource=subresource)

        monkeypatch.setattr(api, "update", refusing)
        assert await controller.sync(RS.key("default", "web")) is None
        monkeypatch.setattr(api, "update", lambda *a, **k: refusing(*a, **k, refuse=500))
        with pytest.raises(errors.ApiError):
            await controller.sync(RS.key("default", "web"))


async def test_with_template_labels_the_selector_implies_every_pod_counts_as_fully_labelled(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        rs = replica_set(replicas=2)
        rs["spec"]["template"]["metadata"]["labels"] = {"app": "web"}  # what the selector asks, nothing more
        await api.create(RS, "default", rs, OPTS)
        sync = rs_sync(api)
        await sync()
        status = await status_of(api)
        assert (status["replicas"], status["fullyLabeledReplicas"]) == (2, 2)


async def test_a_pod_ready_for_less_than_min_ready_seconds_is_not_available_and_is_looked_at_again_when_it_is(tmp_path):
    clock = FakeClock(1_000_000.0)
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        rs = replica_set(replicas=1, min_ready=1)
        rs["spec"]["template"]["metadata"]["labels"] = {"app": "web"}  # nothing the pods need be looked at for
        await api.create(RS, "default", rs, OPTS)
        controller = ReplicaSetController(api, clock=clock)
        await api.cache.wait_consistent()
        controller.initial_keys()
        await controller.sync(RS.key("default", "web"))
        await api.cache.wait_consistent()
        [pod] = await active(api)
        await set_ready(api, pod["metadata"]["name"], since="1970-01-12T13:46:39.700000Z")  # 0.3 s ago
        await api.cache.wait_consistent()
        controller.reset()
        controller.initial_keys()
        assert await controller.sync(RS.key("default", "web")) == 0.7
        status = await status_of(api)
        assert (status["readyReplicas"], status["availableReplicas"]) == (1, 0)


async def test_a_deleted_replica_set_leaves_nothing_of_itself_in_the_controllers_indexes(tmp_path):
    """Kept for every ReplicaSet the cluster ever had, its indexes would grow with every rollout."""
    from corral.store import Event, Record

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        await api.create(RS, "default", replica_set(replicas=0), OPTS)
        await api.cache.wait_consistent()
        controller = ReplicaSetController(api)
        controller.initial_keys()
        key = RS.key("default", "web")
        assert list(controller._selectors) == [key] and len(controller._rs_by_uid) == len(controller._selector_of) == 1
        record = api.cache.get(key)
        assert controller.keys_for(Event(EventType.DELETED, Record(key, record.revision, record.value,
                                                                   record.obj))) == (key,)
        assert (controller._selectors, controller._rs_by_uid, controller._selector_of) == ({}, {}, {})


async def test_an_orphan_appearing_queues_the_replica_sets_whose_selector_matches_it(tmp_path):
    from corral.store import Event

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        await api.create(RS, "default", replica_set(replicas=0), OPTS)
        await api.create(RS, "default", {**replica_set("db", replicas=0, app="db")}, OPTS)
        await api.cache.wait_consistent()
        controller = ReplicaSetController(api)
        controller.initial_keys()
        await bare_pod(api, "stray")
        await api.cache.wait_consistent()
        record = api.cache.get(PODS.key("default", "stray"))
        assert controller.keys_for(Event(EventType.ADDED, record)) == {RS.key("default", "web")}


async def test_a_pods_change_queues_its_owner_before_and_after_and_an_orphan_every_set_that_selects_it(tmp_path):
    """Owned: its owner alone (not every set whose selector matches). Released: the old owner and
    every set that may adopt it. Controlled by a set the controller does not know: nothing. Gone:
    nothing left of it in the owner's tally or among the orphans."""
    import json

    from corral.store import Event, Record

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        await api.create(RS, "default", replica_set(replicas=0), OPTS)
        await api.create(RS, "default", replica_set("twin", replicas=0), OPTS)  # selects app=web too
        await api.cache.wait_consistent()
        controller = ReplicaSetController(api)
        controller.initial_keys()
        web, twin = RS.key("default", "web"), RS.key("default", "twin")
        uid = api.cache.get(web).obj["metadata"]["uid"]

        def pod(name: str, owner_uid: str | None = None, etype=EventType.MODIFIED) -> set[str]:
            obj = make_pod(name).obj
            obj["metadata"]["labels"] = {"app": "web"}
            obj["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                                   "uid": owner_uid, "controller": True}] if owner_uid else []
            record = Record(PODS.key("default", name), 1, json.dumps(obj).encode())
            return set(controller.keys_for(Event(etype, record)))

        assert pod("p", uid, EventType.ADDED) == {web}
        assert pod("p", uid) == {web}
        assert pod("p") == {web, twin}  # released: an orphan either may adopt
        assert pod("p", etype=EventType.DELETED) == set()
        assert pod("q", "uid-of-a-set-never-seen", EventType.ADDED) == set()
        assert pod("r", uid, EventType.ADDED) == {web}
        assert pod("r", etype=EventType.DELETED) == {web}
        assert controller._orphans.get("default") == set() and uid not in controller._tallies
