"""The DaemonSet controller, synced by hand: one pod per eligible node (labels, affinity, taints,
with the tolerations every daemon gets), placed through the scheduler by node affinity, following
nodes as they change, rolled out within maxUnavailable, and its status."""

from __future__ import annotations

import asyncio
import copy

import pytest

from corral.api.resources import by_kind
from corral.controllers.workloads.daemonset import HASH_LABEL, DaemonSetController, eligible
from corral.server.rest import WriteOptions
from corral.testing.builders import NodeBuilder
from corral.testing.server import LateCache, running_server

SETS, PODS, NODES = by_kind("DaemonSet"), by_kind("Pod"), by_kind("Node")
OPTS = WriteOptions(warn=False)


def daemon_set(name: str = "agent", **template_spec) -> dict:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}], **template_spec}}}}


class Harness:
    def __init__(self, api) -> None:
        self.api = api
        self.controller = DaemonSetController(api, clock=lambda: 2_000_000_000.0)

    async def sync(self, name: str = "agent"):
        await self.api.cache.wait_consistent()
        self.controller.reset()
        self.controller.initial_keys()
        return await self.controller.sync(SETS.key("default", name))

    async def pods(self) -> dict[str, dict]:
        """Live daemon pods by the node they are for."""
        await self.api.cache.wait_consistent()
        out = {}
        for r in self.api.cache.items(PODS.store_prefix):
            if r.obj["metadata"].get("deletionTimestamp"):
                continue
            term = r.obj["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            node = term["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
            assert node not in out, "two daemon pods for one node"
            out[node] = r.obj
        return out

    async def bind_ready(self) -> None:
        """What the scheduler and agents do: bind each pod to its node, report it ready."""
        for node, pod in (await self.pods()).items():
            current = (await self.api.current(PODS, "default", pod["metadata"]["name"])).obj
            if not current["spec"].get("nodeName"):
                await self.api.bind("default", pod["metadata"]["name"], {
                    "apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod["metadata"]["name"]},
                    "target": {"kind": "Node", "name": node}}, OPTS)
            current = (await self.api.current(PODS, "default", pod["metadata"]["name"])).obj
            status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True",
                                                          "lastTransitionTime": "2030-01-01T00:00:00Z"}]}
            await self.api.update(PODS, "default", pod["metadata"]["name"],
                                  {**current, "status": status}, OPTS, subresource="status")

    async def status(self, name: str = "agent") -> dict:
        await self.api.cache.wait_consistent()
        return (await self.api.current(SETS, "default", name)).obj.get("status") or {}


@pytest.fixture
async def harness(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        for node in (NodeBuilder("n1").labels(disk="ssd"), NodeBuilder("n2"),
                     NodeBuilder("n3").taint("dedicated", "gpu"),  # not tolerated: no daemon there
                     NodeBuilder("n4").taint("node.kubernetes.io/unschedulable")):  # cordoned: daemons stay
            await api.create(NODES, None, node.obj, OPTS)
        yield Harness(api)


async def test_one_pod_per_eligible_node_placed_by_affinity_with_the_daemon_tolerations(harness):
    await harness.api.create(SETS, "default", daemon_set(), OPTS)
    await harness.sync()
    pods = await harness.pods()
    assert sorted(pods) == ["n1", "n2", "n4"]
    pod = pods["n1"]
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet" and HASH_LABEL in pod["metadata"]["labels"]
    keys = {(t["key"], t["effect"]) for t in pod["spec"]["tolerations"]}
    assert ("node.kubernetes.io/unreachable", "NoExecute") in keys and ("node.kubernetes.io/unschedulable", "NoSchedule") in keys
    assert "nodeName" not in pod["spec"]  # the scheduler binds it, checking resources and ports
    await harness.sync()
    assert sorted(await harness.pods()) == ["n1", "n2", "n4"]  # nothing twice
    status = await harness.status()
    assert (status["desiredNumberScheduled"], status["currentNumberScheduled"], status["numberMisscheduled"]) == (3, 0, 0)


async def test_daemons_follow_node_labels_and_new_nodes(harness):
    await harness.api.create(SETS, "default", daemon_set(nodeSelector={"disk": "ssd"}), OPTS)
    await harness.sync()
    assert sorted(await harness.pods()) == ["n1"]
    await harness.api.patch(NODES, None, "n2", {"metadata": {"labels": {"disk": "ssd"}}}, "merge", OPTS)
    await harness.api.patch(NODES, None, "n1", {"metadata": {"labels": {"disk": None}}}, "merge", OPTS)
    await harness.api.create(NODES, None, NodeBuilder("n5").labels(disk="ssd").obj, OPTS)
    await harness.sync()
    assert sorted(await harness.pods()) == ["n2", "n5"]


async def test_a_template_change_rolls_out_within_max_unavailable(harness):
    await harness.api.create(SETS, "default", daemon_set(), OPTS)
    await harness.sync()
    await harness.bind_ready()
    await harness.sync()
    status = await harness.status()
    assert (status["numberReady"], status["numberAvailable"], status["updatedNumberScheduled"]) == (3, 3, 3)
    first = {n: p["metadata"]["labels"][HASH_LABEL] for n, p in (await harness.pods()).items()}
    current = (await harness.api.current(SETS, "default", "agent")).obj
    current["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    await harness.api.update(SETS, "default", "agent", current, OPTS)
    seen_new = []
    for _ in range(8):
        await harness.sync()
        pods = await harness.pods()
        old = [n for n, p in pods.items() if p["metadata"]["labels"][HASH_LABEL] == first[n]]
        assert len(pods) >= 2  # never more than maxUnavailable (1) node without its daemon
        seen_new.append(3 - len(old))
        await harness.bind_ready()
        if not old and len(pods) == 3:
            break
    await harness.sync()
    status = await harness.status()
    assert (status["updatedNumberScheduled"], status["numberAvailable"]) == (3, 3), (status, seen_new)
    assert seen_new == sorted(seen_new) and seen_new[0] <= 1  # one node at a time


async def test_a_second_daemon_pod_on_a_node_is_deleted(harness):
    import copy

    await harness.api.create(SETS, "default", daemon_set(), OPTS)
    await harness.sync()
    extra = copy.deepcopy((await harness.pods())["n2"])
    extra["metadata"] = {k: v for k, v in extra["metadata"].items()
                         if k in ("labels", "ownerReferences", "annotations")} | {"generateName": "agent-"}
    await harness.api.create(PODS, "default", extra, OPTS)
    await harness.api.cache.wait_consistent()
    on_n2 = [r.obj for r in harness.api.cache.items(PODS.store_prefix)
             if r.obj["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
                 "nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n2"]]
    assert len(on_n2) == 2
    await harness.sync()
    assert sorted(await harness.pods()) == ["n1", "n2", "n4"]  # pods() asserts one per node


async def surging_and_ready(harness) -> None:
    """A DaemonSet updated with maxSurge 1 and maxUnavailable 0, its daemons bound and ready."""
    obj = daemon_set()
    obj["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    await harness.api.create(SETS, "default", obj, OPTS)
    await harness.sync()
    await harness.bind_ready()


async def test_with_max_surge_a_new_daemon_starts_beside_the_old_one_which_goes_once_it_is_available(harness):
    api = harness.api
    await surging_and_ready(harness)
    current = (await api.current(SETS, "default", "agent")).obj
    current["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    await api.update(SETS, "default", "agent", current, OPTS)

    async def per_node() -> dict[str, int]:
        await api.cache.wait_consistent()
        counts: dict[str, int] = {}
        for r in api.cache.items(PODS.store_prefix):
            if not r.obj["metadata"].get("deletionTimestamp"):
                node = r.obj["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
                    "nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
                counts[node] = counts.get(node, 0) + 1
        return counts

    for _ in range(12):
        await harness.sync()
        await harness.sync()  # again before the new pod is ready: the old one must stay meanwhile
        counts = await per_node()
        assert sorted(counts) == ["n1", "n2", "n4"]  # never a node without its daemon (maxUnavailable 0)
        assert (await harness.status()).get("numberUnavailable") == 0  # nor without an available one
        assert sum(counts.values()) <= 4  # at most one node surging (maxSurge 1)
        await bind_ready_all(harness)
        if (await harness.status()).get("updatedNumberScheduled") == 3 and sum(counts.values()) == 3:
            break
    status = await harness.status()
    assert (status["updatedNumberScheduled"], status["numberAvailable"], sum((await per_node()).values())) == (3, 3, 3)


async def bind_ready_all(harness) -> None:
    """bind_ready for every live pod, two on a node included."""
    api = harness.api
    await api.cache.wait_consistent()
    for r in list(api.cache.items(PODS.store_prefix)):
        pod = r.obj
        if pod["metadata"].get("deletionTimestamp"):
            continue
        name = pod["metadata"]["name"]
        node = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
        if not pod["spec"].get("nodeName"):
            await api.bind("default", name, {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                                             "target": {"kind": "Node", "name": node}}, OPTS)
        current = (await api.current(PODS, "default", name)).obj
        if (current.get("status") or {}).get("phase") != "Running":
            status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True",
                                                          "lastTransitionTime": "2030-01-01T00:00:00Z"}]}
            await api.update(PODS, "default", name, {**current, "status": status}, OPTS, subresource="status")


NOW = 2_000_000_000.0  # the harness's clock


async def ready_since(harness, seconds_ago: float) -> None:
    """Bind every daemon pod to its node and report it ready since ``seconds_ago``."""
    from corral.api.defaults import rfc3339

    await harness.bind_ready()
    for pod in (await harness.pods()).values():
        current = (await harness.api.current(PODS, "default", pod["metadata"]["name"])).obj
        status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True",
                                                      "lastTransitionTime": rfc3339(NOW - seconds_ago)}]}
        await harness.api.update(PODS, "default", pod["metadata"]["name"], {**current, "status": status}, OPTS,
                                 subresource="status")


async def change_image(harness, image: str = "busybox:1.37", **spec) -> None:
    current = (await harness.api.current(SETS, "default", "agent")).obj
    current["spec"]["template"]["spec"]["containers"][0]["image"] = image
    current["spec"].update(spec)
    await harness.api.update(SETS, "default", "agent", current, OPTS)


def hashes(pods: dict[str, dict]) -> dict[str, str]:
    return {n: p["metadata"]["labels"][HASH_LABEL] for n, p in pods.items()}


async def test_the_status_says_what_kubectl_rollout_status_reads_and_keeps_what_others_wrote(harness):
    await harness.api.create(SETS, "default", daemon_set(), OPTS)
    await harness.sync()
    current = (await harness.api.current(SETS, "default", "agent")).obj
    noted = [{"type": "example.com/Audited", "status": "True"}]
    await harness.api.update(SETS, "default", "agent", {**current, "status": {**current["status"], "conditions": noted}},
                             OPTS, subresource="status")
    await ready_since(harness, 3600)
    await harness.sync()
    assert await harness.status() == {
        "desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberMisscheduled": 0, "numberReady": 3,
        "updatedNumberScheduled": 3, "numberAvailable": 3, "numberUnavailable": 0, "observedGeneration": 1,
        "conditions": noted}


async def test_a_daemon_counts_as_available_once_ready_for_min_ready_seconds(harness):
    await harness.api.create(SETS, "default", daemon_set(), OPTS)
    current = (await harness.api.current(SETS, "default", "agent")).obj
    await harness.api.update(SETS, "default", "agent", {**current, "spec": {**current["spec"], "minReadySeconds": 10}},
                             OPTS)
    await harness.sync()
    await ready_since(harness, 4)
    assert await harness.sync() == 10.0  # looked at again: they become available meanwhile
    status = await harness.status()
    assert (status["numberReady"], status["numberAvailable"], status["numberUnavailable"]) == (3, 0, 3)
    await ready_since(harness, 11)
    assert await harness.sync() is None
    assert (await harness.status())["numberAvailable"] == 3


async def test_each_template_is_kept_as_a_numbered_revision_within_the_history_limit(harness):
    from corral.api.resources import by_kind

    revisions = by_kind("ControllerRevision")
    obj = daemon_set()
    obj["metadata"]["annotations"] = {"kubernetes.io/change-cause": "first"}
    await harness.api.create(SETS, "default", obj, OPTS)
    await harness.sync()
    await harness.api.cache.wait_consistent()
    ds = (await harness.api.current(SETS, "default", "agent")).obj
    (first,) = [r.obj for r in harness.api.cache.items(revisions.store_prefix)]
    digest = hashes(await harness.pods())["n1"]
    template = {**ds["spec"]["template"], "$patch": "replace"}
    assert first["metadata"]["name"] == f"agent-{digest}" and first["revision"] == 1
    assert first["metadata"]["labels"] == {"app": "agent", HASH_LABEL: digest}
    assert first["metadata"]["annotations"] == {"kubernetes.io/change-cause": "first"}
    assert [(o["kind"], o["uid"]) for o in first["metadata"]["ownerReferences"]] == [("DaemonSet", ds["metadata"]["uid"])]
    assert first["data"] == {"spec": {"template": template}}
    assert (set(first), first["apiVersion"], first["kind"]) == (
        {"apiVersion", "kind", "metadata", "data", "revision"}, "apps/v1", "ControllerRevision")
    assert set(first["metadata"]) == {"name", "namespace", "labels", "annotations", "ownerReferences", "uid",
                                      "creationTimestamp", "generation", "resourceVersion"}
    for image, limit in (("busybox:1.37", 10), ("busybox:1.38", 1)):
        await change_image(harness, image, revisionHistoryLimit=limit)
        await harness.sync()
    await harness.api.cache.wait_consistent()
    kept = sorted((r.obj["revision"], r.obj["data"]["spec"]["template"]["spec"]["containers"][0]["image"])
                  for r in harness.api.cache.items(revisions.store_prefix) if not r.obj["metadata"].get("deletionTimestamp"))
    assert kept == [(2, "busybox:1.37"), (3, "busybox:1.38")]  # the newest, and one before it


async def test_on_delete_replaces_a_daemon_only_when_someone_deletes_it(harness):
    obj = daemon_set()
    obj["spec"]["updateStrategy"] = {"type": "OnDelete", "rollingUpdate": {"maxSurge": 1}}
    await harness.api.create(SETS, "default", obj, OPTS)
    await harness.sync()
    await ready_since(harness, 3600)
    before = hashes(await harness.pods())
    await change_image(harness)
    for _ in range(3):
        await harness.sync()
    assert hashes(await harness.pods()) == before  # nothing replaced, no surge either
    assert (await harness.status())["updatedNumberScheduled"] == 0
    gone = (await harness.pods())["n2"]["metadata"]["name"]
    await harness.api.delete(PODS, "default", gone, 0, None, None)
    await harness.sync()
    after = hashes(await harness.pods())
    assert after["n1"] == before["n1"] and after["n2"] != before["n2"]


@pytest.mark.parametrize("surge", [False, True])
async def test_percentages_of_the_nodes_round_up(harness, surge):
    replaced_at_once = 2  # 50 % of 3 nodes: 1.5, up
    rolling = {"maxUnavailable": 0, "maxSurge": "50%"} if surge else {"maxUnavailable": "50%"}
    obj = daemon_set()
    obj["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": rolling}
    await harness.api.create(SETS, "default", obj, OPTS)
    await harness.sync()
    await ready_since(harness, 3600)
    before = hashes(await harness.pods())
    await change_image(harness)
    await harness.sync()
    await harness.api.cache.wait_consistent()
    live = [r.obj for r in harness.api.cache.items(PODS.store_prefix) if not r.obj["metadata"].get("deletionTimestamp")]
    new = [p for p in live if p["metadata"]["labels"][HASH_LABEL] not in before.values()]
    old = [p for p in live if p["metadata"]["labels"][HASH_LABEL] in before.values()]
    if surge:  # started beside the old ones
        assert (len(new), len(old)) == (replaced_at_once, 3)
    else:  # deleted first; the next sync makes their successors
        assert (len(new), len(old)) == (0, 3 - replaced_at_once)


async def test_a_daemon_set_being_deleted_or_gone_is_left_alone(harness):
    obj = daemon_set("going")
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    await harness.api.create(SETS, "default", obj, OPTS)
    await harness.api.delete(SETS, "default", "going", None, None, None)
    assert await harness.sync("going") is None and await harness.pods() == {}
    assert await harness.sync("never-made") is None


def _affinity(*terms: dict) -> dict:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}}


def _expr(key: str, op: str, *values: str) -> dict:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


NODE = NodeBuilder("n7").labels(zone="a", cores="8", kind="big").obj


@pytest.mark.parametrize("expression, fits", [
    (_expr("zone", "In", "a", "b"), True), (_expr("zone", "In", "b"), False), (_expr("absent", "In", "a"), False),
    (_expr("zone", "NotIn", "b"), True), (_expr("zone", "NotIn", "a"), False), (_expr("absent", "NotIn", "a"), True),
    (_expr("zone", "Exists"), True), (_expr("absent", "Exists"), False),
    (_expr("zone", "DoesNotExist"), False), (_expr("absent", "DoesNotExist"), True),
    (_expr("cores", "Gt", "7"), True), (_expr("cores", "Gt", "8"), False), (_expr("cores", "Gt", "9"), False),
    (_expr("cores", "Lt", "9"), True), (_expr("cores", "Lt", "8"), False), (_expr("cores", "Lt", "7"), False),
    (_expr("kind", "Gt", "1"), False), (_expr("kind", "Lt", "1"), False),  # not a number: no match
    (_expr("absent", "Gt", "1"), False), (_expr("absent", "Lt", "1"), False), (_expr("cores", "Gt"), False),
    (_expr("zone", "Unknown", "a"), False),
])
def test_a_daemon_runs_where_its_required_node_affinity_matches_as_kubernetes_reads_it(expression, fits):
    assert eligible(_affinity({"matchExpressions": [expression]}), NODE) is fits


GPU = {"key": "dedicated", "operator": "Equal", "value": "gpu"}


@pytest.mark.parametrize("taint, tolerations, fits", [
    (("dedicated", "gpu", "NoSchedule"), [], False),
    (("dedicated", "gpu", "NoSchedule"), [GPU], True),  # the template's own toleration
    (("dedicated", "gpu", "NoSchedule"), [{**GPU, "value": "cpu"}], False),  # another value
    (("dedicated", "gpu", "NoSchedule"), [{"key": "dedicated", "operator": "Exists"}], True),
    (("dedicated", "", "NoSchedule"), [{**GPU, "value": ""}], True),
    (("dedicated", "gpu", "NoSchedule"), [{**GPU, "effect": "NoExecute"}], False),  # another effect
    (("evict", "now", "NoExecute"), [], False),  # NoExecute keeps daemons off too
    (("evict", "now", "NoExecute"), [{"key": "evict", "operator": "Exists", "effect": "NoExecute"}], True),
    (("busy", "yes", "PreferNoSchedule"), [], True),  # a preference only
    (("node.kubernetes.io/not-ready", "", "NoExecute"), [], True),  # the daemon tolerations
])
def test_a_daemon_runs_where_its_tolerations_and_the_daemon_ones_cover_every_hard_taint(taint, tolerations, fits):
    node = NodeBuilder("n7").taint(*taint).obj
    assert eligible({"tolerations": tolerations}, node) is fits


def test_a_taint_stored_without_a_value_is_tolerated_by_its_key_with_no_value_as_by_an_empty_one():
    """`kubectl taint nodes n7 dedicated:NoSchedule` leaves the value out (it is omitempty)."""
    node = NodeBuilder("n7").obj
    node["spec"]["taints"] = [{"key": "dedicated", "effect": "NoSchedule"}]
    assert eligible({"tolerations": [{"key": "dedicated", "operator": "Equal"}]}, node)
    assert eligible({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": ""}]}, node)
    assert not eligible({"tolerations": [GPU]}, node)


def test_node_affinity_terms_are_ored_their_expressions_anded_and_fields_match_the_node_name():
    zone_a, big, small = _expr("zone", "In", "a"), _expr("kind", "In", "big"), _expr("kind", "In", "small")
    assert eligible(_affinity({"matchExpressions": [zone_a, big]}), NODE)
    assert not eligible(_affinity({"matchExpressions": [zone_a, small]}), NODE)
    assert eligible(_affinity({"matchExpressions": [small]}, {"matchExpressions": [zone_a]}), NODE)
    assert eligible(_affinity({"matchFields": [_expr("metadata.name", "In", "n7")]}), NODE)
    assert not eligible(_affinity({"matchFields": [_expr("metadata.name", "NotIn", "n7")]}), NODE)
    assert not eligible(_affinity({"matchExpressions": [zone_a], "matchFields": [_expr("metadata.name", "In", "n8")]}),
                        NODE)


async def test_a_node_running_a_daemon_it_should_not_is_counted_misscheduled_until_it_is_gone(harness):
    await harness.api.create(SETS, "default", daemon_set(nodeSelector={"disk": "ssd"}), OPTS)
    await harness.sync()
    await harness.bind_ready()
    await harness.sync()
    assert (await harness.status())["numberMisscheduled"] == 0
    node = (await harness.api.current(NODES, None, "n1")).obj
    await harness.api.update(NODES, None, "n1", {**node, "metadata": {**node["metadata"], "labels": {}}}, OPTS)
    await harness.sync()  # n1 no longer matches: its daemon is deleted, and counted until then
    status = await harness.status()
    assert (status["desiredNumberScheduled"], status["numberMisscheduled"]) == (0, 1)
    assert await harness.pods() == {}
    await harness.sync()
    assert (await harness.status())["numberMisscheduled"] == 0  # being deleted: no longer running it


async def test_during_a_surge_a_node_counts_its_old_daemon_until_it_is_gone(harness):
    obj = daemon_set()
    obj["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    await harness.api.create(SETS, "default", obj, OPTS)
    await harness.sync()
    await harness.bind_ready()
    await harness.sync()
    current = copy.deepcopy((await harness.api.current(SETS, "default", "agent")).obj)
    current["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    await harness.api.update(SETS, "default", "agent", current, OPTS)
    await harness.sync()  # new daemons beside the old ones
    await harness.api.cache.wait_consistent()
    for r in list(harness.api.cache.items(PODS.store_prefix)):  # bind the new ones, not ready yet
        pod = r.obj
        if not pod["spec"].get("nodeName"):
            term = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            node = term["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
            await harness.api.bind("default", pod["metadata"]["name"], {
                "apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod["metadata"]["name"]},
                "target": {"kind": "Node", "name": node}}, OPTS)
    await harness.sync()
    status = await harness.status()
    assert (status["currentNumberScheduled"], status["updatedNumberScheduled"], status["numberReady"]) == (3, 0, 3)


async def test_rolled_back_mid_surge_a_node_counts_its_older_daemon_even_when_that_is_the_current_one(harness):
    """A surge's new daemon ready beside an old one that stopped being ready, and then the template
    rolled back to the old one's: both stay (the current one is not available yet), and the node
    is counted by its older daemon, the current revision's, as Kubernetes counts."""
    api = harness.api
    await surging_and_ready(harness)
    first = {node: pod["metadata"]["name"] for node, pod in (await harness.pods()).items()}
    await asyncio.sleep(1.1)  # creation times have one-second resolution: the surge's daemon is younger

    async def set_template(image: str) -> None:
        current = copy.deepcopy((await api.current(SETS, "default", "agent")).obj)
        current["spec"]["template"]["spec"]["containers"][0]["image"] = image
        await api.update(SETS, "default", "agent", current, OPTS)

    async def set_ready(name: str, ready: bool) -> None:
        pod = (await api.current(PODS, "default", name)).obj
        status = {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready),
                                                      "lastTransitionTime": "2030-01-01T00:00:00Z"}]}
        await api.update(PODS, "default", name, {**pod, "status": status}, OPTS, subresource="status")

    await set_template("busybox:1.37")
    await harness.sync()  # one new daemon beside the old one on n1 (maxSurge 1)
    await api.cache.wait_consistent()
    (surged,) = [r.obj["metadata"]["name"] for r in api.cache.items(PODS.store_prefix)
                 if r.obj["metadata"]["name"] not in first.values()]
    await api.bind("default", surged, {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": surged},
                                       "target": {"kind": "Node", "name": "n1"}}, OPTS)
    await set_ready(surged, True)
    await set_ready(first["n1"], False)
    await set_template("busybox:1.36")
    await harness.sync()
    await api.cache.wait_consistent()
    assert {r.obj["metadata"]["name"] for r in api.cache.items(PODS.store_prefix)} == {*first.values(), surged}
    status = await harness.status()
    assert (status["currentNumberScheduled"], status["updatedNumberScheduled"], status["numberReady"]) == (3, 3, 2)


@pytest.mark.parametrize("change", ["edited", "deleted"])
async def test_a_status_write_that_lost_to_a_newer_change_is_left_to_the_sync_that_change_brings(
        harness, monkeypatch, change):
    """The sync read the DaemonSet from its cache, and meanwhile someone edited it (409) or deleted it
    (404): the sync ends quietly, for the change's own event brings the key back, instead of failing
    and being retried with backoff."""
    api = harness.api
    await api.create(SETS, "default", daemon_set(), OPTS)
    await harness.sync()
    await harness.bind_ready()
    await api.cache.wait_consistent()
    late = LateCache(api.cache, monkeypatch)
    late.hold_from(lambda batch: True)  # the controller's view stays as it is now
    if change == "edited":
        await api.patch(SETS, "default", "agent", {"metadata": {"labels": {"team": "infra"}}}, "merge", OPTS)
    else:
        await api.delete(SETS, "default", "agent", None, None, None)
    assert late.held_events()
    harness.controller.reset()
    harness.controller.initial_keys()
    assert await harness.controller.sync(SETS.key("default", "agent")) is None  # 3 now ready: a status to write
    late.release()


async def test_a_settled_daemon_set_is_synced_without_a_single_write(harness, monkeypatch):
    await harness.api.create(SETS, "default", daemon_set(), OPTS)
    await harness.sync()
    await harness.bind_ready()
    await harness.sync()
    from corral.testing.server import record_writes

    writes = record_writes(harness.api, monkeypatch)
    await harness.sync()
    assert writes == []


async def test_each_daemon_made_or_replaced_is_an_event_on_the_daemon_set(harness):
    from corral.testing.server import recorded_events

    harness.controller.events.start()
    try:
        await harness.api.create(SETS, "default", daemon_set(), OPTS)
        await harness.sync()
        made = await harness.pods()
        await harness.bind_ready()
        current = copy.deepcopy((await harness.api.current(SETS, "default", "agent")).obj)
        current["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
        await harness.api.update(SETS, "default", "agent", current, OPTS)
        await harness.sync()  # maxUnavailable 1: one old daemon goes
        events = await recorded_events(harness.controller)
    finally:
        await harness.controller.events.stop()
    created = sorted(m for t, r, m in events if (t, r) == ("Normal", "SuccessfulCreate"))
    assert created == [f"Created pod on node {n}" for n in sorted(made)]
    deleted = [m for t, r, m in events if (t, r) == ("Normal", "SuccessfulDelete")]
    assert len(deleted) == 1 and deleted[0] in {f"Deleted pod: {p['metadata']['name']}" for p in made.values()}


async def test_a_node_change_queues_the_daemon_sets_only_when_its_labels_or_taints_change(harness):
    """A heartbeat (status) changes nothing a DaemonSet reads; a label, a taint, a node added or
    removed may change where its daemons belong. A change of one of its pods queues it too."""
    api, controller = harness.api, harness.controller
    await api.create(SETS, "default", daemon_set(), OPTS)
    await harness.sync()
    events: list = []
    api.cache.on_event.append(events.append)

    async def queued_by(change) -> list[list[str]]:
        events.clear()
        await change()
        await api.cache.wait_consistent()
        return [sorted(controller.keys_for(e)) for e in events if e.key.startswith(NODES.store_prefix)]

    ds = [SETS.key("default", "agent")]
    def beat(second: int):
        return lambda: api.patch(NODES, None, "n2", {"status": {"conditions": [{
            "type": "Ready", "status": "True", "lastHeartbeatTime": f"2030-01-01T00:00:{second:02d}Z"}]}},
            "merge", OPTS, subresource="status")
    assert await queued_by(beat(1)) == [ds]  # the first it hears of n2: its shape not known yet
    assert await queued_by(beat(2)) == [[]]
    assert await queued_by(lambda: api.patch(NODES, None, "n2", {"metadata": {"labels": {"disk": "ssd"}}},
                                             "merge", OPTS)) == [ds]
    assert await queued_by(lambda: api.patch(NODES, None, "n2", {"spec": {"taints": [
        {"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}}, "merge", OPTS)) == [ds]
    assert await queued_by(lambda: api.create(NODES, None, NodeBuilder("n9").obj, OPTS)) == [ds]
    assert await queued_by(lambda: api.delete(NODES, None, "n9", None, None, None)) == [ds]
    uid = api.cache.get(ds[0]).obj["metadata"]["uid"]
    events.clear()
    await api.create(PODS, "default", {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "agent-extra", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                                    "uid": uid, "controller": True}]},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}, OPTS)
    await api.cache.wait_consistent()
    assert [sorted(controller.keys_for(e)) for e in events if e.key.startswith(PODS.store_prefix)] == [ds]  # its pod
