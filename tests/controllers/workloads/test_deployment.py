"""Deployments roll a template out through ReplicaSets as Kubernetes' do: within maxSurge and
maxUnavailable at every moment (RollingUpdate), old pods gone before new ones (Recreate), undo
reusing the old ReplicaSet, pause, scale, history trimmed, a stuck rollout reported."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from corral.api.resources import by_kind
from corral.controllers.workloads.deployment import HASH_LABEL, REVISION
from corral.server import errors
from corral.server.rest import WriteOptions
from corral.server.rest.scale import write_scale
from corral.store import EventType
from corral.testing.server import LateCache, record_writes, running_server
from corral.testing.waiting import until

DEPLOYS, RS, PODS = by_kind("Deployment"), by_kind("ReplicaSet"), by_kind("Pod")
OPTS = WriteOptions(warn=False)
BROKEN = "example.com/never-ready:1"  # the stand-in kubelet never makes pods of this image ready


def deployment(replicas: int = 3, image: str = "web:1", **spec) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}, **spec}}


def rolling(replicas: int, surge: int | str, unavailable: int | str) -> dict:
    """A RollingUpdate Deployment of ``replicas`` with these maxSurge and maxUnavailable."""
    return deployment(replicas=replicas, strategy={"type": "RollingUpdate", "rollingUpdate": {
        "maxSurge": surge, "maxUnavailable": unavailable}})



def live_pods(api) -> list[dict]:
    return [r.obj for r in api.cache.items(PODS.store_prefix) if not r.obj["metadata"].get("deletionTimestamp")]


def is_ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


@contextlib.asynccontextmanager
async def kubelet(api):
    """Stands in for the agents: a new pod runs and is ready a moment later (but for BROKEN)."""
    async def run() -> None:
        while True:
            for pod in live_pods(api):
                if not (pod.get("status") or {}).get("conditions") and pod["spec"]["containers"][0]["image"] != BROKEN:
                    status = {"phase": "Running", "conditions": [
                        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
                    with contextlib.suppress(errors.ApiError):
                        await api.update(PODS, "default", pod["metadata"]["name"], {**pod, "status": status}, OPTS,
                                         subresource="status")
            await asyncio.sleep(0.05)

    task = asyncio.create_task(run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def the_deployment(api) -> dict:
    await api.cache.wait_consistent()
    return api.cache.get(DEPLOYS.key("default", "web")).obj


async def replica_sets(api) -> list[dict]:
    await api.cache.wait_consistent()
    return sorted((r.obj for r in api.cache.items(RS.store_prefix)),
                  key=lambda rs: int(rs["metadata"]["annotations"][REVISION]))


def rolled_out(deploy: dict, replicas: int = 3) -> bool:
    s = deploy.get("status") or {}
    return (s.get("observedGeneration") == deploy["metadata"]["generation"] and s.get("updatedReplicas") == replicas
            and s.get("replicas") == replicas and s.get("availableReplicas") == replicas)


async def set_image(api, image: str) -> None:
    await api.patch(DEPLOYS, "default", "web", {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": image}]}}}}, "strategic", OPTS)


async def test_a_deployment_runs_its_replicas_through_one_replica_set_named_after_the_template(server):
    api = server.api
    async with kubelet(api):
        await api.create(DEPLOYS, "default", deployment(), OPTS)
        deploy = await until(lambda: the_deployment(api), rolled_out)
    (rs,) = await replica_sets(api)
    digest = rs["metadata"]["labels"][HASH_LABEL]
    assert rs["metadata"]["name"] == f"web-{digest}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", HASH_LABEL: digest}
    assert rs["metadata"]["annotations"][REVISION] == "1" == deploy["metadata"]["annotations"][REVISION]
    assert [r["kind"] for r in rs["metadata"]["ownerReferences"]] == ["Deployment"]
    assert {p["metadata"]["labels"][HASH_LABEL] for p in live_pods(api)} == {digest}
    conditions = {c["type"]: (c["status"], c["reason"]) for c in deploy["status"]["conditions"]}
    assert conditions == {"Available": ("True", "MinimumReplicasAvailable"),
                          "Progressing": ("True", "NewReplicaSetAvailable")}
    assert deploy["status"]["readyReplicas"] == 3 and deploy["status"]["unavailableReplicas"] == 0


@pytest.mark.parametrize("surge, unavailable, max_pods, min_ready", [
    pytest.param(1, 0, 4, 3, id="maxSurge 1, maxUnavailable 0: never fewer than 3 ready, never more than 4 pods"),
    pytest.param(0, 1, 3, 2, id="maxSurge 0, maxUnavailable 1: never more than 3 pods, never fewer than 2 ready"),
    pytest.param("25%", "25%", 4, 3, id="the default 25% of 3: surge rounds up to 1, unavailability down to 0"),
])
async def test_a_rolling_update_stays_within_max_surge_and_max_unavailable_at_every_change(
        server, surge, unavailable, max_pods, min_ready):
    api = server.api
    async with kubelet(api):
        await api.create(DEPLOYS, "default", rolling(3, surge, unavailable), OPTS)
        await until(lambda: the_deployment(api), rolled_out)
        seen: list[tuple[int, int]] = []
        api.cache.on_event.append(lambda _e: seen.append(
            (len(live_pods(api)), sum(1 for p in live_pods(api) if is_ready(p)))))
        sizes: list[dict[str, int]] = []  # the ReplicaSets' replicas after each change
        api.cache.on_event.append(lambda _e: sizes.append(
            {r.obj["metadata"]["name"]: r.obj["spec"]["replicas"] for r in api.cache.items(RS.store_prefix)}))
        await set_image(api, "web:2")
        await until(lambda: the_deployment(api), rolled_out)
    assert max(total for total, _ in seen) <= max_pods
    assert min(ready for _, ready in seen) >= min_ready
    assert max(sum(s.values()) for s in sizes) <= max_pods and max(max(s.values()) for s in sizes) == 3
    old, new = await replica_sets(api)
    assert (old["spec"]["replicas"], new["spec"]["replicas"]) == (0, 3)
    assert new["metadata"]["annotations"][REVISION] == "2"
    assert {p["spec"]["containers"][0]["image"] for p in live_pods(api)} == {"web:2"}


async def test_recreate_removes_every_old_pod_before_it_makes_a_new_one(server):
    api = server.api
    async with kubelet(api):
        await api.create(DEPLOYS, "default", deployment(strategy={"type": "Recreate"}), OPTS)
        await until(lambda: the_deployment(api), rolled_out)
        mixed: list[set[str]] = []
        api.cache.on_event.append(lambda _e: mixed.append({p["spec"]["containers"][0]["image"] for p in live_pods(api)}))
        await set_image(api, "web:2")
        await until(lambda: the_deployment(api), rolled_out)
    assert {"web:1", "web:2"} not in mixed
    assert set() in mixed  # there was a moment with none


async def test_recreate_waits_until_the_old_pods_have_stopped_not_only_until_they_are_told_to(server):
    """Old pods on a node stop within their grace period: until their agent reports them finished
    (Failed or Succeeded, still there until it reports them gone) they still run (holding a port, a
    volume, a lock), and Recreate makes no new pod meanwhile, as Kubernetes waits for every old pod
    out of a running phase."""
    from corral.testing.builders import NodeBuilder

    api = server.api
    await api.create(by_kind("Node"), None, NodeBuilder("n1").obj, OPTS)

    async def on_node() -> None:  # binds each new pod to n1, and runs it; stopping is left to the test
        while True:
            for pod in live_pods(api):
                name = pod["metadata"]["name"]
                with contextlib.suppress(errors.ApiError):
                    if not pod["spec"].get("nodeName"):
                        await api.bind("default", name, {"apiVersion": "v1", "kind": "Binding", "metadata": {
                            "name": name}, "target": {"kind": "Node", "name": "n1"}}, OPTS)
                    elif not is_ready(pod) and not pod["metadata"].get("deletionTimestamp"):
                        status = {"phase": "Running", "conditions": [
                            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
                        await api.update(PODS, "default", name, {**pod, "status": status}, OPTS, subresource="status")
            await asyncio.sleep(0.05)

    def pods_of(image: str) -> list[dict]:
        return [r.obj for r in api.cache.items(PODS.store_prefix) if r.obj["spec"]["containers"][0]["image"] == image]

    running = asyncio.create_task(on_node())
    try:
        await api.create(DEPLOYS, "default", deployment(replicas=2, strategy={"type": "Recreate"}), OPTS)
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 2))
        await set_image(api, "web:2")
        stopping = await until(lambda: asyncio.sleep(0, pods_of("web:1")),
                               lambda ps: len(ps) == 2 and all(p["metadata"].get("deletionTimestamp") for p in ps))
        await asyncio.sleep(0.5)  # the old ReplicaSet's count is 0 by now: terminating pods are not replicas
        assert pods_of("web:2") == []

        async def report(pod: dict, phase: str) -> None:  # as the agent does when the containers exit
            current = (await api.current(PODS, "default", pod["metadata"]["name"])).obj
            await api.update(PODS, "default", pod["metadata"]["name"], {**current, "status": {
                **current["status"], "phase": phase}}, OPTS, subresource="status")
        await report(stopping[0], "Failed")  # exited with an error as it stopped
        await asyncio.sleep(0.5)
        assert pods_of("web:2") == []  # the other one still runs
        await report(stopping[1], "Succeeded")
        await until(lambda: asyncio.sleep(0, pods_of("web:2")), lambda ps: len(ps) == 2)
        assert len(pods_of("web:1")) == 2  # both finished, neither gone yet
        for pod in stopping:  # and then gone
            await report(pod, "Terminated")
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 2))
        assert pods_of("web:1") == [] and len(pods_of("web:2")) == 2
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


async def test_a_recreate_deployment_scales_up_at_once_its_own_pods_running_or_not(server):
    """Scaling is no rollout: neither the new set's own running pods nor old sets with no pod left
    hold it back, before a rollout (no old set) or after one."""
    api = server.api
    async with kubelet(api):
        await api.create(DEPLOYS, "default", deployment(replicas=1, strategy={"type": "Recreate"}), OPTS)
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 1))
        await api.patch(DEPLOYS, "default", "web", {"spec": {"replicas": 2}}, "merge", OPTS)
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 2))
        await set_image(api, "web:2")
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 2))
        await api.patch(DEPLOYS, "default", "web", {"spec": {"replicas": 3}}, "merge", OPTS)
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 3))
        assert sorted(p["spec"]["containers"][0]["image"] for p in live_pods(api)) == ["web:2"] * 3


async def test_going_back_to_an_earlier_template_reuses_its_replica_set_as_the_newest_revision(server):
    api = server.api
    async with kubelet(api):
        await api.create(DEPLOYS, "default", deployment(), OPTS)
        await until(lambda: the_deployment(api), rolled_out)
        first = (await replica_sets(api))[0]["metadata"]["name"]
        await set_image(api, "web:2")
        await until(lambda: the_deployment(api), rolled_out)
        # What kubectl rollout undo sends: the old template, as Go writes it (unset fields null or empty).
        await api.patch(DEPLOYS, "default", "web", [{"op": "replace", "path": "/spec/template", "value": {
            "metadata": {"creationTimestamp": None, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "web:1", "resources": {}}], "restartPolicy": "Always",
                     "terminationGracePeriodSeconds": 30}}}], "json", OPTS)
        deploy = await until(lambda: the_deployment(api), rolled_out)
    sets = await replica_sets(api)
    assert len(sets) == 2
    assert sets[-1]["metadata"]["name"] == first and sets[-1]["metadata"]["annotations"][REVISION] == "3"
    assert deploy["metadata"]["annotations"][REVISION] == "3"


async def test_a_paused_deployment_scales_but_rolls_nothing_out_until_resumed(server):
    api = server.api
    async with kubelet(api):
        await api.create(DEPLOYS, "default", deployment(), OPTS)
        await until(lambda: the_deployment(api), rolled_out)
        await api.patch(DEPLOYS, "default", "web", {"spec": {"paused": True}}, "merge", OPTS)
        await set_image(api, "web:2")
        await write_scale(api, DEPLOYS, "default", "web", {"spec": {"replicas": 4}}, OPTS, "merge")
        deploy = await until(lambda: the_deployment(api), lambda d: (d.get("status") or {}).get("replicas") == 4)
        assert len(await replica_sets(api)) == 1
        progressing = next(c for c in deploy["status"]["conditions"] if c["type"] == "Progressing")
        assert (progressing["status"], progressing["reason"]) == ("Unknown", "DeploymentPaused")
        await api.patch(DEPLOYS, "default", "web", {"spec": {"paused": None}}, "merge", OPTS)
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 4))
    assert {p["spec"]["containers"][0]["image"] for p in live_pods(api)} == {"web:2"}


async def test_old_replica_sets_beyond_the_history_limit_are_deleted_oldest_first(server):
    api = server.api
    async with kubelet(api):
        await api.create(DEPLOYS, "default", deployment(replicas=1, revisionHistoryLimit=1), OPTS)
        for image in ("web:2", "web:3"):
            await until(lambda: the_deployment(api), lambda d: rolled_out(d, 1))
            await set_image(api, image)
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 1))
        sets = await until(lambda: replica_sets(api), lambda s: len(s) == 2)
    assert [rs["metadata"]["annotations"][REVISION] for rs in sets] == ["2", "3"]


async def test_a_rollout_that_makes_no_progress_is_reported_stuck_after_its_deadline(server):
    api = server.api
    async with kubelet(api):
        await api.create(DEPLOYS, "default", deployment(replicas=2, progressDeadlineSeconds=1), OPTS)
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 2))
        await set_image(api, BROKEN)

        def stuck(d: dict) -> bool:
            return any(c["type"] == "Progressing" and c["reason"] == "ProgressDeadlineExceeded"
                       for c in (d.get("status") or {}).get("conditions") or ())

        deploy = await until(lambda: the_deployment(api), stuck, timeout=10)
    progressing = next(c for c in deploy["status"]["conditions"] if c["type"] == "Progressing")
    assert progressing["status"] == "False"
    assert progressing["message"].endswith("has timed out progressing.")
    # The old pods still serve: maxUnavailable (25% of 2 → 0) kept them.
    assert sum(1 for p in live_pods(api) if is_ready(p)) == 2


async def test_deleting_a_deployment_deletes_its_replica_sets_and_their_pods(server):
    api = server.api
    async with kubelet(api):
        await api.create(DEPLOYS, "default", deployment(replicas=2), OPTS)
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 2))
    await api.delete(DEPLOYS, "default", "web", None, None, None)
    await until(lambda: replica_sets(api), lambda s: s == [])
    await until(lambda: asyncio.sleep(0, live_pods(api)), lambda ps: ps == [])


@pytest.mark.parametrize("spec, field", [
    pytest.param({"strategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}}, "spec.strategy.rollingUpdate",
                 id="Recreate takes no rollingUpdate"),
    pytest.param({"strategy": {"type": "Blue-Green"}}, "spec.strategy.type", id="an unknown strategy is refused"),
    pytest.param({"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}},
                 "spec.strategy.rollingUpdate.maxUnavailable", id="surge and unavailability cannot both be 0"),
    pytest.param({"strategy": {"rollingUpdate": {"maxUnavailable": "150%"}}},
                 "spec.strategy.rollingUpdate.maxUnavailable", id="more than 100% unavailable is refused"),
    pytest.param({"strategy": {"rollingUpdate": {"maxSurge": "lots"}}}, "spec.strategy.rollingUpdate.maxSurge",
                 id="a surge that is neither a count nor a percentage is refused"),
    pytest.param({"progressDeadlineSeconds": 5, "minReadySeconds": 10}, "spec.progressDeadlineSeconds",
                 id="the progress deadline must exceed minReadySeconds"),
    pytest.param({"revisionHistoryLimit": -1}, "spec.revisionHistoryLimit", id="a negative history is refused"),
])
async def test_an_invalid_deployment_is_refused_with_the_field_path(server, spec, field):
    with pytest.raises(errors.ApiError) as refused:
        await server.api.create(DEPLOYS, "default", deployment(**spec), OPTS)
    assert refused.value.code == 422
    assert field in refused.value.message


async def test_each_scaling_of_a_replica_set_is_an_event_on_the_deployment(server):
    api = server.api
    async with kubelet(api):
        await api.create(DEPLOYS, "default", deployment(replicas=2, strategy={"type": "Recreate"}), OPTS)
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 2))
        await set_image(api, "web:2")
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 2))
    old, new = (rs["metadata"]["name"] for rs in await replica_sets(api))

    async def told() -> list[tuple[str, str]]:
        await api.cache.wait_consistent()
        return sorted((e.obj["type"], e.obj["message"]) for e in api.cache.items(by_kind("Event").store_prefix)
                      if e.obj["involvedObject"]["kind"] == "Deployment" and e.obj["reason"] == "ScalingReplicaSet")

    assert await until(told, lambda ms: len(ms) == 3) == sorted([
        ("Normal", f"Scaled up replica set {old} from 0 to 2"), ("Normal", f"Scaled down replica set {old} from 2 to 0"),
        ("Normal", f"Scaled up replica set {new} from 0 to 2")])


@pytest.mark.parametrize("how", ["RollingUpdate", "Recreate", "paused"])
async def test_a_settled_deployment_is_synced_without_a_single_write_and_its_set_says_the_size_it_was_scaled_for(
        server, monkeypatch, how):
    from corral.controllers.workloads.deployment import DESIRED, DeploymentController

    api = server.api
    obj = deployment(replicas=3, strategy={"type": "Recreate" if how == "Recreate" else "RollingUpdate"})
    obj["metadata"]["annotations"] = {"kubernetes.io/change-cause": "first"}  # its ReplicaSet carries it too
    async with kubelet(api):
        await api.create(DEPLOYS, "default", obj, OPTS)
        await until(lambda: the_deployment(api), rolled_out)
        if how == "paused":
            await api.patch(DEPLOYS, "default", "web", {"spec": {"paused": True}}, "merge", OPTS)
        await write_scale(api, DEPLOYS, "default", "web", {"spec": {"replicas": 2}}, OPTS, "merge")
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 2))
    (rs,) = await replica_sets(api)
    assert rs["metadata"]["annotations"][DESIRED] == "2"
    controller = DeploymentController(api)
    controller.initial_keys()
    writes = record_writes(api, monkeypatch)
    await controller.sync(DEPLOYS.key("default", "web"))
    assert writes == []


async def test_a_paused_deployment_mid_rollout_scales_its_replica_sets_in_proportion(server):
    api = server.api
    async with kubelet(api):
        await api.create(DEPLOYS, "default", deployment(replicas=4, strategy={"rollingUpdate": {
            "maxSurge": 0, "maxUnavailable": 2}}), OPTS)
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 4))
        await set_image(api, BROKEN)  # the new pods never get ready: the rollout stops halfway
        await until(lambda: replica_sets(api), lambda s: len(s) == 2 and [rs["spec"]["replicas"] for rs in s] == [2, 2])
        await api.patch(DEPLOYS, "default", "web", {"spec": {"paused": True}}, "merge", OPTS)
        await write_scale(api, DEPLOYS, "default", "web", {"spec": {"replicas": 8}}, OPTS, "merge")
        sets = await until(lambda: replica_sets(api), lambda s: sum(rs["spec"]["replicas"] for rs in s) == 8)
        assert [rs["spec"]["replicas"] for rs in sets] == [4, 4]  # 2:2 stays 1:1
        await write_scale(api, DEPLOYS, "default", "web", {"spec": {"replicas": 3}}, OPTS, "merge")
        sets = await until(lambda: replica_sets(api), lambda s: sum(rs["spec"]["replicas"] for rs in s) == 3)
        assert sorted(rs["spec"]["replicas"] for rs in sets) == [1, 2]


async def orphaned_replica_set(api) -> dict:
    """A Deployment of 2 rolled out, then deleted with ``--cascade=orphan``: its ReplicaSet, owned by nobody."""
    await api.create(DEPLOYS, "default", deployment(replicas=2), OPTS)
    await until(lambda: the_deployment(api), lambda d: rolled_out(d, 2))
    (first,) = await replica_sets(api)
    await api.delete(DEPLOYS, "default", "web", None, None, None, propagation="Orphan")
    await until(lambda: replica_sets(api), lambda s: len(s) == 1 and not s[0]["metadata"].get("ownerReferences"))
    return first


async def test_a_deployment_applied_again_adopts_the_replica_sets_an_orphaning_delete_left(server):
    api = server.api
    async with kubelet(api):
        first = await orphaned_replica_set(api)
        pods = {p["metadata"]["name"] for p in live_pods(api)}
        await api.create(DEPLOYS, "default", deployment(replicas=2), OPTS)
        sets = await until(lambda: replica_sets(api), lambda s: len(s) == 1 and s[0]["metadata"].get("ownerReferences"))
        deploy = await until(lambda: the_deployment(api), lambda d: rolled_out(d, 2))
    assert sets[0]["metadata"]["uid"] == first["metadata"]["uid"]  # the same ReplicaSet, not a new one
    assert sets[0]["metadata"]["ownerReferences"][0]["uid"] == deploy["metadata"]["uid"]
    assert {p["metadata"]["name"] for p in live_pods(api)} == pods  # and the same pods


async def test_replica_sets_it_adopted_are_its_own_even_when_its_cache_hears_of_the_adoption_late(server, monkeypatch):
    """On etcd a server's own writes reach its cache a moment after they are acknowledged. A sync that
    adopted ReplicaSets waits for them before it looks for its current one: looking first, it would
    find none and make another for the same template."""
    api = server.api
    async with kubelet(api):
        first = await orphaned_replica_set(api)
        added: list[str] = []
        api.cache.on_event.append(lambda e: e.type is EventType.ADDED and e.key.startswith(RS.store_prefix)
                                  and added.append(e.key))
        late = LateCache(api.cache, monkeypatch)
        late.hold_from(lambda batch: any(e.key.startswith(RS.store_prefix) and e.record.obj["metadata"].get(
            "ownerReferences") for e in batch if e.type is EventType.MODIFIED))
        await api.create(DEPLOYS, "default", deployment(replicas=2), OPTS)
        await until(lambda: asyncio.sleep(0, late.held_events()), bool)  # adopted
        await asyncio.sleep(0.5)  # what the sync would make on looking too early, it makes now
        late.release()
        deploy = await until(lambda: the_deployment(api), lambda d: rolled_out(d, 2))
        sets = await replica_sets(api)
    assert [rs["metadata"]["uid"] for rs in sets] == [first["metadata"]["uid"]]
    assert added == [] and "collisionCount" not in deploy["status"]


async def test_a_replica_set_changed_since_the_controller_last_saw_it_is_not_written_over(tmp_path, monkeypatch):
    """Its writes name the version of the ReplicaSet they were decided on: one that someone else has
    changed meanwhile (here `kubectl scale rs` to 5, which the controller has not heard of yet) is
    refused, not applied to the newer version, and the sync is tried again on what is now in view."""
    from corral.controllers.workloads.deployment import DeploymentController

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        controller = DeploymentController(api)
        key = DEPLOYS.key("default", "web")
        await api.create(DEPLOYS, "default", deployment(replicas=3), OPTS)
        await api.cache.wait_consistent()
        controller.initial_keys()
        await controller.sync(key)  # its ReplicaSet, of 3
        (rs,) = await replica_sets(api)
        await write_scale(api, DEPLOYS, "default", "web", {"spec": {"replicas": 2}}, OPTS, "merge")
        await api.cache.wait_consistent()
        controller.reset()
        controller.initial_keys()
        late = LateCache(api.cache, monkeypatch)
        late.hold_from(lambda batch: True)
        await write_scale(api, RS, "default", rs["metadata"]["name"], {"spec": {"replicas": 5}}, OPTS, "merge")
        syncing = asyncio.ensure_future(controller.sync(key))  # decides on 3: to 2
        await asyncio.sleep(0.3)  # its write lost to the newer version: it waits to hear of that one
        late.release()
        with pytest.raises(errors.ApiError) as refused:
            await syncing
        assert refused.value.code == 409
        assert (await api.current(RS, "default", rs["metadata"]["name"])).obj["spec"]["replicas"] == 5
        controller.reset()
        controller.initial_keys()
        await controller.sync(key)
        assert [r["spec"]["replicas"] for r in await replica_sets(api)] == [2]


async def test_the_replica_sets_a_rollout_makes_are_whole_from_their_first_version(server):
    """Each ReplicaSet as created (not as a later sync mends it): its revision, the size it is made
    for, the Deployment as controller, minReadySeconds, the template with its hash label; the second
    one starts within the surge, as kubectl rollout history and status read them."""
    from corral.controllers.workloads.deployment import DESIRED

    api = server.api
    created: list[dict] = []
    api.cache.on_event.append(lambda e: e.type is EventType.ADDED and e.key.startswith(RS.store_prefix)
                              and created.append(e.record.obj))
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    spec = deployment(replicas=3, strategy=strategy, minReadySeconds=5)
    spec["spec"]["template"]["metadata"]["annotations"] = {"team": "web"}
    async with kubelet(api):
        await api.create(DEPLOYS, "default", spec, OPTS)
        await until(lambda: the_deployment(api), rolled_out)
        await set_image(api, "web:2")
        deploy = await until(lambda: the_deployment(api), rolled_out)
    uid = deploy["metadata"]["uid"]
    assert len(created) == 2
    for rs, revision, initial, image in ((created[0], "1", 3, "web:1"), (created[1], "2", 1, "web:2")):
        meta, digest = rs["metadata"], rs["metadata"]["labels"][HASH_LABEL]
        assert (meta["name"], meta["namespace"]) == (f"web-{digest}", "default")
        assert meta["labels"] == {"app": "web", HASH_LABEL: digest}
        assert (meta["annotations"][REVISION], meta["annotations"][DESIRED]) == (revision, "3")
        assert meta["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": uid,
                                            "controller": True, "blockOwnerDeletion": True}]
        assert (rs["spec"]["replicas"], rs["spec"]["minReadySeconds"]) == (initial, 5)
        assert rs["spec"]["selector"] == {"matchLabels": {"app": "web", HASH_LABEL: digest}}
        template = rs["spec"]["template"]
        assert template["metadata"] == {"labels": {"app": "web", HASH_LABEL: digest}, "annotations": {"team": "web"}}
        assert template["spec"]["containers"][0]["image"] == image
    assert deploy["metadata"]["annotations"][REVISION] == "2"

    async def told() -> list[tuple[str, str]]:
        await api.cache.wait_consistent()
        return [(e.obj["type"], e.obj["message"]) for e in api.cache.items(by_kind("Event").store_prefix)
                if e.obj["reason"] == "ScalingReplicaSet" and e.obj["message"].endswith("from 0 to 3")]

    first = created[0]["metadata"]["name"]
    assert await until(told, bool) == [("Normal", f"Scaled up replica set {first} from 0 to 3")]


@pytest.mark.parametrize("limits, before, after", [
    pytest.param({"maxSurge": 0, "maxUnavailable": 1}, [(3, 3), (1, 0), (0, 0)], [3, 0, 0],
                 id="the budget goes to pods that serve nobody, wherever they are, before available ones"),
    pytest.param({"maxSurge": 0, "maxUnavailable": 2}, [(3, 1), (1, 0), (0, 0)], [1, 1, 0],
                 id="oldest first, and no further than the budget"),
    pytest.param({"maxSurge": "0%", "maxUnavailable": "10%"}, [(4, 4), (0, 0)], [3, 0],
                 id="budgets that both round to 0 let one pod go at a time"),
    pytest.param({"maxSurge": 1, "maxUnavailable": 0}, [(0, 0), (2, 2)], [0, 4],
                 id="the new set grows to the Deployment's size, not past it, however much room the surge leaves"),
    pytest.param({"maxSurge": 0, "maxUnavailable": 1}, [(2, 2), (2, 2), (0, 0)], [1, 2, 0],
                 id="what one set took of the budget the next cannot take again"),
    pytest.param({"maxSurge": 1, "maxUnavailable": 1}, [(3, 3, 4), (1, 1)], [2, 1],
                 id="pods a set was scaled down from and still counts fill the surge: the new set waits for them"),
])
async def test_one_step_of_a_rolling_update_from_a_given_state(tmp_path, limits, before, after):
    """ReplicaSets of revisions 1, 2, ... (the last the Deployment's current template) at (replicas,
    available[, the pods its status counts when not ``replicas``]) ``before``: one sync leaves them
    at ``after`` replicas, as Kubernetes' rolling update would (4 replicas wanted, so at least
    4 - maxUnavailable available)."""
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        sync = one_sync(api)
        await api.create(DEPLOYS, "default", rolling(4, limits["maxSurge"], limits["maxUnavailable"]), OPTS)
        await sync()
        for image in range(2, len(before) + 1):
            await set_image(api, f"web:{image}")
            await sync()
        sets = await replica_sets(api)
        assert [rs["metadata"]["annotations"][REVISION] for rs in sets] == [str(i + 1) for i in range(len(before))]
        for rs, (replicas, available, *counted) in zip(sets, before):
            await set_state(api, rs["metadata"]["name"], replicas, available, *counted)
        await sync()
        assert [rs["spec"]["replicas"] for rs in await replica_sets(api)] == after


@pytest.mark.parametrize("before, after", [
    pytest.param([(2, 2), (3, 3)], [0, 3], id="the new set already at the new size"),
    pytest.param([(3, 3), (1, 0)], [2, 1], id="the new set with no room to grow"),
])
async def test_a_deployment_scaled_to_3_mid_rollout_leaves_every_set_it_scales_desiring_3(tmp_path, before, after):
    """The desired-replicas annotation says what size the Deployment had when it last sized a set:
    the new set carries the new size even where its own size stays."""
    from corral.controllers.workloads.deployment import DESIRED

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        sync = one_sync(api)
        await api.create(DEPLOYS, "default", rolling(4, 1, 1), OPTS)
        await sync()
        await set_image(api, "web:2")
        await sync()
        for rs, (replicas, available) in zip(await replica_sets(api), before):
            await set_state(api, rs["metadata"]["name"], replicas, available)
        await api.patch(DEPLOYS, "default", "web", {"spec": {"replicas": 3}}, "merge", OPTS)
        await sync()
        sets = await replica_sets(api)
    assert [rs["spec"]["replicas"] for rs in sets] == after
    assert [rs["metadata"]["annotations"][DESIRED] for rs in sets] == ["3", "3"]


async def test_the_sync_that_makes_a_replica_set_numbers_the_deployment_with_its_revision(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        sync = one_sync(api)
        await api.create(DEPLOYS, "default", deployment(replicas=1), OPTS)
        revisions = []
        for image in ("web:1", "web:2"):
            await set_image(api, image)
            await sync()
            revisions.append((await the_deployment(api))["metadata"]["annotations"][REVISION])
    assert revisions == ["1", "2"]


async def test_the_status_a_deployment_goes_through_as_kubectl_reads_it(tmp_path):
    """Each sync's whole status on a fake clock: made, available, settled (nothing rewritten), a new
    template, past its progress deadline, paused. A condition's lastTransitionTime moves only when its
    status changes; its lastUpdateTime also when the Deployment progressed or its reason changed."""
    from corral.api.defaults import rfc3339

    now = [1_800_000_000.0]
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        sync = one_sync(api, clock=lambda: now[0])

        async def status_after(seconds: float) -> dict:
            now[0] += seconds
            await sync()
            return (await the_deployment(api))["status"]

        def counts(replicas: int, updated: int, available: int, unavailable: int) -> dict:
            return {"replicas": replicas, "updatedReplicas": updated, "readyReplicas": available,
                    "availableReplicas": available, "unavailableReplicas": unavailable}

        def condition(kind: str, status: str, updated: float, transition: float, reason: str, message: str) -> dict:
            return {"type": kind, "status": status, "lastUpdateTime": rfc3339(updated),
                    "lastTransitionTime": rfc3339(transition), "reason": reason, "message": message}

        t0 = now[0]
        await api.create(DEPLOYS, "default", deployment(replicas=2, progressDeadlineSeconds=60), OPTS)
        made = await status_after(0)
        [first] = [rs["metadata"]["name"] for rs in await replica_sets(api)]
        assert made == {"observedGeneration": 1, **counts(0, 0, 0, 2), "conditions": [
            condition("Available", "False", t0, t0, "MinimumReplicasUnavailable",
                      "Deployment does not have minimum availability."),
            condition("Progressing", "True", t0, t0, "NewReplicaSetCreated", f'Created new replica set "{first}"')]}

        await set_state(api, first, 2, 2)
        t1 = t0 + 10
        available = await status_after(10)
        assert available == {"observedGeneration": 1, **counts(2, 2, 2, 0), "conditions": [
            condition("Available", "True", t1, t1, "MinimumReplicasAvailable", "Deployment has minimum availability."),
            condition("Progressing", "True", t1, t0, "NewReplicaSetAvailable",
                      f'ReplicaSet "{first}" has successfully progressed.')]}
        assert await status_after(10) == available  # settled: nothing to write

        await set_image(api, "web:2")
        t3 = t1 + 20
        rolling = await status_after(10)
        [second] = [rs["metadata"]["name"] for rs in await replica_sets(api) if rs["metadata"]["name"] != first]
        progressing = condition("Progressing", "True", t3, t0, "NewReplicaSetCreated",
                                f'Created new replica set "{second}"')
        assert rolling == {"observedGeneration": 2, **counts(2, 0, 2, 0), "conditions": [
            available["conditions"][0], progressing]}
        assert await status_after(30) == rolling  # no progress, within the deadline: as it was

        t5 = t3 + 61
        stuck = await status_after(31)
        assert stuck == {**rolling, "conditions": [available["conditions"][0], condition(
            "Progressing", "False", t5, t5, "ProgressDeadlineExceeded", f'ReplicaSet "{second}" has timed out progressing.')]}

        await api.patch(DEPLOYS, "default", "web", {"spec": {"paused": True}}, "merge", OPTS)
        t6 = t5 + 1
        assert await status_after(1) == {**rolling, "observedGeneration": 3, "conditions": [
            available["conditions"][0],
            condition("Progressing", "Unknown", t6, t6, "DeploymentPaused", "Deployment is paused")]}


async def test_only_a_stopped_pod_of_a_recreate_deployment_queues_it(tmp_path):
    """What a pod's deletion queues: its Deployment when it ran for a Recreate one (which may be
    waiting for it); nothing for a rolling Deployment's pod, a bare ReplicaSet's, another kind's or
    an ownerless one."""
    from corral.controllers.workloads.deployment import DeploymentController

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        controller = DeploymentController(api)
        await api.create(DEPLOYS, "default", rolling(1, 1, 0), OPTS)
        await api.create(DEPLOYS, "default", {**deployment(1, strategy={"type": "Recreate"}),
                                              "metadata": {"name": "old"}}, OPTS)
        await api.create(RS, "default", {"metadata": {"name": "solo"}, "spec": {  # owned by no Deployment
            "replicas": 0, "selector": {"matchLabels": {"app": "solo"}},
            "template": {"metadata": {"labels": {"app": "solo"}}, "spec": {"containers": [
                {"name": "c", "image": "solo"}]}}}}, OPTS)
        for name in ("web", "old"):
            await api.cache.wait_consistent()
            controller.reset()
            controller.initial_keys()
            await controller.sync(DEPLOYS.key("default", name))
        await api.cache.wait_consistent()
        controller.reset()
        controller.initial_keys()
        sets = {rs["metadata"]["ownerReferences"][0]["name"] if rs["metadata"].get("ownerReferences") else "solo": rs
                for rs in (r.obj for r in api.cache.items(RS.store_prefix))}

        def owned_by(kind: str, owner: dict | None) -> list:
            return [] if owner is None else [{"apiVersion": "apps/v1", "kind": kind, "name": owner["metadata"]["name"],
                                              "uid": owner["metadata"]["uid"], "controller": True}]

        events: list = []
        api.cache.on_event.append(events.append)
        queued = {}
        for name, refs in (("of-old", owned_by("ReplicaSet", sets["old"])), ("of-web", owned_by("ReplicaSet", sets["web"])),
                           ("of-solo", owned_by("ReplicaSet", sets["solo"])), ("of-job", owned_by("Job", sets["old"])),
                           ("bare", [])):
            await api.create(PODS, "default", {"metadata": {"name": name, "ownerReferences": refs},
                                               "spec": {"containers": [{"name": "c", "image": "x"}]}}, OPTS)
            events.clear()
            await api.delete(PODS, "default", name, None, None, None)
            await api.cache.wait_consistent()
            queued[name] = [sorted(controller.keys_for(e)) for e in events if e.key.startswith(PODS.store_prefix)]
    assert queued == {"of-old": [[DEPLOYS.key("default", "old")]], "of-web": [[]], "of-solo": [[]], "of-job": [[]],
                      "bare": [[]]}


@pytest.mark.parametrize("annotations, revision", [
    ({REVISION: "3"}, 3), ({REVISION: "three"}, 0), ({}, 0), (None, 0)])
def test_a_revision_is_read_from_its_annotation_and_is_0_without_a_number(annotations, revision):
    from corral.controllers.workloads.deployment import _revision

    assert _revision({"metadata": {"annotations": annotations}} if annotations is not None else {}) == revision


def test_a_new_replica_set_inherits_the_deployments_annotations_but_its_own_bookkeeping():
    from corral.controllers.workloads.deployment import _inherited

    deploy = {"metadata": {"annotations": {"kubernetes.io/change-cause": "image web:2", "team": "web", REVISION: "4",
                                           "kubectl.kubernetes.io/last-applied-configuration": "{}"}}}
    assert _inherited(deploy) == {"kubernetes.io/change-cause": "image web:2", "team": "web"}
    assert _inherited({"metadata": {}}) == {}


async def test_history_keeps_an_old_replica_set_until_its_last_pod_is_gone(tmp_path):
    """revisionHistoryLimit 0: the old set scaled to 0 is deleted only once its status counts no pod
    (deleting it earlier would leave its stopping pods to the garbage collector)."""
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        sync = one_sync(api)
        await api.create(DEPLOYS, "default", {**rolling(2, 2, 0), "spec": {
            **rolling(2, 2, 0)["spec"], "revisionHistoryLimit": 0}}, OPTS)
        await sync()
        [old] = [rs["metadata"]["name"] for rs in await replica_sets(api)]
        await set_image(api, "web:2")
        await sync()
        new = next(rs["metadata"]["name"] for rs in await replica_sets(api) if rs["metadata"]["name"] != old)
        await set_state(api, new, 2, 2)
        await set_state(api, old, 0, 0, 2)  # scaled to 0, two pods still stopping
        await sync()
        assert sorted(rs["metadata"]["name"] for rs in await replica_sets(api)) == sorted([old, new])
        await set_state(api, old, 0, 0)
        await sync()
        assert [rs["metadata"]["name"] for rs in await replica_sets(api)] == [new]


async def test_adoption_takes_only_the_orphans_its_selector_matches_and_keeps_their_other_owners(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        sync = one_sync(api)
        keeper = {"apiVersion": "v1", "kind": "ConfigMap", "name": "keeper", "uid": "keeper-uid"}  # no controller
        for name, app, refs in (("aaa-other", "other", []), ("web-old", "web", [keeper])):
            await api.create(RS, "default", {"metadata": {"name": name, "labels": {"app": app},
                                                          "ownerReferences": refs}, "spec": {
                "replicas": 0, "selector": {"matchLabels": {"app": app}}, "template": {
                    "metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": "c", "image": app}]}}}},
                OPTS)
        await api.create(DEPLOYS, "default", deployment(replicas=1), OPTS)
        await sync()
        uid = (await the_deployment(api))["metadata"]["uid"]
        owners = {rs["metadata"]["name"]: [r["uid"] for r in rs["metadata"].get("ownerReferences") or ()]
                  for rs in (r.obj for r in api.cache.items(RS.store_prefix))}
    assert owners.pop("aaa-other") == [] and owners.pop("web-old") == ["keeper-uid", uid]
    assert list(owners.values()) == [[uid]]  # and its own for its template


async def test_a_paused_deployment_scaled_up_with_every_set_at_0_grows_its_newest(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        sync = one_sync(api)
        await api.create(DEPLOYS, "default", deployment(replicas=1), OPTS)
        await sync()
        await set_image(api, "web:2")
        await sync()
        sets = [rs["metadata"]["name"] for rs in await replica_sets(api)]
        for name in sets:
            await set_state(api, name, 0, 0)
        await api.patch(DEPLOYS, "default", "web", {"spec": {"paused": True, "replicas": 2}}, "merge", OPTS)
        await sync()
        assert [rs["spec"]["replicas"] for rs in await replica_sets(api)] == [0, 2]


def one_sync(api, clock=time.time):
    """A Deployment controller that syncs ``web`` once per call, from the store as it is then."""
    from corral.controllers.workloads.deployment import DeploymentController

    controller, key = DeploymentController(api, clock=clock), DEPLOYS.key("default", "web")

    async def sync() -> None:
        await api.cache.wait_consistent()
        controller.reset()
        controller.initial_keys()
        await controller.sync(key)
        await api.cache.wait_consistent()
    return sync


async def set_state(api, name: str, replicas: int, available: int, counted: int | None = None) -> None:
    """ReplicaSet ``name`` at ``replicas``, ``available`` of its pods available, and its status
    counting ``counted`` pods (``replicas`` by default)."""
    await write_scale(api, RS, "default", name, {"spec": {"replicas": replicas}}, OPTS, "merge")
    current = (await api.current(RS, "default", name)).obj
    await api.update(RS, "default", name, {**current, "status": {
        "replicas": replicas if counted is None else counted, "readyReplicas": available,
        "availableReplicas": available, "observedGeneration": current["metadata"]["generation"]}},
        OPTS, subresource="status")


async def test_a_new_set_made_while_an_old_one_still_counts_pods_it_was_scaled_down_from_starts_within_the_surge(
        tmp_path):
    """Scaled to 0 and at once to 2 with a new image: the old set's two pods, not yet removed, fill
    the surge but one, so the new set starts at 1, not at 2."""
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        sync = one_sync(api)
        await api.create(DEPLOYS, "default", rolling(2, 1, 1), OPTS)
        await sync()
        [old] = await replica_sets(api)
        await set_state(api, old["metadata"]["name"], 0, 2, 2)
        await set_image(api, "web:2")
        await sync()
        assert [rs["spec"]["replicas"] for rs in await replica_sets(api)] == [0, 1]


def _set(name: str, revision: int, replicas: int, desired: str | None = None) -> dict:
    from corral.controllers.workloads.deployment import DESIRED

    annotations = {REVISION: str(revision), **({DESIRED: desired} if desired is not None else {})}
    return {"metadata": {"name": name, "annotations": annotations}, "spec": {"replicas": replicas}}


@pytest.mark.parametrize("sets, wanted, counts", [
    pytest.param([("a", 1, 2, "4"), ("b", 2, 2, "4")], 8, [4, 4], id="2:2 of 4 to 8 stays 1:1"),
    pytest.param([("a", 1, 2, "4"), ("b", 2, 2, "4")], 3, [1, 2], id="what rounding leaves goes to the newest of equals"),
    pytest.param([("a", 1, 3, "4"), ("b", 2, 1, "4")], 5, [4, 1], id="and first to the largest"),
    pytest.param([("a", 1, 1, "4"), ("b", 2, 3, "4")], 2, [0, 2], id="a set rounded down to 0 gets nothing left over"),
    pytest.param([("a", 1, 4, "8"), ("b", 2, 1, "2")], 8, [4, 4],
                 id="a scaling cut short: the set already scaled for 8 keeps its size, the other catches up"),
    pytest.param([("a", 1, 5, "8"), ("b", 2, 1, "4")], 8, [5, 3],
                 id="a set already scaled for 8 takes nothing of what rounding leaves"),
    pytest.param([("a", 1, 1, None), ("b", 2, 3, "x")], 8, [2, 6],
                 id="without a readable annotation a set was scaled for the current total"),
    pytest.param([("a", 1, 3, "7"), ("b", 2, 2, None)], 5, [3, 2],
                 id="a set without the annotation counts as scaled for this size: what is left goes to the other"),
    pytest.param([("a", 1, 0, "4"), ("b", 2, 0, "4")], 3, [0, 3], id="all at 0: the newest takes them all"),
    pytest.param([("a", 1, 0, "0")], 3, [3], id="a Deployment scaled back up from 0: its newest set alone"),
    pytest.param([], 3, [], id="no sets"),
])
def test_a_paused_deployment_shares_its_replicas_among_its_sets_in_proportion(sets, wanted, counts):
    from corral.controllers.workloads.deployment import _proportional

    objs = [_set(*s) for s in sets]
    shared = _proportional(objs, wanted)
    assert [rs for rs, _ in shared] == objs and [n for _, n in shared] == counts


async def test_scaling_a_rolled_out_deployment_resizes_its_one_replica_set(server):
    api = server.api
    async with kubelet(api):
        await api.create(DEPLOYS, "default", deployment(replicas=3), OPTS)
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 3))
        sizes: list[int] = []
        api.cache.on_event.append(lambda e: e.key.startswith(RS.store_prefix) and e.record.obj is not None
                                  and sizes.append(e.record.obj["spec"]["replicas"]))
        await write_scale(api, DEPLOYS, "default", "web", {"spec": {"replicas": 2}}, OPTS, "merge")
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 2))
        assert set(sizes) <= {3, 2}  # straight to its new size
        (rs,) = await replica_sets(api)
        assert rs["spec"]["replicas"] == 2 and rs["metadata"]["annotations"][REVISION] == "1"
        await until(lambda: asyncio.sleep(0, live_pods(api)), lambda pods: len(pods) == 2)


async def test_a_changed_min_ready_seconds_is_passed_to_the_replica_set_without_a_new_revision(server):
    api = server.api
    async with kubelet(api):
        await api.create(DEPLOYS, "default", deployment(replicas=1), OPTS)
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 1))
        await api.patch(DEPLOYS, "default", "web", {"spec": {"minReadySeconds": 7}}, "merge", OPTS)
        sets = await until(lambda: replica_sets(api), lambda s: s[0]["spec"]["minReadySeconds"] == 7)
    assert len(sets) == 1 and sets[0]["metadata"]["annotations"][REVISION] == "1"


async def test_a_deployment_deleted_as_its_replica_set_is_made_ends_the_sync_quietly(tmp_path, monkeypatch):
    """The Deployment goes between its new ReplicaSet's creation and the revision annotation on it:
    the sync ends without an error (the garbage collector takes the ReplicaSet)."""
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        sync = one_sync(api)
        await api.create(DEPLOYS, "default", deployment(replicas=2), OPTS)
        create = api.create

        async def create_then_delete(resource, *args, **kwargs):
            reply = await create(resource, *args, **kwargs)
            if resource is RS:
                await api.delete(DEPLOYS, "default", "web", None, None, None)
            return reply
        monkeypatch.setattr(api, "create", create_then_delete)
        await sync()
        assert [rs["spec"]["replicas"] for rs in await replica_sets(api)] == [2]


async def test_a_replica_set_name_another_template_holds_counts_a_collision_and_the_template_is_hashed_again(server):
    from corral.controllers.workloads.deployment import template_hash

    api = server.api
    statuses: list[dict] = []  # the Deployment's, as each write left it
    api.cache.on_event.append(lambda e: e.key == DEPLOYS.key("default", "web") and e.record is not None
                              and statuses.append(e.record.obj.get("status") or {}))
    async with kubelet(api):
        await api.create(DEPLOYS, "default", deployment(replicas=1, paused=True), OPTS)  # paused: no ReplicaSet yet
        await until(lambda: the_deployment(api), lambda d: d.get("status", {}).get("conditions"))
        template = (await the_deployment(api))["spec"]["template"]
        taken = f"web-{template_hash(template)}"
        other = {"metadata": {"labels": {"app": "other"}}, "spec": {"containers": [{"name": "c", "image": "other"}]}}
        await api.create(RS, "default", {"metadata": {"name": taken}, "spec": {
            "replicas": 0, "selector": {"matchLabels": {"app": "other"}}, "template": other}}, OPTS)
        await api.patch(DEPLOYS, "default", "web", {"spec": {"paused": False}}, "merge", OPTS)
        deploy = await until(lambda: the_deployment(api), lambda d: rolled_out(d, 1))
        await api.cache.wait_consistent()
        names = sorted(r.obj["metadata"]["name"] for r in api.cache.items(RS.store_prefix))
    assert deploy["status"]["collisionCount"] == 1
    assert names == sorted([taken, f"web-{template_hash(template, 1)}"])
    counted = next(i for i, status in enumerate(statuses) if "collisionCount" in status)
    assert statuses[counted] == {**statuses[counted - 1], "collisionCount": 1}  # the rest of it kept


@pytest.mark.parametrize("strategy, available", [
    pytest.param({"type": "Recreate"}, "False", id="Recreate: every replica must be available"),
    pytest.param({}, "True", id="RollingUpdate: maxUnavailable (25 % of 4) may be missing"),
])
async def test_a_deployment_is_available_with_at_most_max_unavailable_replicas_missing(server, strategy, available):
    api = server.api
    async with kubelet(api):
        await api.create(DEPLOYS, "default", deployment(replicas=4, **({"strategy": strategy} if strategy else {})),
                         OPTS)
        await until(lambda: the_deployment(api), lambda d: rolled_out(d, 4))
        pod = live_pods(api)[0]
        await api.update(PODS, "default", pod["metadata"]["name"], {**pod, "status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "False",
                                                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}, OPTS,
                         subresource="status")
        deploy = await until(lambda: the_deployment(api),
                             lambda d: (d.get("status") or {}).get("availableReplicas") == 3)
    (condition,) = [c for c in deploy["status"]["conditions"] if c["type"] == "Available"]
    assert condition["status"] == available


T = 1_800_000_000.0  # the sync's time in the table below


def _rs(name: str, size: int, replicas: int = 0, available: int = 0) -> dict:
    return {"metadata": {"name": name}, "spec": {"replicas": size},
            "status": {"replicas": replicas, "readyReplicas": available, "availableReplicas": available}}


def _counts(replicas: int, updated: int, available: int, unavailable: int) -> dict:
    return {"replicas": replicas, "updatedReplicas": updated, "readyReplicas": available,
            "availableReplicas": available, "unavailableReplicas": unavailable}


def _condition(kind: str, status: str, reason: str, message: str, updated: float, transition: float) -> dict:
    from corral.api.defaults import rfc3339

    return {"type": kind, "status": status, "lastUpdateTime": rfc3339(updated),
            "lastTransitionTime": rfc3339(transition), "reason": reason, "message": message}


AVAILABLE = _condition("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.",
                       T - 100, T - 100)
UPDATED = 'ReplicaSet "new" is progressing.'
TIMED_OUT = 'ReplicaSet "new" has timed out progressing.'

# (id, wanted, paused, new, old, the counts of the status before, its Progressing condition, the one
# expected (None: nothing written), when the sync looks again (seconds; None: it need not)). maxSurge
# 1, maxUnavailable 0, a progress deadline of 60 s; no ReplicaSet was made by the sync.
STATUS_CASES = [
    ("progress under the same reason moves its update time, not its transition time",
     2, False, _rs("new", 2, 1, 1), [_rs("old", 1, 1, 1)], _counts(3, 1, 2, 0),
     _condition("Progressing", "True", "ReplicaSetUpdated", UPDATED, T - 10, T - 100),
     _condition("Progressing", "True", "ReplicaSetUpdated", UPDATED, T, T - 100), 60.0),
    ("no progress within the deadline: kept as it was, looked at again when the deadline would pass",
     2, False, _rs("new", 1, 1, 0), [_rs("old", 2, 2, 2)], _counts(3, 1, 2, 0),
     _condition("Progressing", "True", "ReplicaSetUpdated", UPDATED, T - 30, T - 100), None, 30.0),
    ("exactly at the deadline it has not passed yet",
     2, False, _rs("new", 1, 1, 0), [_rs("old", 2, 2, 2)], _counts(3, 1, 2, 0),
     _condition("Progressing", "True", "ReplicaSetUpdated", UPDATED, T - 60, T - 100), None, 0.1),
    ("a second past the deadline it has timed out",
     2, False, _rs("new", 1, 1, 0), [_rs("old", 2, 2, 2)], _counts(3, 1, 2, 0),
     _condition("Progressing", "True", "ReplicaSetUpdated", UPDATED, T - 61, T - 100),
     _condition("Progressing", "False", "ProgressDeadlineExceeded", TIMED_OUT, T, T), None),
    ("timed out without progress since: kept, its times too, and not looked at again",
     2, False, _rs("new", 1, 1, 0), [_rs("old", 2, 2, 2)], _counts(3, 1, 2, 0),
     _condition("Progressing", "False", "ProgressDeadlineExceeded", TIMED_OUT, T - 5, T - 5), None, None),
    ("paused again with nothing new (no ReplicaSet of its template yet): nothing written",
     2, True, None, [_rs("old", 2, 2, 2)], _counts(2, 0, 2, 0),
     _condition("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused", T - 5, T - 5), None, None),
    ("resumed with nothing moved: progressing from now",
     2, False, _rs("new", 1, 1, 0), [_rs("old", 2, 2, 2)], _counts(3, 1, 2, 0),
     _condition("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused", T - 5, T - 5),
     _condition("Progressing", "True", "ReplicaSetUpdated", UPDATED, T, T), 60.0),
    ("settled, then grown with its counts as they were: progressing from now",
     3, False, _rs("new", 2, 2, 2), [], _counts(2, 2, 2, 1),
     _condition("Progressing", "True", "NewReplicaSetAvailable", 'ReplicaSet "new" has successfully progressed.',
                T - 50, T - 100),
     _condition("Progressing", "True", "ReplicaSetUpdated", UPDATED, T, T - 100), 60.0),
    ("as many pods as wanted, not all of the new template: not complete",
     2, False, _rs("new", 2, 1, 1), [_rs("old", 0, 1, 1)], _counts(3, 1, 2, 0),
     _condition("Progressing", "True", "ReplicaSetUpdated", UPDATED, T - 10, T - 100),
     _condition("Progressing", "True", "ReplicaSetUpdated", UPDATED, T, T - 100), 60.0),
    ("a status without counts (another client's) counts 0 for each, as Kubernetes reads it: nothing moved",
     0, False, _rs("new", 1), [], {},
     _condition("Progressing", "True", "ReplicaSetUpdated", UPDATED, T - 10, T - 100),
     _condition("Progressing", "True", "ReplicaSetUpdated", UPDATED, T - 10, T - 100), 50.0),
]


@pytest.mark.parametrize("wanted, paused, new, old, counts, before, after, again",
                         [pytest.param(*case[1:], id=case[0]) for case in STATUS_CASES])
async def test_a_deployment_s_progress_from_its_replica_sets(tmp_path, wanted, paused, new, old, counts, before,
                                                           after, again):
    """Kubernetes' rules for the Progressing condition, one sync each: its reason and message, which
    of its times move, and when the controller looks again (the progress deadline)."""
    from corral.controllers.workloads.deployment import DeploymentController

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        spec = {**rolling(wanted, 1, 0)["spec"], "progressDeadlineSeconds": 60, "paused": paused}
        await api.create(DEPLOYS, "default", {**deployment(), "spec": spec}, OPTS)
        stored = await the_deployment(api)
        previous = {"observedGeneration": 1, **counts, "conditions": [AVAILABLE, before]}
        asked = await DeploymentController(api, clock=lambda: T)._write_status(
            {**stored, "status": previous}, new, old, False)
        written = await the_deployment(api)
    assert asked == again
    if after is None:
        assert written["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]  # nothing written
    else:
        assert written["status"]["conditions"][1] == after


async def test_conditions_written_without_their_times_are_given_the_sync_s(tmp_path):
    """A status written by another client may lack a condition's times: the sync fills them in."""
    from corral.api.defaults import rfc3339
    from corral.controllers.workloads.deployment import DeploymentController

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        await api.create(DEPLOYS, "default", {**deployment(), "spec": {**rolling(2, 1, 0)["spec"]}}, OPTS)
        stored = await the_deployment(api)
        bare = [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                 "message": "Deployment has minimum availability."},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                 "message": 'ReplicaSet "new" has successfully progressed.'}]
        await DeploymentController(api, clock=lambda: T)._write_status(
            {**stored, "status": {"observedGeneration": 1, **_counts(2, 2, 2, 0), "conditions": bare}},
            _rs("new", 2, 2, 2), [], False)
        written = await the_deployment(api)
    assert written["status"]["conditions"] == [{**c, "lastUpdateTime": rfc3339(T), "lastTransitionTime": rfc3339(T)}
                                               for c in bare]


async def test_a_current_replica_set_sharing_its_revision_with_an_older_one_is_numbered_past_it(tmp_path):
    """Two ReplicaSets of one revision (an annotation copied by hand): the current one becomes the
    newest, as Kubernetes numbers it, and the Deployment with it."""
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        sync = one_sync(api)
        await api.create(DEPLOYS, "default", deployment(replicas=1), OPTS)
        await sync()
        await set_image(api, "web:2")
        await sync()
        first, second = await replica_sets(api)
        await api.patch(RS, "default", first["metadata"]["name"], {"metadata": {"annotations": {REVISION: "2"}}},
                        "merge", OPTS)
        await sync()
        current = api.cache.get(RS.key("default", second["metadata"]["name"])).obj
        assert current["metadata"]["annotations"][REVISION] == "3"
        assert (await the_deployment(api))["metadata"]["annotations"][REVISION] == "3"


async def test_numbering_a_deployment_whose_spec_changed_meanwhile_leaves_its_status_to_the_next_sync(tmp_path):
    """The revision patch answers with the Deployment as it is now: if its spec changed since the
    sync read it, the sync goes on with what it read (its status must not claim the new spec)."""
    from corral.controllers.workloads.deployment import DeploymentController

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        await api.create(DEPLOYS, "default", deployment(replicas=1), OPTS)
        read = await the_deployment(api)
        controller = DeploymentController(api)
        same = await controller._annotate_revision(read, "1")
        assert same["metadata"]["annotations"][REVISION] == "1" and same["metadata"]["generation"] == 1
        assert same["metadata"]["resourceVersion"] != read["metadata"]["resourceVersion"]  # the patch's
        await api.patch(DEPLOYS, "default", "web", {"spec": {"replicas": 2}}, "merge", OPTS)
        assert await controller._annotate_revision(read, "2") is read


async def test_an_orphan_whose_adoption_fails_does_not_stop_the_others_from_being_adopted(tmp_path):
    """One orphan changed meanwhile (its patch refused) is adopted when its change queues the
    Deployment again; the other orphans are adopted by this very sync."""
    from corral.controllers.workloads.deployment import DeploymentController

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        for name in ("web-a", "web-b"):
            await api.create(RS, "default", {"metadata": {"name": name, "labels": {"app": "web"}}, "spec": {
                "replicas": 0, "selector": {"matchLabels": {"app": "web"}}, "template": {
                    "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": name}]}}}},
                OPTS)
        await api.create(DEPLOYS, "default", deployment(replicas=1), OPTS)
        await api.cache.wait_consistent()
        controller = DeploymentController(api, clock=time.time)
        patch = controller._patch_rs

        async def refuse_the_first(rs, change):
            if rs["metadata"]["name"] == "web-a":
                raise errors.ApiError(409, "Conflict", "the object has been modified")
            return await patch(rs, change)

        controller._patch_rs = refuse_the_first
        controller.initial_keys()
        await controller.sync(DEPLOYS.key("default", "web"))
        await api.cache.wait_consistent()
        uid = (await the_deployment(api))["metadata"]["uid"]
        owners = {r.obj["metadata"]["name"]: [o["uid"] for o in r.obj["metadata"].get("ownerReferences") or ()]
                  for r in api.cache.items(RS.store_prefix)}
    assert owners["web-a"] == [] and owners["web-b"] == [uid]


def test_a_templates_hash_is_stable_across_releases_whatever_the_order_of_its_fields():
    """The hash names each ReplicaSet (``web-5d98bb5557``) and labels its pods: computed otherwise
    after an upgrade, every Deployment would find no ReplicaSet of its template and roll out again.
    A collision count makes another name; none is the plain hash."""
    from corral.controllers.workloads.deployment import template_hash

    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "web:1"}]}}
    reordered = {"spec": {"containers": [{"image": "web:1", "name": "c"}]}, "metadata": {"labels": {"app": "web"}}}
    assert [template_hash(template), template_hash(template, 1), template_hash(template, 2)] == [
        "5d98bb5557", "789f9868dd", "794fdc9789"]
    assert template_hash(reordered) == template_hash(template, 0) == "5d98bb5557"


@pytest.mark.parametrize("code", [404, 409])
async def test_a_deployments_status_write_refused_as_gone_or_changed_ends_the_sync_quietly(tmp_path, monkeypatch, code):
    from corral.controllers.workloads.deployment import DeploymentController

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        await api.create(DEPLOYS, "default", deployment(replicas=1), OPTS)
        await api.cache.wait_consistent()
        controller = DeploymentController(api, clock=time.time)
        controller.initial_keys()
        update = api.update

        async def refusing(resource, namespace, name, obj, opts, *, subresource=None):
            if resource is DEPLOYS and subresource == "status":
                raise errors.ApiError(code, "Conflict" if code == 409 else "NotFound", "refused")
            return await update(resource, namespace, name, obj, opts, subresource=subresource)

        monkeypatch.setattr(api, "update", refusing)
        await controller.sync(DEPLOYS.key("default", "web"))  # no error: the change that did it queues it again


async def test_an_orphan_replica_set_being_deleted_is_not_adopted(tmp_path):
    from corral.controllers.workloads.deployment import DeploymentController

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        await api.create(RS, "default", {"metadata": {"name": "leaving", "labels": {"app": "web"},
                                                      "finalizers": ["example.com/hold"]}, "spec": {
            "replicas": 0, "selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}},
            OPTS)
        await api.delete(RS, "default", "leaving", None, None, None)  # held by its finalizer
        await api.create(DEPLOYS, "default", deployment(replicas=1), OPTS)
        await api.cache.wait_consistent()
        controller = DeploymentController(api, clock=time.time)
        controller.initial_keys()
        await controller.sync(DEPLOYS.key("default", "web"))
        await api.cache.wait_consistent()
        leaving = api.cache.get(RS.key("default", "leaving")).obj
        assert leaving["metadata"].get("ownerReferences") is None


async def test_the_replica_set_index_follows_adoption_and_deletion_and_a_deleted_set_queues_its_deployment(tmp_path):
    """An orphan once adopted is no orphan any more (no other Deployment adopts it), and a deleted
    ReplicaSet leaves nothing behind but the key of the Deployment that must make it again."""
    from corral.controllers.workloads.deployment import DeploymentController
    from corral.store import Event

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        await api.create(RS, "default", {"metadata": {"name": "stray", "labels": {"app": "web"}}, "spec": {
            "replicas": 0, "selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}},
            OPTS)
        await api.create(DEPLOYS, "default", deployment(replicas=1), OPTS)
        await api.cache.wait_consistent()
        controller = DeploymentController(api, clock=time.time)
        controller.initial_keys()
        api.cache.on_event.append(controller.keys_for)
        stray = RS.key("default", "stray")
        assert controller._orphans == {"default": {stray}}
        await controller.sync(DEPLOYS.key("default", "web"))
        await api.cache.wait_consistent()
        uid = (await the_deployment(api))["metadata"]["uid"]
        assert controller._orphans == {"default": set()}
        assert controller._rs_owner[stray] == uid and stray in controller._owned[uid]
        record = api.cache.get(stray)
        assert list(controller.keys_for(Event(EventType.DELETED, record))) == [DEPLOYS.key("default", "web")]
        assert stray not in controller._rs_owner and stray not in controller._owned[uid]


async def test_each_change_queues_the_deployments_it_concerns_and_no_other(tmp_path):
    """A Deployment's own change queues it; a ReplicaSet's change queues its owner before and after
    (made, adopted by another); an orphan queues every Deployment of its namespace (one of them may
    adopt it), none of another namespace; a set controlled by an unknown or deleted Deployment queues
    nothing."""
    import json

    from corral.controllers.workloads.deployment import DeploymentController
    from corral.store import Event
    from corral.store.base import Record

    def event(kind, resource, namespace, name, uid=None, owner=None, etype=EventType.MODIFIED):
        meta = {"namespace": namespace, "name": name, "uid": uid or f"uid-{name}"}
        if owner:
            meta["ownerReferences"] = [{"kind": "Deployment", "name": owner, "uid": f"uid-{owner}", "controller": True}]
        return Event(etype, Record(resource.key(namespace, name), 1, json.dumps({"kind": kind, "metadata": meta}).encode()))

    deploy = lambda ns, name, etype=EventType.ADDED: event("Deployment", DEPLOYS, ns, name, etype=etype)  # noqa: E731
    rs = lambda ns, name, owner=None, etype=EventType.MODIFIED: event("ReplicaSet", RS, ns, name, owner=owner,  # noqa: E731
                                                                       etype=etype)
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        await api.create(DEPLOYS, "default", deployment(replicas=1), OPTS)
        await api.cache.wait_consistent()
        controller = DeploymentController(api, clock=time.time)
        web = DEPLOYS.key("default", "web")
        assert list(controller.initial_keys()) == [web]
        a, b, c = DEPLOYS.key("default", "a"), DEPLOYS.key("default", "b"), DEPLOYS.key("other", "c")
        keys = lambda e: set(controller.keys_for(e))  # noqa: E731
        assert [keys(deploy(*k.split("/")[3:])) for k in (a, b, c)] == [{a}, {b}, {c}]
        assert keys(rs("default", "r", "a", EventType.ADDED)) == {a}  # made by a
        assert keys(rs("default", "r", "b")) == {a, b}  # adopted by b
        assert keys(rs("default", "r", "b")) == {b}
        assert keys(rs("default", "stray", etype=EventType.ADDED)) == {web, a, b}  # an orphan: not c
        assert keys(rs("other", "stray", etype=EventType.ADDED)) == {c}
        assert keys(rs("default", "q", "nobody", EventType.ADDED)) == set()
        assert keys(deploy("default", "b", EventType.DELETED)) == set()
        assert keys(rs("default", "r", "b")) == set()  # its owner is gone
        assert keys(deploy("default", "never-seen", EventType.DELETED)) == set()
