"""``POST /corral/v1/plan`` against a server running its scheduler: the plan's placements are the
ones the scheduler then makes, nothing is written, Pending pods come with their nearest misses,
preemption and the what-ifs are planned, the version guard tells a changed cluster, bad input is
refused with the field, and only those granted it may plan."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from corral.api.resources import by_kind
from corral.client.rest import ApiError, NotFound
from corral.plan import PLAN_PATH, PLAN_VERSION_PATH
from corral.scheduler.process import SchedulerProcess
from corral.testing.builders import make_node, make_pod
from corral.testing.server import running_server

PODS = by_kind("Pod")


def node(name: str, zone: str, cpu: int = 4, memory: str = "8Gi") -> dict:
    return {"apiVersion": "v1", **{k: v for k, v in make_node(name).capacity(cpu=cpu, memory=memory, pods=20)
                                   .zone(zone).obj.items() if k not in ("kind", "apiVersion")}, "kind": "Node"}


def pod(name: str, cpu: str, memory: str = "256Mi", priority_class: str = "", **labels: str) -> dict:
    obj = make_pod(name).requests(cpu=cpu, memory=memory).labels(**labels).obj
    obj["metadata"].pop("uid")
    obj.pop("status")
    if priority_class:
        obj["spec"]["priorityClassName"] = priority_class
    return obj


@pytest.fixture(params=[False, True], ids=["scheduler-in-server", "scheduler-process"])
async def cluster(tmp_path, request):
    """Four nodes in two zones; the scheduler inside the server, or in its own process (corral
    server --scheduler-process), where the plan is asked of it."""
    async with running_server(str(tmp_path / "s"), scheduler_process=request.param) as server:
        assert isinstance(server.scheduler, SchedulerProcess) is request.param
        async with server.client() as client:
            for n in (node("n1", "a"), node("n2", "a", cpu=2), node("n3", "b"), node("n4", "b", cpu=8, memory="16Gi")):
                await client.create(n)
            await server.cache.wait_consistent()
            yield server, client


# What the server and its controllers may write meanwhile on their own: events (a scheduling
# event is written lazily), leases, the status of a pod bound a moment before.
BACKGROUND = {"events", "leases", "pods/default/running"}


async def written_since(server, revision: int) -> set[str]:
    """What changed in the store after ``revision``: each key as "events", "leases" or
    "KIND/NAMESPACE/NAME" (a plan must write none of the last kind)."""
    out = set()
    for record in (await server.store.list("/")).items:
        if record.revision <= revision:
            continue
        parts = record.key.strip("/").split("/")  # group/plural/[namespace/]name
        out.add(parts[1] if parts[1] in ("events", "leases") else "/".join(parts[1:]))
    return out


async def plan(client, *items, **extra) -> dict:
    return msgspec.json.decode(await client.request("POST", PLAN_PATH, body={"items": list(items), **extra}))


async def bound(client, names: list[str], timeout: float = 15.0) -> dict[str, str]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        pods = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in (await client.list(PODS, "default", raw=True)).items}
        if all(pods.get(n) for n in names):
            return {n: pods[n] for n in names}
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not all bound in {timeout} s: {pods}")
        await asyncio.sleep(0.05)


async def test_the_plan_places_each_pod_where_the_scheduler_then_does_and_writes_nothing(cluster):
    server, client = cluster
    await client.create(pod("running", "1500m"))
    await bound(client, ["running"])
    await server.cache.wait_consistent()
    pods = [pod(f"web-{i}", cpu, app="web") for i, cpu in enumerate(["500m", "1", "250m", "2", "750m", "1", "100m"])]
    before = await server.store.current_revision()
    report = await plan(client, *pods)
    assert await written_since(server, before) <= BACKGROUND  # nothing written by the plan
    assert report["placed"] == 7 and report["pending"] == 0
    planned = {p["pod"].split("/")[1]: p["node"] for p in report["pods"]}
    assert set(planned.values()) > {"n4"}, planned  # not all on one node: spread by the scores
    for p in pods:
        await client.create(p)
    assert await bound(client, list(planned)) == planned


async def test_same_scores_are_broken_as_the_scheduler_breaks_them(cluster):
    """Four equal pods on equal nodes: every choice is a tie; the plan's generator continues from
    the scheduler's, so the ties fall the same way."""
    server, client = cluster
    for n in ("n1", "n2", "n3", "n4"):
        await client.delete("nodes", n)
    for i in range(6):
        await client.create(node(f"e{i}", "a"))
    await client.create(pod("first", "100m"))  # the scheduler has drawn from its generator once already
    await bound(client, ["first"])
    await server.cache.wait_consistent()
    pods = [pod(f"p{i}", "100m") for i in range(6)]
    planned = {p["pod"].split("/")[1]: p["node"] for p in (await plan(client, *pods))["pods"]}
    for p in pods:
        await client.create(p)
    assert await bound(client, list(planned)) == planned


async def test_a_pending_pod_gets_the_summary_and_the_nodes_that_came_nearest(cluster):
    _, client = cluster
    report = await plan(client, pod("huge", "9", memory="1Gi"), pod("small", "100m"))
    assert report["pending"] == 1 and report["placed"] == 1
    huge = next(p for p in report["pods"] if p["pod"] == "default/huge")
    assert huge["node"] is None
    assert huge["message"] == ("0/4 nodes are available: 4 Insufficient cpu. preemption: 0/4 nodes are "
                               "available: 4 No preemption victims found for incoming pod.")
    # Lacking the least of its allocatable first: n4 1 of 8 cpu, n1 and n3 5 of 4 (by name), n2 7 of 2.
    assert huge["nearestMisses"] == ["n4 lacks 1 cpu", "n1 lacks 5 cpu", "n3 lacks 5 cpu"]


async def test_nearest_misses_name_every_resource_a_node_lacks_and_skip_nodes_rejected_otherwise(cluster):
    _, client = cluster
    await client.patch("nodes", "n4", {"spec": {"unschedulable": True}})
    report = await plan(client, pod("wide", "4500m", memory="9Gi"))
    (entry,) = report["pods"]
    assert entry["message"].startswith("0/4 nodes are available: 1 node(s) were unschedulable, 3 Insufficient cpu, "
                                       "3 Insufficient memory.")
    # n4 is cordoned: it would have the room, but it is no near miss.
    assert entry["nearestMisses"] == ["n1 lacks 500m cpu and 1Gi memory", "n3 lacks 500m cpu and 1Gi memory",
                                      "n2 lacks 2.5 cpu and 1Gi memory"]


async def test_the_summary_lists_pods_per_zone_before_and_after(cluster):
    _, client = cluster
    report = await plan(client, pod("one", "1", memory="1Gi", ), pod("two", "2", memory="2Gi"))
    zones = {z["zone"]: z for z in report["zones"]}
    assert set(zones) == {"a", "b"}
    assert zones["a"]["cpuAllocatable"] == 6000 and zones["b"]["cpuAllocatable"] == 12000
    assert all(z["cpuRequestedBefore"] == 0 for z in zones.values())
    moved = {z: zones[z]["cpuRequestedAfter"] for z in zones}
    assert sum(moved.values()) == 3000
    where = {p["pod"]: p["node"] for p in report["pods"]}
    expected_b = sum(c for name, c in (("default/one", 1000), ("default/two", 2000)) if where[name] in ("n3", "n4"))
    assert moved["b"] == expected_b
    assert sum(z["memoryRequestedAfter"] for z in zones.values()) == 3 * 2**30


def priority_class(name: str, value: int) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


async def test_preemption_is_planned_as_the_scheduler_then_preempts(cluster):
    server, client = cluster
    await client.create(priority_class("low", 10))
    await client.create(priority_class("high", 1000))
    fill = {"n1": "4", "n2": "2", "n3": "4", "n4": "8"}
    for n, cpu in fill.items():
        p = pod(f"low-{n}", cpu, memory="64Mi", priority_class="low")
        p["spec"]["nodeName"] = n
        await client.create(p)
    await server.cache.wait_consistent()
    report = await plan(client, pod("urgent", "1", memory="64Mi", priority_class="high"))
    (entry,) = report["pods"]
    assert report["placed"] == 1 and report["pending"] == 0
    (victim,) = report["preempted"]
    assert entry["preempts"] == [victim["pod"]] and victim["by"] == "default/urgent"
    assert victim["node"] == entry["node"] and victim["pod"] == f"default/low-{entry['node']}"
    await client.create(pod("urgent", "1", memory="64Mi", priority_class="high"))
    deadline = asyncio.get_running_loop().time() + 15
    while True:
        urgent = await client.get(PODS, "urgent", "default", raw=True)
        if urgent.get("status", {}).get("nominatedNodeName"):
            break
        assert asyncio.get_running_loop().time() < deadline, urgent
        await asyncio.sleep(0.05)
    assert urgent["status"]["nominatedNodeName"] == entry["node"]
    while True:  # the victim is removed after the nomination, in the background
        try:
            gone = (await client.get(PODS, victim["pod"].split("/")[1], "default", raw=True))["metadata"]
        except NotFound:
            break
        if gone.get("deletionTimestamp"):
            break
        assert asyncio.get_running_loop().time() < deadline, gone
        await asyncio.sleep(0.05)


async def test_without_a_node_its_pods_are_placed_again_or_reported_pending(cluster):
    server, client = cluster
    big = pod("big", "6", memory="64Mi")
    big["spec"]["nodeName"] = "n4"
    await client.create(big)
    mid = pod("mid", "1", memory="64Mi")
    mid["spec"]["nodeName"] = "n3"
    await client.create(mid)
    await server.cache.wait_consistent()
    report = await plan(client, pod("new", "100m"), withoutNodes=["n4", "n3"])
    entries = {p["pod"]: p for p in report["pods"]}
    assert entries["default/big"]["node"] is None and entries["default/big"]["from"] == "displaced from a node taken out"
    assert entries["default/mid"]["node"] in ("n1", "n2")  # placed again on what is left
    assert entries["default/new"]["node"] in ("n1", "n2")
    zones = {z["zone"]: z for z in report["zones"]}
    assert {z: (v["nodesBefore"], v["nodes"]) for z, v in zones.items()} == {"a": (2, 2), "b": (2, 0)}
    # Zone b before: big's 6 and mid's 1 cpu; after: nothing (its nodes are gone, mid is now in a).
    assert (zones["b"]["cpuRequestedBefore"], zones["b"]["cpuRequestedAfter"]) == (7000, 0)
    assert zones["a"]["cpuRequestedAfter"] - zones["a"]["cpuRequestedBefore"] == 1100  # mid and new
    live = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in (await client.list(PODS, "default", raw=True)).items}
    assert live == {"big": "n4", "mid": "n3"}  # the live cluster is as it was
    assert (await plan(client, pod("new", "100m")))["pods"][0]["node"] in ("n1", "n2", "n3", "n4")


async def test_added_nodes_take_what_no_node_of_the_cluster_can(cluster):
    _, client = cluster
    report = await plan(client, pod("large", "12", memory="40Gi"), pod("after", "100m"),
                        addNodes=[{"count": 2, "cpu": "16", "memory": "64Gi", "labels": {"topology.kubernetes.io/zone": "c"}}])
    entries = {p["pod"]: p for p in report["pods"]}
    assert entries["default/large"]["node"] in ("plan-node-1", "plan-node-2")
    zones = {z["zone"]: z for z in report["zones"]}
    assert zones["c"]["nodes"] == 2 and zones["c"]["cpuAllocatable"] == 32000
    assert report["pending"] == 0
    without = await plan(client, pod("large", "12", memory="40Gi"))
    assert without["pending"] == 1


async def test_workloads_are_planned_as_the_pods_their_controllers_make(cluster):
    _, client = cluster
    template = {"metadata": {"labels": {"app": "w"}},
                "spec": {"containers": [{"name": "c", "image": "busybox",
                                         "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}
    selector = {"matchLabels": {"app": "w"}}
    items = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
         "spec": {"replicas": 3, "selector": selector, "template": template}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "crunch"},
         "spec": {"parallelism": 2, "completions": 5,
                  "template": {**template, "spec": {**template["spec"], "restartPolicy": "Never"}}}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
         "spec": {"selector": selector, "template": {**template, "spec": {
             **template["spec"], "nodeSelector": {"topology.kubernetes.io/zone": "b"}}}}},
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"},
         "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {
             **template, "spec": {**template["spec"], "restartPolicy": "Never"}}}}}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "b"}},
    ]
    report = await plan(client, *items)
    sources = [p["from"] for p in report["pods"]]
    assert sources == ["Deployment default/web"] * 3 + ["Job default/crunch"] * 2 + ["DaemonSet default/agent"] * 2
    daemons = {p["pod"]: p["node"] for p in report["pods"] if p["from"].startswith("DaemonSet")}
    assert daemons == {"default/agent-n3": "n3", "default/agent-n4": "n4"}  # each on its own node
    assert report["notes"] == ["CronJob default/nightly: makes no pods until its schedule fires "
                               "(plan its jobTemplate as a Job)"]
    assert report["placed"] == 7


async def test_a_pod_that_exists_already_is_reported_where_it_is(cluster):
    _, client = cluster
    p = pod("here", "100m")
    p["spec"]["nodeName"] = "n2"
    await client.create(p)
    await asyncio.sleep(0)
    report = await plan(client, pod("here", "100m"))
    (entry,) = report["pods"]
    assert entry["node"] == "n2" and entry["exists"] is True and report["placed"] == 0


async def test_the_plan_version_changes_with_what_placement_depends_on_and_only_that(cluster):
    server, client = cluster

    async def version() -> str:
        await server.cache.wait_consistent()
        return msgspec.json.decode(await client.request("GET", PLAN_VERSION_PATH))["planVersion"]

    first = (await plan(client, pod("x", "100m")))["planVersion"]
    assert await version() == first
    await client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}})
    await client.patch("nodes", "n1", {"metadata": {"annotations": {"note": "unrelated"}}})
    assert await version() == first
    await client.patch("nodes", "n1", {"spec": {"unschedulable": True}})
    cordoned = await version()
    assert cordoned != first
    await client.create(pod("y", "100m"))
    await bound(client, ["y"])
    assert await version() != cordoned


@pytest.mark.parametrize("body, field", [
    ({"items": []}, "items"),
    ({"items": [{"apiVersion": "v1", "kind": "Gadget", "metadata": {"name": "g"}}]}, "items[0].kind"),
    ({"items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}]}, "items[0].spec.containers"),
    ({"items": [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                 "spec": {"replicas": -1, "selector": {"matchLabels": {"a": "b"}},
                          "template": {"metadata": {"labels": {"a": "b"}},
                                       "spec": {"containers": [{"name": "c", "image": "i"}]}}}}]}, "items[0].spec.replicas"),
    ({"items": [{"kind": "Pod"}], "addNodes": [{"count": 2, "cpu": "lots", "memory": "1Gi"}]}, "addNodes[0].cpu"),
    ({"items": [{"kind": "Pod"}], "withoutNodes": "n1"}, "withoutNodes"),
    ({"items": [{"kind": "Pod"}], "extra": 1}, "extra"),
    ({"items": [{"kind": "Pod"}], "schedulerConfig": {"profiles": [{"plugins": {"filter": {"enabled": [{"name": "Nope"}]}}}]}},
     "schedulerConfig"),
])
async def test_bad_input_is_refused_with_the_field_and_nothing_planned(cluster, body, field):
    server, client = cluster
    before = await server.store.current_revision()
    with pytest.raises(ApiError) as err:
        await client.request("POST", PLAN_PATH, body=body)
    assert err.value.code == 422, err.value.message
    assert [c["field"] for c in err.value.causes][0].startswith(field), err.value.causes
    assert await written_since(server, before) <= BACKGROUND


async def test_only_users_granted_it_may_plan(cluster):
    server, client = cluster
    rbac = "rbac.authorization.k8s.io/v1"
    await client.create({"apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": "vera-edit", "namespace": "default"},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "vera"}]})
    from corral.client.rest import Client

    async with Client(credentials=server.issue_credentials("vera", [])) as vera:
        await server.cache.wait_consistent()
        for method, path, body in (("POST", PLAN_PATH, {"items": [pod("x", "1")]}), ("GET", PLAN_VERSION_PATH, None)):
            with pytest.raises(ApiError) as err:
                await vera.request(method, path, body=body)
            assert err.value.code == 403 and "vera" in err.value.message
        await client.create({"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": "vera-plans"},
                             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                         "name": "corral:planner"},
                             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "vera"}]})
        await server.cache.wait_consistent()
        report = msgspec.json.decode(await vera.request("POST", PLAN_PATH, body={"items": [pod("x", "1")]}))
        assert report["placed"] == 1
        # Planning a pod is no right to create it.
        with pytest.raises(ApiError) as err:
            await vera.create(pod("x", "1"), "kube-system")
        assert err.value.code == 403


async def test_a_placement_is_decided_as_the_scheduler_decides_it_and_its_copies_placed(cluster):
    server, client = cluster
    placement = {"apiVersion": "placement.corral.dev/v1", "kind": "Placement", "metadata": {"name": "cache"},
                 "spec": {"template": {"metadata": {"labels": {"app": "cache"}},
                                       "spec": {"containers": [{"name": "c", "image": "redis", "resources": {
                                           "requests": {"cpu": "500m", "memory": "128Mi"}}}]}},
                          "policy": {"placementType": "PickN", "numberOfNodes": 2}}}
    report = await plan(client, placement)
    copies = {p["pod"]: p["node"] for p in report["pods"]}
    assert len(copies) == 2 and all(p["from"] == "Placement default/cache" for p in report["pods"])
    assert all(pod_name == f"default/cache-{node}" for pod_name, node in copies.items())
    assert report["placed"] == 2 and report["notes"] and report["notes"][0].startswith("Placement default/cache: ")
    await client.create(placement)
    deadline = asyncio.get_running_loop().time() + 15
    while True:
        status = (await client.get("placements", "cache", "default", raw=True)).get("status") or {}
        selected = {d["nodeName"] for d in status.get("decisions") or () if d.get("selected")}
        if selected:
            break
        assert asyncio.get_running_loop().time() < deadline, status
        await asyncio.sleep(0.05)
    assert selected == set(copies.values())


async def test_manifests_may_come_as_the_yaml_text_a_user_pastes(cluster):
    _, client = cluster
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: c, image: busybox}]\n"
            "---\n---\n"
            '{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"},'
            ' "spec": {"containers": [{"name": "c", "image": "busybox"}]}}]}\n')
    report = msgspec.json.decode(await client.request("POST", PLAN_PATH, body={"manifests": text}))
    assert [p["pod"] for p in report["pods"]] == ["default/a", "default/b"] and report["placed"] == 2
    for bad, message in (("kind: Pod\n---\nkind: [unclosed\n", "document 2: not valid YAML"),
                         ("a: " + "[" * 200 + "]" * 200, "document 1: nested more than 100 levels deep"),
                         ("", "must be the manifests' YAML or JSON text")):
        with pytest.raises(ApiError) as err:
            await client.request("POST", PLAN_PATH, body={"manifests": bad})
        assert err.value.code == 422 and err.value.causes[0]["field"] == "manifests", err.value.message
        assert message in err.value.message, err.value.message
    with pytest.raises(ApiError) as err:
        await client.request("POST", PLAN_PATH, body={"manifests": text, "items": []})
    assert "not both" in err.value.message


async def test_another_scheduler_configuration_is_tried_without_changing_the_running_one(cluster):
    """Bin-packing instead of spreading: the same pods pile onto fewer nodes in the plan, and the
    running scheduler still spreads them when they are applied."""
    server, client = cluster
    packer = {"profiles": [{"schedulerName": "default-scheduler",
                            "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"},
                                                               {"name": "PodTopologySpread"}]}},
                            "pluginConfig": [{"name": "NodeResourcesFit",
                                              "args": {"scoringStrategy": {"type": "MostAllocated"}}}]}]}
    pods = [pod(f"b{i}", "500m", memory="64Mi") for i in range(4)]
    packed = await plan(client, *pods, schedulerConfig=packer)
    spread = await plan(client, *pods)
    assert len({p["node"] for p in packed["pods"]}) == 1  # all four on one node
    assert len({p["node"] for p in spread["pods"]}) >= 3  # spread (n4, twice the size, may take two)
    assert packed["notes"] == ["decided with the given scheduler configuration: another tie-break sequence "
                               "than the running scheduler's"]
    for p in pods:
        await client.create(p)
    applied = await bound(client, [p["metadata"]["name"] for p in pods])
    assert applied == {p["pod"].split("/")[1]: p["node"] for p in spread["pods"]}  # the running one's plan


async def test_a_deployments_pods_land_where_the_plan_put_them(cluster):
    """Its pods are made by the controllers, with names of their own: as the same pods, the plan's
    nodes and the scheduler's are the same, one for one."""
    server, client = cluster
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api"},
                  "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "api"}},
                           "template": {"metadata": {"labels": {"app": "api"}},
                                        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {
                                            "requests": {"cpu": "300m", "memory": "128Mi"}}}]}}}}
    report = await plan(client, deployment)
    planned = sorted(p["node"] for p in report["pods"])
    await client.create(deployment)
    deadline = asyncio.get_running_loop().time() + 20
    while True:
        pods = [p for p in (await client.list(PODS, "default", raw=True)).items
                if (p["metadata"].get("labels") or {}).get("app") == "api"]
        if len(pods) == 6 and all(p["spec"].get("nodeName") for p in pods):
            break
        assert asyncio.get_running_loop().time() < deadline, pods
        await asyncio.sleep(0.1)
    assert sorted(p["spec"]["nodeName"] for p in pods) == planned


async def test_a_plan_that_would_make_too_many_pods_is_refused_before_any_is_decided(cluster):
    from corral.plan.expand import MAX_PODS

    _, client = cluster
    template = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    huge = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "huge"},
            "spec": {"replicas": MAX_PODS + 1, "selector": {"matchLabels": {"app": "x"}}, "template": template}}
    with pytest.raises(ApiError) as err:
        await plan(client, pod("first", "100m"), huge)
    assert err.value.code == 422 and err.value.causes[0]["field"] == "items[1].spec.replicas"
    assert f"more than {MAX_PODS} pods" in err.value.message
    fits = {**huge, "spec": {**huge["spec"], "replicas": 3}}
    assert (await plan(client, fits))["placed"] == 3


async def test_what_goes_in_a_namespace_the_manifests_create_is_planned(cluster):
    _, client = cluster
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    inside = pod("worker", "100m")
    inside["metadata"]["namespace"] = "team"
    report = await plan(client, ns, inside)
    assert [(p["pod"], p["node"] is not None) for p in report["pods"]] == [("team/worker", True)]
    with pytest.raises(ApiError) as err:  # one that neither exists nor is made here
        await plan(client, {**inside, "metadata": {**inside["metadata"], "namespace": "elsewhere"}})
    assert err.value.code == 404 and err.value.message == 'items[0]: namespaces "elsewhere" not found'
